// A CUDA runtime user with known allocations, linked against the fake runtime
// (FakeCudart.cpp) and a fake libc10_cuda.so, profiled by RunCudaHooksTest.
//   cuda:0  3,000,000 (freed), then 5,000,000 (leaked): peak 5,000,000
//   cuda:1  2,000,000 (freed)
//   pinned  1,000,000 (freed)
// With FAKE_CUDA_OOM=1 it then asks cuda:0 for 2 GiB, more than the fake device
// has: cudaErrorMemoryAllocation, while the 5,000,000 bytes are held.
#include <cstddef>
#include <cstdio>
#include <cstdlib>

extern "C" {
int cudaSetDevice(int);
int cudaMalloc(void**, size_t);
int cudaFree(void*);
int cudaMallocHost(void**, size_t);
int cudaFreeHost(void*);
int fake_c10_cuda_present();
}

int main() {
    if (!fake_c10_cuda_present()) return 3;
    void *a = nullptr, *b = nullptr, *c = nullptr, *pinned = nullptr;
    if (cudaMalloc(&a, 3000000) || cudaMallocHost(&pinned, 1000000)) return 1;
    cudaFree(a);
    cudaFreeHost(pinned);
    cudaSetDevice(1);
    if (cudaMalloc(&b, 2000000)) return 1;
    cudaFree(b);
    cudaSetDevice(0);
    if (cudaMalloc(&c, 5000000)) return 1;  // leaked on purpose
    if (std::getenv("FAKE_CUDA_OOM")) {
        void* huge = nullptr;
        if (cudaMalloc(&huge, size_t{2} << 30) != 2) return 1;
        std::printf("out of memory\n");
    }
    std::printf("done\n");
    return 0;
}
