// Plain CUDA (runtime API, and the driver's VMM API), no torch: device memory of
// known sizes for `memtool run`.
//
//   cuda_sample          allocate, print "granularity G", exit 0
//   cuda_sample --probe  exit 0 when a CUDA device is usable, 77 when not
//
// On the current device, in order (G = the VMM allocation granularity):
//   keepActivations  cudaMalloc        3,000,000 B, live until the end
//   managedScratch   cudaMallocManaged 2,000,000 B, freed (peak 5,000,000 here)
//   asyncScratch     cudaMallocAsync     500,000 B, freed
//   vmmChunk         cuMemCreate               G B, mapped, its handle released
//                                                 at once (CUDA's guide does so:
//                                                 the bytes stay while mapped), then
//   whileMapped      cudaMalloc        2,500,000 B, freed (peak 5,500,000 + G
//                                                 here), then the chunk unmapped
//   leakOnPurpose    cudaMalloc          700,000 B, never freed
//   pinnedStaging    cudaMallocHost    1,000,000 B pinned host memory, freed
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK_RT(x)                                                      \
    do {                                                                 \
        cudaError_t e = (x);                                             \
        if (e != cudaSuccess) {                                          \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); \
            std::exit(1);                                                \
        }                                                                \
    } while (0)
#define CHECK_DRV(x)                                                          \
    do {                                                                      \
        CUresult r = (x);                                                     \
        if (r != CUDA_SUCCESS) {                                              \
            std::fprintf(stderr, "%s failed: %d\n", #x, static_cast<int>(r)); \
            std::exit(1);                                                     \
        }                                                                     \
    } while (0)

__attribute__((noinline)) void* keepActivations() {
    void* p = nullptr;
    CHECK_RT(cudaMalloc(&p, 3000000));
    return p;
}

__attribute__((noinline)) void managedScratch() {
    void* p = nullptr;
    CHECK_RT(cudaMallocManaged(&p, 2000000));
    CHECK_RT(cudaFree(p));
}

__attribute__((noinline)) void asyncScratch(cudaStream_t s) {
    void* p = nullptr;
    CHECK_RT(cudaMallocAsync(&p, 500000, s));
    CHECK_RT(cudaFreeAsync(p, s));
    CHECK_RT(cudaStreamSynchronize(s));
}

__attribute__((noinline)) void whileMapped() {
    void* p = nullptr;
    CHECK_RT(cudaMalloc(&p, 2500000));
    CHECK_RT(cudaFree(p));
}

__attribute__((noinline)) size_t vmmChunk(int device) {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    CHECK_DRV(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle handle;
    CHECK_DRV(cuMemCreate(&handle, granularity, &prop, 0));
    CUdeviceptr va;
    CHECK_DRV(cuMemAddressReserve(&va, granularity, 0, 0, 0));
    CHECK_DRV(cuMemMap(va, granularity, 0, handle, 0));
    CHECK_DRV(cuMemRelease(handle));
    whileMapped();
    CHECK_DRV(cuMemUnmap(va, granularity));
    CHECK_DRV(cuMemAddressFree(va, granularity));
    return granularity;
}

__attribute__((noinline)) void* leakOnPurpose() {
    void* p = nullptr;
    CHECK_RT(cudaMalloc(&p, 700000));
    return p;
}

__attribute__((noinline)) void pinnedStaging() {
    void* p = nullptr;
    CHECK_RT(cudaMallocHost(&p, 1000000));
    CHECK_RT(cudaFreeHost(p));
}

int main(int argc, char** argv) {
    int count = 0;
    bool usable = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    if (argc > 1 && std::strcmp(argv[1], "--probe") == 0) return usable ? 0 : 77;
    if (!usable) {
        std::fprintf(stderr, "cuda_sample: no usable CUDA device\n");
        return 77;
    }
    int device = 0;
    CHECK_RT(cudaSetDevice(device));
    cudaStream_t stream;
    CHECK_RT(cudaStreamCreate(&stream));
    void* activations = keepActivations();
    managedScratch();
    asyncScratch(stream);
    size_t granularity = vmmChunk(device);
    void* leaked = leakOnPurpose();
    pinnedStaging();
    CHECK_RT(cudaFree(activations));
    CHECK_RT(cudaStreamDestroy(stream));
    std::printf("granularity %zu\n", granularity);
    return leaked ? 0 : 1;
}
