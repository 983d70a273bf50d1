// A library that links the CUDA runtime, loaded by CudaLocalUser with RTLD_LOCAL
// as Python loads an extension module: its libcudart is in no global scope.
#include <cstddef>

// As cuda_runtime_api.h declares them (not included: this builds without CUDA).
extern "C" int cudaMalloc(void** out, size_t size);
extern "C" int cudaFree(void* p);
constexpr int cudaSuccess = 0;

extern "C" __attribute__((visibility("default"))) int allocate_and_free() {
    void* a = nullptr;
    void* b = nullptr;
    if (cudaMalloc(&a, 3000000) != cudaSuccess || cudaMalloc(&b, 1000000) != cudaSuccess) return 1;
    if (cudaFree(a) != cudaSuccess) return 2;
    return 0;  // b stays: 1,000,000 bytes held at the end
}
