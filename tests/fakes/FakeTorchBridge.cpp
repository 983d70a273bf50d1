// A torch bridge without torch: it speaks the bridge's C surface
// (collectors/torch/TorchBridgeApi.h) and replays a scripted caching-allocator
// history through the real translator, so loading, build-id matching, recording
// and the trace's active/reserved figures are tested where no CUDA torch exists.
//
// Script (device 0; MiB = 2^20), with the figures it must produce:
//   snapshot: segment A of 20 MiB, its first block of 4 MiB allocated
//   ALLOC A+4 MiB, 8 MiB               active 12 MiB
//   SEGMENT_MAP B, 6 MiB (expandable)                   reserved 26 MiB (peak)
//   ALLOC B, 2 MiB                     active 14 MiB (peak)
//   FREE_REQUESTED A, FREE_COMPLETED A active 10 MiB
//   SEGMENT_UNMAP B+2 MiB, 4 MiB                        reserved 22 MiB
//
// With FAKE_BRIDGE_GRAPHS set, then three private pools: a graph's own (1, 0),
// a second graph's (2, 0), and one made by graph_pool_handle() (0, 7), numbered
// #1, #2, #3 as they come:
//   SEGMENT_ALLOC C, 8 MiB in (1, 0)    graphs 8                     #1 reserved 8
//   ALLOC C, 6 MiB in (1, 0)            graphs_active 6              #1 active 6
//   SEGMENT_ALLOC D, 10 MiB in (2, 0)   graphs 18                    #2 reserved 10
//   ALLOC D, 4 MiB in (2, 0)            graphs_active 10 (peak)      #2 active 4
//   FREE_REQUESTED C in (1, 0)          graphs_active 4              #1 active 0
//   ALLOC D+4 MiB, 2 MiB in (2, 0)      graphs_active 6              #2 active 6 (peak)
//   SEGMENT_MAP E, 4 MiB in (0, 7)      graphs 22 (peak)             #3 reserved 4
//   SEGMENT_FREE C in (1, 0)            graphs 14                    #1 reserved 0
// so reserved ends at 22 + 14 = 36 MiB (peak 44 MiB), active at 10 + 6 = 16 MiB
// (peak 20 MiB); the three pools' peaks add up to 22 MiB, their blocks held 10 MiB
// at most at once.
#include <cstdlib>

#include "collectors/cuda/CachingAllocatorTranslator.h"
#include "collectors/torch/BridgeHostSink.h"

namespace {
using namespace memtool::collectors;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t A = 0x7f1000000000ull;
constexpr uint64_t B = 0x7f2000000000ull;
constexpr uint64_t C = 0x7f3000000000ull;
constexpr uint64_t D = 0x7f4000000000ull;
constexpr uint64_t E = 0x7f5000000000ull;

void replayGraphPools(AllocationSink& sink) {
    const MempoolId first{1, 0}, second{2, 0}, shared{0, 7};
    const AllocatorEvent script[] = {
        {AllocatorAction::SegmentAlloc, 0, C, 8 * MiB, first},
        {AllocatorAction::Alloc, 0, C, 6 * MiB, first},
        {AllocatorAction::SegmentAlloc, 0, D, 10 * MiB, second},
        {AllocatorAction::Alloc, 0, D, 4 * MiB, second},
        {AllocatorAction::FreeRequested, 0, C, 6 * MiB, first},
        {AllocatorAction::Alloc, 0, D + 4 * MiB, 2 * MiB, second},
        {AllocatorAction::SegmentMap, 0, E, 4 * MiB, shared},
        {AllocatorAction::SegmentFree, 0, C, 8 * MiB, first},
    };
    for (const AllocatorEvent& e : script) translateAllocatorEvent(e, sink);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) const char* memtool_torch_bridge_build_id(void) {
    const char* id = std::getenv("FAKE_BRIDGE_BUILD_ID");
    return id ? id : "1234abcd";
}

// What a yield asks before it empties the cache: counted, for a test to read
// (fake_torch_bridge_workspace_releases).
namespace {
int gWorkspaceReleases = 0;
}
extern "C" __attribute__((visibility("default"))) int memtool_torch_bridge_release_workspaces(
    void) {
    ++gWorkspaceReleases;
    return 1;
}
extern "C" __attribute__((visibility("default"))) int fake_torch_bridge_workspace_releases(void) {
    return gWorkspaceReleases;
}

extern "C" __attribute__((visibility("default"))) const char* memtool_torch_bridge_torch_version(
    void) {
    return "2.14.1";
}

extern "C" __attribute__((visibility("default"))) int memtool_torch_bridge_attach(
    const MemtoolBridgeHost* host) {
    if (!host || host->version != kMemtoolBridgeApiVersion) return kMemtoolBridgeRefused;
    if (std::getenv("FAKE_BRIDGE_REFUSE")) {
        host->warn("fake bridge: allocator backend is 'cudaMallocAsync'");
        return kMemtoolBridgeRefused;
    }
    BridgeHostSink sink(*host);
    replaySnapshot({SnapshotSegment{0, A, 20 * MiB, false, {{4 * MiB, true}, {16 * MiB, false}}}},
                   sink);
    const AllocatorEvent script[] = {
        {AllocatorAction::Alloc, 0, A + 4 * MiB, 8 * MiB},
        {AllocatorAction::SegmentMap, 0, B, 6 * MiB},
        {AllocatorAction::Alloc, 0, B, 2 * MiB},
        {AllocatorAction::FreeRequested, 0, A, 4 * MiB},
        {AllocatorAction::FreeCompleted, 0, A, 4 * MiB},
        {AllocatorAction::SegmentUnmap, 0, B + 2 * MiB, 4 * MiB},
    };
    for (const AllocatorEvent& e : script) translateAllocatorEvent(e, sink);
    if (std::getenv("FAKE_BRIDGE_GRAPHS")) replayGraphPools(sink);
    return kMemtoolBridgeAttached;
}
