// The torch bridge: PyTorch's CUDA caching allocator, block by block. Built only
// against a torch with CUDA (2.2 or later: attachAllocatorTraceTracker and the
// trace entries' device field); loaded by the preload collector only into a
// process running that same torch build (collectors/torch/TorchBridgeLoader.cpp).
//
// The tracker runs synchronously on the allocating thread, under the allocator's
// per-device lock, so the caller's stacks are still there; the Python GIL may be
// held by this thread or by none. It therefore takes no GIL and only calls the
// collector, whose lock is never held while calling into torch; the collector
// sends from there only when its 256 KiB buffer is full (the CLI fell behind),
// never on its 50 ms timer.
// This is the only file that includes torch headers.

#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <functional>
#include <string>
#include <vector>

#include "collectors/cuda/CachingAllocatorTranslator.h"
#include "collectors/torch/BridgeHostSink.h"

#ifndef MEMTOOL_C10_CUDA_BUILD_ID
#error \
    "MEMTOOL_C10_CUDA_BUILD_ID must name the GNU build id of the libc10_cuda.so this bridge links"
#endif

namespace memtool::collectors {
namespace {

namespace CCA = c10::cuda::CUDACachingAllocator;

// The trace entry type, wherever this torch declares it (CUDACachingAllocator.h
// up to 2.7ish, c10/core/CachingDeviceAllocator.h since): the tracker's argument.
template <typename F>
struct ArgumentOf;
template <typename R, typename A>
struct ArgumentOf<std::function<R(const A&)>> {
    using type = A;
};
using TraceEntry = ArgumentOf<CCA::AllocatorTraceTracker>::type;

// The entry's device where this torch records it (device_, 2.2 and later, as
// far as the headers read here tell); otherwise the calling thread's device,
// which the allocator's device guard has set for allocations.
template <typename E>
auto deviceOf(const E& e, int) -> decltype(static_cast<int>(e.device_)) {
    return static_cast<int>(e.device_);
}
template <typename E>
int deviceOf(const E&, long) {
    int device = 0;
    return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

// The entry's private pool where this torch records it (mempool_, 2.6 and later
// as far as the headers read here tell); (0, 0) otherwise: every event then counts
// in the device's own pools only.
template <typename E>
auto poolOf(const E& e, int) -> decltype(MempoolId{static_cast<uint64_t>(e.mempool_.first),
                                                   static_cast<uint64_t>(e.mempool_.second)}) {
    return {static_cast<uint64_t>(e.mempool_.first), static_cast<uint64_t>(e.mempool_.second)};
}
template <typename E>
MempoolId poolOf(const E&, long) {
    return {};
}

// Likewise for a snapshot's segment (owner_private_pool_id).
template <typename S>
auto ownerOf(const S& s, int)
    -> decltype(MempoolId{static_cast<uint64_t>(s.owner_private_pool_id.first),
                          static_cast<uint64_t>(s.owner_private_pool_id.second)}) {
    return {static_cast<uint64_t>(s.owner_private_pool_id.first),
            static_cast<uint64_t>(s.owner_private_pool_id.second)};
}
template <typename S>
MempoolId ownerOf(const S&, long) {
    return {};
}

MemtoolBridgeHost gHost{};

AllocatorAction actionOf(const TraceEntry& e) {
    switch (e.action_) {
        case TraceEntry::ALLOC:
            return AllocatorAction::Alloc;
        case TraceEntry::FREE_REQUESTED:
            return AllocatorAction::FreeRequested;
        case TraceEntry::FREE_COMPLETED:
            return AllocatorAction::FreeCompleted;
        case TraceEntry::SEGMENT_ALLOC:
            return AllocatorAction::SegmentAlloc;
        case TraceEntry::SEGMENT_FREE:
            return AllocatorAction::SegmentFree;
        case TraceEntry::SEGMENT_MAP:
            return AllocatorAction::SegmentMap;
        case TraceEntry::SEGMENT_UNMAP:
            return AllocatorAction::SegmentUnmap;
        case TraceEntry::OOM:
            return AllocatorAction::Oom;
        default:
            return AllocatorAction::Other;
    }
}

void onTrace(const TraceEntry& e) {
    AllocatorEvent event;
    event.action = actionOf(e);
    event.device = deviceOf(e, 0);
    event.address = static_cast<uint64_t>(e.addr_);
    event.size = static_cast<uint64_t>(e.size_);
    event.pool = poolOf(e, 0);
    BridgeHostSink sink(gHost);
    translateAllocatorEvent(event, sink);
}

std::vector<SnapshotSegment> currentSegments() {
    std::vector<SnapshotSegment> out;
    for (const auto& s : CCA::snapshot().segments) {
        SnapshotSegment seg;
        seg.device = static_cast<int>(s.device);
        seg.address = static_cast<uint64_t>(s.address);
        seg.totalSize = static_cast<uint64_t>(s.total_size);
        seg.expandable = s.is_expandable;
        seg.pool = ownerOf(s, 0);
        for (const auto& b : s.blocks)
            seg.blocks.push_back({static_cast<uint64_t>(b.size), b.allocated});
        out.push_back(std::move(seg));
    }
    return out;
}

}  // namespace
}  // namespace memtool::collectors

// Courtesy: what the caching allocator holds unused goes back to the device
// before a yield (torch.cuda.empty_cache() without the GIL, which the control
// thread does not hold).
extern "C" __attribute__((visibility("default"))) void memtool_torch_bridge_empty_cache(void) {
    try {
        memtool::collectors::CCA::emptyCache();
    } catch (const std::exception&) {
        // Nothing to give back is no reason to fail a yield.
    }
}

// Courtesy: cuBLAS's workspaces before the cache is emptied. at::cuda::
// clearCublasWorkspaces() is libtorch_cuda's, which this bridge does not link:
// looked up in the process (which runs this very torch) by its mangled name.
extern "C" __attribute__((visibility("default"))) int memtool_torch_bridge_release_workspaces(
    void) {
    using ClearFn = void (*)();
    auto clear =
        reinterpret_cast<ClearFn>(dlsym(RTLD_DEFAULT, "_ZN2at4cuda21clearCublasWorkspacesEv"));
    if (!clear) return 0;
    try {
        clear();
    } catch (const std::exception&) {
        return 0;
    }
    return 1;
}

extern "C" __attribute__((visibility("default"))) const char* memtool_torch_bridge_build_id(void) {
    return MEMTOOL_C10_CUDA_BUILD_ID;
}

extern "C" __attribute__((visibility("default"))) const char* memtool_torch_bridge_torch_version(
    void) {
    return MEMTOOL_TORCH_VERSION_BUILT;
}

extern "C" __attribute__((visibility("default"))) int memtool_torch_bridge_attach(
    const MemtoolBridgeHost* host) {
    using namespace memtool::collectors;
    if (!host || host->version != kMemtoolBridgeApiVersion) return kMemtoolBridgeRefused;
    gHost = *host;
    try {
        CCA::CUDAAllocator* allocator = CCA::get();
        if (!allocator || !allocator->initialized()) return kMemtoolBridgeNotYet;
        std::string name = allocator->name();
        if (name != "native") {
            std::string why =
                "PyTorch's CUDA allocator backend is '" + name +
                "', which reports no blocks; cuda rows show driver-level figures only";
            gHost.warn(why.c_str());
            return kMemtoolBridgeRefused;
        }
        // What exists already, then every change. An event between the two is
        // not seen; the bridge attaches at the process's first device allocation,
        // when the allocator holds nothing yet.
        BridgeHostSink sink(gHost);
        replaySnapshot(currentSegments(), sink);
        allocator->attachAllocatorTraceTracker(&onTrace);
        return kMemtoolBridgeAttached;
    } catch (const std::exception& e) {
        std::string why = std::string("the torch bridge could not attach: ") + e.what();
        gHost.warn(why.c_str());
        return kMemtoolBridgeRefused;
    }
}
