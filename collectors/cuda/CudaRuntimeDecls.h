#pragma once
// The CUDA runtime functions memtool hooks, declared as the runtime declares them
// (cuda_runtime_api.h), without its headers: the collector builds and runs with no
// CUDA toolkit. cudaError_t is an enum whose success value is 0, passed as an int;
// streams are opaque pointers. Declarations only: the collector never links the
// runtime, and reaches these through MEMTOOL_ORIGINAL.

#include <cstddef>

extern "C" {
int cudaGetDevice(int* device);
int cudaMalloc(void** devPtr, size_t size);
int cudaMallocAsync(void** devPtr, size_t size, void* stream);
int cudaMallocManaged(void** devPtr, size_t size, unsigned int flags);
int cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height);
int cudaFree(void* devPtr);
int cudaFreeAsync(void* devPtr, void* stream);
int cudaMallocHost(void** ptr, size_t size);
int cudaHostAlloc(void** pHost, size_t size, unsigned int flags);
int cudaFreeHost(void* ptr);
// status: cudaStreamCaptureStatus (0 none, 1 active, 2 invalidated)
int cudaStreamIsCapturing(void* stream, int* status);
}
