// A link-time stand-in for the CUDA driver (libcuda.so.1), for a toolkit installed
// without the driver's stubs (no lib64/stubs/libcuda.so): the seven driver calls
// cuda_sample makes, each answering CUDA_ERROR_STUB_LIBRARY, as NVIDIA's own stub
// does. cuda_sample only links against it: its run path never names this folder, so
// where a driver is installed the loader maps the real libcuda.so.1.
#include <cuda.h>

extern "C" {

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                     unsigned long long) {
    return CUDA_ERROR_STUB_LIBRARY;
}
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr, size_t) { return CUDA_ERROR_STUB_LIBRARY; }
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                             unsigned long long) {
    return CUDA_ERROR_STUB_LIBRARY;
}
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle) { return CUDA_ERROR_STUB_LIBRARY; }
CUresult CUDAAPI cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                          unsigned long long) {
    return CUDA_ERROR_STUB_LIBRARY;
}
CUresult CUDAAPI cuMemUnmap(CUdeviceptr, size_t) { return CUDA_ERROR_STUB_LIBRARY; }
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t*, const CUmemAllocationProp*,
                                               CUmemAllocationGranularity_flags) {
    return CUDA_ERROR_STUB_LIBRARY;
}

}  // extern "C"
