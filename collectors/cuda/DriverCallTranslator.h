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
//   cuMemFree, cuMemFreeAsync, cuMemFreeHost -> free
//   cuMemRelease, cuMemUnmap                 -> free of VMM physical memory once
//                                               both happened (below)
// Allocations count when the call returns CUDA_SUCCESS; frees are reported when
// the call begins, before the memory can be handed out again. An allocation that
// returns CUDA_ERROR_OUT_OF_MEMORY is an out-of-memory event for its device.
//
// The driver frees VMM physical memory when its handle's last reference is
// released and its last mapping unmapped, in either order: CUDA's programming
// guide releases the handle right after mapping it, NCCL retains and releases a
// handle again around its unmap, PyTorch unmaps then releases. So the translator
// follows each handle it saw created: its references (cuMemCreate, and each
// cuMemRetainAllocationHandle) and its mappings (cuMemMap, cuMemUnmap).

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

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
    MemRetain,  // cuMemRetainAllocationHandle: one more reference to the handle mapped at `pointer`
    MemMap,     // `handle` mapped at `pointer` for `size` bytes
    MemUnmap,   // the mappings that start in [pointer, pointer + size) end
};

struct DriverCall {
    DriverApi api = DriverApi::MemAlloc;
    bool exit = false;  // false: the API-enter callback
    int result = 0;     // CUresult, at exit
    int device =
        -1;  // ordinal of the call's context device (or cuMemCreate's location); -1 unknown
    uint64_t pointer = 0;  // the allocated pointer (at exit) or the one freed
    uint64_t size = 0;     // bytes
    uint64_t handle = 0;   // cuMemCreate, cuMemRelease, cuMemRetainAllocationHandle, cuMemMap
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
    // A note for the stream (core::kNote* keys).
    virtual void note(const char* key, const char* text) {}
};

inline constexpr int kCudaErrorOutOfMemory =
    2;  // CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation

// One per process: the state of the VMM handles it saw. Thread-safe (CUPTI calls
// back on every thread that calls the driver); the sink is called under its lock,
// so that the events of one handle reach it in the order they happened.
class DriverCallTranslator {
public:
    void translate(const DriverCall& call, AllocationSink& sink);

private:
    struct Handle {
        uint64_t references = 0;
        uint64_t mappings = 0;
    };
    // The handle's bytes are freed once nothing holds them.
    void dropIfUnheld(std::unordered_map<uint64_t, Handle>::iterator it, AllocationSink& sink);
    void vmmCall(const DriverCall& call, AllocationSink& sink);

    std::mutex mu_;
    std::unordered_map<uint64_t, Handle> handles_;  // handles created and not yet freed
    std::map<uint64_t, uint64_t> mapped_;           // address of a mapping -> its handle
};

}  // namespace memtool::collectors
