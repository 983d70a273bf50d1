// A stand-in for libcudart.so.13 on machines without a GPU: "device" memory is
// host memory, the current device is per thread as in CUDA. It lets the runtime-
// hook route (collectors/cuda/CudaRuntimeHooks.cpp) run end to end under the real CLI;
// the same program against the real runtime needs a GPU.
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <set>

namespace {
thread_local int gDevice = 0;
constexpr int kSuccess = 0;
constexpr int kOutOfMemory = 2;  // cudaErrorMemoryAllocation

// The fake device's memory: a larger request fails as a full GPU would.
constexpr size_t kDeviceBytes = size_t{1} << 30;

// Streams being captured into a graph (cudaStreamBeginCapture .. EndCapture).
std::mutex captureMu;
std::set<void*> capturing;

int hostAlloc(void** out, size_t size) {
    if (size > kDeviceBytes) {
        *out = nullptr;
        return kOutOfMemory;
    }
    *out = std::malloc(size ? size : 1);
    return *out ? kSuccess : kOutOfMemory;
}
}  // namespace

extern "C" {
int cudaGetDevice(int* device) {
    *device = gDevice;
    return kSuccess;
}
int cudaSetDevice(int device) {
    gDevice = device;
    return kSuccess;
}
int cudaMalloc(void** out, size_t size) { return hostAlloc(out, size); }
int cudaMallocAsync(void** out, size_t size, void*) { return hostAlloc(out, size); }
int cudaMallocManaged(void** out, size_t size, unsigned) { return hostAlloc(out, size); }
int cudaMallocPitch(void** out, size_t* pitch, size_t width, size_t height) {
    *pitch = (width + 511) / 512 * 512;
    return hostAlloc(out, *pitch * height);
}
int cudaMallocHost(void** out, size_t size) { return hostAlloc(out, size); }
int cudaHostAlloc(void** out, size_t size, unsigned) { return hostAlloc(out, size); }
int cudaFree(void* p) {
    std::free(p);
    return kSuccess;
}
int cudaFreeAsync(void* p, void*) { return cudaFree(p); }
int cudaFreeHost(void* p) { return cudaFree(p); }
int cudaStreamBeginCapture(void* stream, int) {
    std::lock_guard lock(captureMu);
    capturing.insert(stream);
    return kSuccess;
}
int cudaStreamEndCapture(void* stream, void** graph) {
    std::lock_guard lock(captureMu);
    capturing.erase(stream);
    *graph = nullptr;
    return kSuccess;
}
int cudaStreamIsCapturing(void* stream, int* status) {
    std::lock_guard lock(captureMu);
    *status = capturing.count(stream) ? 1 : 0;  // cudaStreamCaptureStatusActive : None
    return kSuccess;
}
}
