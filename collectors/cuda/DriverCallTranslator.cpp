#include "collectors/cuda/DriverCallTranslator.h"

#include "core/Protocol.h"

namespace memtool::collectors {

// An unknown context is rare (CUPTI names one for every memory call); its bytes
// still count, on cuda:0 (core::cudaDeviceOrFirst), rather than vanish.
void translateDriverCall(const DriverCall& c, AllocationSink& sink) {
    switch (c.api) {
        case DriverApi::MemAlloc:
        case DriverApi::MemAllocPitch:
        case DriverApi::MemAllocManaged:
        case DriverApi::MemAllocAsync:
        case DriverApi::MemAllocFromPoolAsync:
            if (c.exit && c.result == 0 && c.pointer != 0)
                sink.alloc(core::cudaDeviceOrFirst(c.device), c.pointer, c.size);
            else if (c.exit && c.result == kCudaErrorOutOfMemory)
                sink.oom(core::cudaDeviceOrFirst(c.device), c.size, false, 0);
            break;
        case DriverApi::MemHostAlloc:
        case DriverApi::MemAllocHost:
            if (c.exit && c.result == 0 && c.pointer != 0)
                sink.alloc(core::kDevicePinnedHost, c.pointer, c.size);
            else if (c.exit && c.result == kCudaErrorOutOfMemory)
                sink.oom(core::kDevicePinnedHost, c.size, false, 0);
            break;
        case DriverApi::MemCreate: {
            const uint8_t device =
                c.host ? core::kDevicePinnedHost : core::cudaDeviceOrFirst(c.device);
            if (c.exit && c.result == 0 && c.handle != 0)
                sink.alloc(device, c.handle | core::kKeyVmmHandle, c.size);
            else if (c.exit && c.result == kCudaErrorOutOfMemory)
                sink.oom(device, c.size, false, 0);
        } break;
        case DriverApi::MemFree:
        case DriverApi::MemFreeAsync:
        case DriverApi::MemFreeHost:
            if (!c.exit && c.pointer != 0) sink.free(c.pointer);
            break;
        case DriverApi::MemRelease:
            if (!c.exit && c.handle != 0) sink.free(c.handle | core::kKeyVmmHandle);
            break;
    }
}

}  // namespace memtool::collectors
