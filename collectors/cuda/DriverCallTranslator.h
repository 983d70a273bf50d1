#pragma once
// CUDA driver calls, as the CUPTI callback saw them, turned into allocation
// events. No CUDA or CUPTI header here: CuptiCallbackDecoder fills DriverCall from
// the callback's parameter structs, and tests feed recorded sequences.
//
// What counts, each byte once:
//   cuMemAlloc, cuMemAllocPitch (pitch x height), cuMemAllocManaged,
//   cuMemAllocAsync, cuMemAllocFromPoolAsync -> cuda:N of the call's context
//   cuMemHostAlloc, cuMemAllocHost           -> the "pinned" row
//   cuMemCreate (VMM physical memory)        -> cuda:N of its location, or the
//                                               "pinned" row for a host location;
//                                               mapping the handle (cuMemMap) adds
//                                               nothing
//   cuMemFree, cuMemFreeAsync, cuMemFreeHost, cuMemRelease -> free
// Allocations count when the call returns CUDA_SUCCESS; frees are reported when
// the call begins, before the memory can be handed out again. An allocation that
// returns CUDA_ERROR_OUT_OF_MEMORY is an out-of-memory event for its device.

#include <cstdint>

namespace memtool::collectors {

enum class DriverApi : uint8_t {
    MemAlloc,
    MemAllocPitch,
    MemAllocManaged,
    MemAllocAsync,
    MemAllocFromPoolAsync,
    MemHostAlloc,
    MemAllocHost,
    MemCreate,
    MemFree,
    MemFreeAsync,
    MemFreeHost,
    MemRelease,
};

struct DriverCall {
    DriverApi api = DriverApi::MemAlloc;
    bool exit = false;  // false: the API-enter callback
    int result = 0;     // CUresult, at exit
    int device =
        -1;  // ordinal of the call's context device (or cuMemCreate's location); -1 unknown
    uint64_t pointer = 0;  // the allocated pointer (at exit) or the one freed
    uint64_t size = 0;     // bytes
    uint64_t handle = 0;   // cuMemCreate / cuMemRelease
    bool host = false;     // cuMemCreate of host memory (a host or host NUMA location)
};

class AllocationSink {
public:
    virtual ~AllocationSink() = default;
    virtual void alloc(uint8_t device, uint64_t key, uint64_t size) = 0;
    virtual void free(uint64_t key) = 0;
    // An allocation of `size` bytes that failed for want of memory. `torch`: the
    // caching allocator's own out-of-memory error (deviceFree as it reported).
    virtual void oom(uint8_t device, uint64_t size, bool torch, uint64_t deviceFree) {}
};

inline constexpr int kCudaErrorOutOfMemory =
    2;  // CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation

void translateDriverCall(const DriverCall& call, AllocationSink& sink);

}  // namespace memtool::collectors
