#pragma once
// PyTorch's CUDA caching allocator, as its trace tracker reports it, turned into
// allocation events on the two pools of each device (core/Protocol.h):
//
//   ALLOC / FREE_REQUESTED        -> cuda:N.active    blocks handed to tensors; the
//                                                      allocator's allocated_bytes, so
//                                                      the active peak is what
//                                                      torch.cuda.max_memory_allocated()
//                                                      reports
//   SEGMENT_ALLOC / SEGMENT_FREE  -> cuda:N.reserved  cudaMalloc'd segments
//   SEGMENT_MAP / SEGMENT_UNMAP   -> cuda:N.reserved  expandable segments, in pages
//                                                      (see kExpandablePageBytes); the
//                                                      reserved peak is what
//                                                      torch.cuda.max_memory_reserved()
//                                                      reports
//   OOM                           -> an out-of-memory event on cuda:N: the allocator
//                                                      raised OutOfMemoryError for
//                                                      `size` bytes (its `addr` is the
//                                                      device's free bytes then)
//   FREE_COMPLETED, SNAPSHOT      -> nothing
//
// No torch header here: the bridge (collectors/torch/TorchBridge.cpp) fills
// AllocatorEvent from torch's TraceEntry, and tests feed recorded sequences.

#include <cstdint>
#include <vector>

#include "collectors/cuda/DriverCallTranslator.h"

namespace memtool::collectors {

enum class AllocatorAction : uint8_t {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Other,
};

struct AllocatorEvent {
    AllocatorAction action = AllocatorAction::Other;
    int device = -1;       // CUDA ordinal
    uint64_t address = 0;  // block or segment start
    uint64_t size = 0;     // bytes
};

// Pool blocks share addresses with each other and with the driver-level row (a
// segment's first block starts where the segment does), so their keys carry the
// protocol's pool tag bits (core::kKeyActivePool, core::kKeyReservedPool).

// The allocator maps and unmaps expandable segments in whole pages of 2 MiB (small
// pool) or 20 MiB (large pool), and an unmap need not match any one earlier map.
// Counting in 2 MiB pages keeps every byte exact whichever ranges come and go; a
// range that is not made of whole pages is counted as one block.
inline constexpr uint64_t kExpandablePageBytes = 2ull << 20;

void translateAllocatorEvent(const AllocatorEvent& event, AllocationSink& sink);

// What the allocator held when the bridge attached (its snapshot), replayed as
// events. Blocks lie back to back from their segment's start.
struct SnapshotBlock {
    uint64_t size = 0;
    bool allocated = false;
};
struct SnapshotSegment {
    int device = -1;
    uint64_t address = 0;
    uint64_t totalSize = 0;
    bool expandable = false;
    std::vector<SnapshotBlock> blocks;
};
void replaySnapshot(const std::vector<SnapshotSegment>& segments, AllocationSink& sink);

}  // namespace memtool::collectors
