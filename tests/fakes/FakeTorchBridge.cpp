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
#include <cstdlib>

#include "collectors/cuda/CachingAllocatorTranslator.h"
#include "collectors/torch/BridgeHostSink.h"

namespace {
using namespace memtool::collectors;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t A = 0x7f1000000000ull;
constexpr uint64_t B = 0x7f2000000000ull;
}  // namespace

extern "C" __attribute__((visibility("default"))) const char* memtool_torch_bridge_build_id(void) {
    const char* id = std::getenv("FAKE_BRIDGE_BUILD_ID");
    return id ? id : "1234abcd";
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
    return kMemtoolBridgeAttached;
}
