#include "collectors/cuda/CachingAllocatorTranslator.h"

#include "core/Protocol.h"

namespace memtool::collectors {

namespace {

// Calls fn(key, bytes) for each 2 MiB page of a mapped range, or once for the
// whole range when it is not made of whole pages.
template <typename Fn>
void forEachPage(const AllocatorEvent& e, Fn fn) {
    const bool paged =
        e.size != 0 && e.address % kExpandablePageBytes == 0 && e.size % kExpandablePageBytes == 0;
    if (!paged) return fn(e.address | core::kKeyReservedPool, e.size);
    for (uint64_t off = 0; off < e.size; off += kExpandablePageBytes)
        fn((e.address + off) | core::kKeyReservedPool, kExpandablePageBytes);
}

}  // namespace

void translateAllocatorEvent(const AllocatorEvent& e, AllocationSink& sink) {
    if (e.device < 0 || e.device >= core::kMaxCudaDevices) return;
    const uint8_t active = core::cudaDevice(e.device, core::DevicePool::Active);
    const uint8_t reserved = core::cudaDevice(e.device, core::DevicePool::Reserved);
    switch (e.action) {
        case AllocatorAction::Alloc:
            sink.alloc(active, e.address | core::kKeyActivePool, e.size);
            break;
        case AllocatorAction::FreeRequested:
            sink.free(e.address | core::kKeyActivePool);
            break;
        case AllocatorAction::SegmentAlloc:
            sink.alloc(reserved, e.address | core::kKeyReservedPool, e.size);
            break;
        case AllocatorAction::SegmentFree:
            sink.free(e.address | core::kKeyReservedPool);
            break;
        case AllocatorAction::SegmentMap:
            forEachPage(e, [&](uint64_t key, uint64_t bytes) { sink.alloc(reserved, key, bytes); });
            break;
        case AllocatorAction::SegmentUnmap:
            forEachPage(e, [&](uint64_t key, uint64_t) { sink.free(key); });
            break;
        case AllocatorAction::Oom:
            sink.oom(core::cudaDevice(e.device), e.size, true, e.address);
            break;
        case AllocatorAction::FreeCompleted:
        case AllocatorAction::Other:
            break;
    }
}

void replaySnapshot(const std::vector<SnapshotSegment>& segments, AllocationSink& sink) {
    for (const SnapshotSegment& s : segments) {
        AllocatorEvent seg{
            s.expandable ? AllocatorAction::SegmentMap : AllocatorAction::SegmentAlloc, s.device,
            s.address, s.totalSize};
        translateAllocatorEvent(seg, sink);
        uint64_t at = s.address;
        for (const SnapshotBlock& b : s.blocks) {
            if (b.allocated)
                translateAllocatorEvent({AllocatorAction::Alloc, s.device, at, b.size}, sink);
            at += b.size;
        }
    }
}

}  // namespace memtool::collectors
