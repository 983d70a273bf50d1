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
//   any of these in a private pool  -> again, in cuda:N.graphs_active (blocks) or
//   (mempool id not (0, 0): a CUDA     cuda:N.graphs (segments), keyed with the
//   graph's pool, a MemPool)           pool's number (core::graphPoolOfKey); a new
//                                      pool's number is named first by a
//                                      cuda.graph_pool note (N < 16 only)
//   OOM                           -> an out-of-memory event on cuda:N: the allocator
//                                                      raised OutOfMemoryError for
//                                                      `size` bytes (its `addr` is the
//                                                      device's free bytes then)
//   FREE_COMPLETED, SNAPSHOT      -> nothing
//
// No torch header here: the bridge (collectors/torch/TorchBridge.cpp) fills
// AllocatorEvent from torch's TraceEntry, and tests feed recorded sequences.

#include <cstdint>
#include <mutex>
#include <utility>
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

// PyTorch's MempoolId_t: (0, 0) is the device's default pools; a CUDA graph's own
// pool is (capture id, 0), one made by graph_pool_handle() or torch.cuda.MemPool
// is (0, uid).
struct MempoolId {
    uint64_t first = 0;
    uint64_t second = 0;
    bool isPrivate() const { return first != 0 || second != 0; }
};

struct AllocatorEvent {
    AllocatorEvent() = default;
    AllocatorEvent(AllocatorAction a, int d, uint64_t at, uint64_t bytes, MempoolId in = {})
        : action(a), device(d), address(at), size(bytes), pool(in) {}
    AllocatorAction action = AllocatorAction::Other;
    int device = -1;       // CUDA ordinal
    uint64_t address = 0;  // block or segment start
    uint64_t size = 0;     // bytes
    MempoolId pool;        // where the torch recording it says (older ones: (0, 0))
};

// Pool blocks share addresses with each other and with the driver-level row (a
// segment's first block starts where the segment does), so their keys carry the
// protocol's pool tag bits (core::kKeyActivePool, core::kKeyReservedPool).

// The allocator maps and unmaps expandable segments in whole pages of 2 MiB (small
// pool) or 20 MiB (large pool), and an unmap need not match any one earlier map.
// Counting in 2 MiB pages keeps every byte exact whichever ranges come and go; a
// range that is not made of whole pages is counted as one block.
inline constexpr uint64_t kExpandablePageBytes = 2ull << 20;

// Numbers the private pools as they appear, 1 and up, for the graph-pool keys.
// One per process, behind the translator; safe from any thread (the allocator
// calls its tracker under a lock per device).
class GraphPoolNumbers {
public:
    static constexpr uint32_t kCapacity = 1024;  // pools past this are counted in reserved only
    // The pool's number, or 0 when the table is full. A new one is named to the
    // sink (AllocationSink::note) before its number is first used.
    uint32_t numberOf(int device, const MempoolId& pool, AllocationSink& sink);
    void reset();  // tests

private:
    struct Entry {
        int device = -1;
        MempoolId pool;
    };
    std::mutex mutex_;
    Entry entries_[kCapacity];  // under mutex_
    uint32_t used_ = 0;         // under mutex_
};
GraphPoolNumbers& graphPoolNumbers();

void translateAllocatorEvent(const AllocatorEvent& event, AllocationSink& sink);

// What the allocator held when the bridge attached (its snapshot), replayed as
// events. Blocks lie back to back from their segment's start.
struct SnapshotBlock {
    uint64_t size = 0;
    bool allocated = false;
};
struct SnapshotSegment {
    SnapshotSegment() = default;
    SnapshotSegment(int d, uint64_t at, uint64_t total, bool exp, std::vector<SnapshotBlock> b,
                    MempoolId in = {})
        : device(d),
          address(at),
          totalSize(total),
          expandable(exp),
          blocks(std::move(b)),
          pool(in) {}
    int device = -1;
    uint64_t address = 0;
    uint64_t totalSize = 0;
    bool expandable = false;
    std::vector<SnapshotBlock> blocks;
    MempoolId pool;  // owner_private_pool_id
};
void replaySnapshot(const std::vector<SnapshotSegment>& segments, AllocationSink& sink);

}  // namespace memtool::collectors
