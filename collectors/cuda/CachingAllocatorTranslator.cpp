#include "collectors/cuda/CachingAllocatorTranslator.h"

#include <cstdio>

#include "collectors/engine/NoDestroy.h"
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

// The block and segment events of one pool: the device's own (tag 0) or a
// private pool's again (tag kKeyGraphPool and its number). False for an event
// of no pool (it says nothing).
bool translateInPools(const AllocatorEvent& e, uint8_t active, uint8_t reserved, uint64_t tag,
                      AllocationSink& sink) {
    switch (e.action) {
        case AllocatorAction::Alloc:
            sink.alloc(active, e.address | core::kKeyActivePool | tag, e.size);
            break;
        case AllocatorAction::FreeRequested:
            sink.free(e.address | core::kKeyActivePool | tag);
            break;
        case AllocatorAction::SegmentAlloc:
            sink.alloc(reserved, e.address | core::kKeyReservedPool | tag, e.size);
            break;
        case AllocatorAction::SegmentFree:
            sink.free(e.address | core::kKeyReservedPool | tag);
            break;
        case AllocatorAction::SegmentMap:
            forEachPage(
                e, [&](uint64_t key, uint64_t bytes) { sink.alloc(reserved, key | tag, bytes); });
            break;
        case AllocatorAction::SegmentUnmap:
            forEachPage(e, [&](uint64_t key, uint64_t) { sink.free(key | tag); });
            break;
        default:
            return false;
    }
    return true;
}

}  // namespace

uint32_t GraphPoolNumbers::numberOf(int device, const MempoolId& pool, AllocationSink& sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint32_t i = 0; i < used_; ++i)
        if (entries_[i].device == device && entries_[i].pool.first == pool.first &&
            entries_[i].pool.second == pool.second)
            return i + 1;
    if (used_ == kCapacity) return 0;
    entries_[used_] = {device, pool};
    ++used_;
    char text[96];
    std::snprintf(text, sizeof text, "%u %d %llu %llu", used_, device,
                  static_cast<unsigned long long>(pool.first),
                  static_cast<unsigned long long>(pool.second));
    sink.note(core::kNoteGraphPool, text);
    return used_;
}

void GraphPoolNumbers::reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    used_ = 0;
}

GraphPoolNumbers& graphPoolNumbers() {
    static NoDestroy<GraphPoolNumbers> numbers;
    return numbers.value;
}

void translateAllocatorEvent(const AllocatorEvent& e, AllocationSink& sink) {
    if (e.device < 0 || e.device >= core::kMaxCudaDevices) return;
    if (translateInPools(e, core::cudaDevice(e.device, core::DevicePool::Active),
                         core::cudaDevice(e.device, core::DevicePool::Reserved), 0, sink)) {
        if (!e.pool.isPrivate() || e.device >= core::kMaxGraphPoolDevices) return;
        const uint32_t number = graphPoolNumbers().numberOf(e.device, e.pool, sink);
        if (number != 0)
            translateInPools(e, core::cudaDevice(e.device, core::DevicePool::GraphsActive),
                             core::cudaDevice(e.device, core::DevicePool::Graphs),
                             core::kKeyGraphPool | (uint64_t{number} << core::kKeyGraphPoolShift),
                             sink);
        return;
    }
    if (e.action == AllocatorAction::Oom)
        sink.oom(core::cudaDevice(e.device), e.size, true, e.address);
    // FreeCompleted, Other: nothing.
}

void replaySnapshot(const std::vector<SnapshotSegment>& segments, AllocationSink& sink) {
    for (const SnapshotSegment& s : segments) {
        AllocatorEvent seg{
            s.expandable ? AllocatorAction::SegmentMap : AllocatorAction::SegmentAlloc, s.device,
            s.address, s.totalSize, s.pool};
        translateAllocatorEvent(seg, sink);
        uint64_t at = s.address;
        for (const SnapshotBlock& b : s.blocks) {
            if (b.allocated)
                translateAllocatorEvent({AllocatorAction::Alloc, s.device, at, b.size, s.pool},
                                        sink);
            at += b.size;
        }
    }
}

}  // namespace memtool::collectors
