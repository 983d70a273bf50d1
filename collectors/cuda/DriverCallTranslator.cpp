#include "collectors/cuda/DriverCallTranslator.h"

#include "core/Protocol.h"

namespace memtool::collectors {

// An unknown context is rare (CUPTI names one for every memory call); its bytes
// still count, on cuda:0 (core::cudaDeviceOrFirst), rather than vanish.
void DriverCallTranslator::translate(const DriverCall& c, AllocationSink& sink) {
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
        case DriverApi::MemCreate:
        case DriverApi::MemRelease:
        case DriverApi::MemRetain:
        case DriverApi::MemMap:
        case DriverApi::MemUnmap:
            vmmCall(c, sink);
            break;
        case DriverApi::MemFree:
        case DriverApi::MemFreeAsync:
        case DriverApi::MemFreeHost:
            if (!c.exit && c.pointer != 0) sink.free(c.pointer);
            break;
    }
}

void DriverCallTranslator::vmmCall(const DriverCall& c, AllocationSink& sink) {
    const bool succeeded = c.exit && c.result == 0;
    std::lock_guard lock(mu_);
    switch (c.api) {
        case DriverApi::MemCreate: {
            const uint8_t device =
                c.host ? core::kDevicePinnedHost : core::cudaDeviceOrFirst(c.device);
            if (succeeded && c.handle != 0) {
                handles_[c.handle] = Handle{1, 0};
                sink.alloc(device, c.handle | core::kKeyVmmHandle, c.size);
            } else if (c.exit && c.result == kCudaErrorOutOfMemory) {
                sink.oom(device, c.size, false, 0);
            }
        } break;
        case DriverApi::MemRetain:
            if (succeeded)
                if (auto it = handles_.find(c.handle); it != handles_.end())
                    ++it->second.references;
            break;
        case DriverApi::MemMap:
            if (succeeded)
                if (auto it = handles_.find(c.handle); it != handles_.end()) {
                    ++it->second.mappings;
                    mapped_[c.pointer] = c.handle;
                }
            break;
        case DriverApi::MemRelease:
            if (!c.exit)
                if (auto it = handles_.find(c.handle); it != handles_.end()) {
                    if (it->second.references > 0) --it->second.references;
                    dropIfUnheld(it, sink);
                }
            break;
        case DriverApi::MemUnmap:
            if (c.exit) break;
            for (auto m = mapped_.lower_bound(c.pointer);
                 m != mapped_.end() && m->first - c.pointer < c.size;) {
                if (auto it = handles_.find(m->second); it != handles_.end()) {
                    if (it->second.mappings > 0) --it->second.mappings;
                    dropIfUnheld(it, sink);
                }
                m = mapped_.erase(m);
            }
            break;
        default:
            break;
    }
}

void DriverCallTranslator::dropIfUnheld(std::unordered_map<uint64_t, Handle>::iterator it,
                                        AllocationSink& sink) {
    if (it->second.references > 0 || it->second.mappings > 0) return;
    sink.free(it->first | core::kKeyVmmHandle);
    handles_.erase(it);
}

}  // namespace memtool::collectors
