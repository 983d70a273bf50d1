// PyTorch caching-allocator histories, as the torch bridge would report them,
// through the translator and the aggregator: the pools' peaks must be what
// torch.cuda.max_memory_allocated() and max_memory_reserved() would say.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/cuda/CachingAllocatorTranslator.h"
#include "core/Aggregator.h"
#include "core/Protocol.h"

using namespace memtool;
using namespace memtool::collectors;

namespace {

constexpr uint64_t MiB = 1ull << 20;

// What the collector's tracker does with a sink's calls: a free of a key it never
// recorded says nothing; a free goes to the device its block was recorded on.
struct TrackerLike : AllocationSink {
    core::Aggregator agg;
    std::map<uint64_t, uint8_t> live;
    uint64_t now = 0;
    void alloc(uint8_t device, uint64_t key, uint64_t size) override {
        live[key] = device;
        core::AllocRecord a;
        a.f = core::AllocFields{device, key, size, 0, 0, 1};
        a.timeNs = ++now;
        agg.onAlloc(a);
    }
    void free(uint64_t key) override {
        auto it = live.find(key);
        if (it == live.end()) return;
        core::FreeRecord f;
        f.f = core::FreeFields{it->second, key, 1};
        f.timeNs = ++now;
        live.erase(it);
        agg.onFree(f);
    }
    const core::DeviceState& pool(int ordinal, core::DevicePool p) {
        return agg.devices().at(core::cudaDevice(ordinal, p));
    }
};

void feed(TrackerLike& t, std::initializer_list<AllocatorEvent> events) {
    for (const auto& e : events) translateAllocatorEvent(e, t);
}

}  // namespace

TEST(CachingAllocatorTranslator, ActiveAndReservedPerDevice) {
    TrackerLike t;
    const uint64_t seg0 = 0x7f0000000000ull, seg1 = 0x7f8000000000ull;
    feed(t,
         {
             {AllocatorAction::SegmentAlloc, 0, seg0, 20 * MiB},
             {AllocatorAction::Alloc, 0, seg0, 6 * MiB},  // the segment's first block: same address
             {AllocatorAction::Alloc, 0, seg0 + 6 * MiB, 10 * MiB},
             {AllocatorAction::FreeRequested, 0, seg0, 6 * MiB},
             {AllocatorAction::FreeCompleted, 0, seg0, 6 * MiB},  // counts nothing more
             {AllocatorAction::Alloc, 0, seg0, 2 * MiB},          // reuse of the cached block
             {AllocatorAction::SegmentAlloc, 1, seg1, 2 * MiB},
             {AllocatorAction::Alloc, 1, seg1, 512},
             {AllocatorAction::Other, 0, 0, 999},  // SNAPSHOT / OOM entries
         });
    const auto& active0 = t.pool(0, core::DevicePool::Active);
    EXPECT_EQ(active0.peakBytes, 16 * MiB);
    EXPECT_EQ(active0.currentBytes, 12 * MiB);
    EXPECT_EQ(active0.allocCount, 3u);
    EXPECT_EQ(active0.freeCount, 1u);
    EXPECT_EQ(t.pool(0, core::DevicePool::Reserved).peakBytes, 20 * MiB);
    EXPECT_EQ(t.pool(1, core::DevicePool::Active).peakBytes, 512u);
    EXPECT_EQ(t.pool(1, core::DevicePool::Reserved).currentBytes, 2 * MiB);
    feed(t, {{AllocatorAction::FreeRequested, 0, seg0, 2 * MiB},
             {AllocatorAction::FreeRequested, 0, seg0 + 6 * MiB, 10 * MiB},
             {AllocatorAction::SegmentFree, 0, seg0, 20 * MiB}});  // empty_cache()
    EXPECT_EQ(t.pool(0, core::DevicePool::Reserved).currentBytes, 0u);
    EXPECT_EQ(t.pool(0, core::DevicePool::Active).currentBytes, 0u);
    EXPECT_EQ(t.agg.unmatchedFrees(), 0u);
    EXPECT_EQ(t.agg.doubleAllocs(), 0u);
}

TEST(CachingAllocatorTranslator, ExpandableSegmentsMapAndUnmapInPages) {
    TrackerLike t;
    const uint64_t base = 0x7f0000000000ull;
    // Grown in two maps, shrunk by an unmap that cuts across both.
    feed(t, {{AllocatorAction::SegmentMap, 0, base, 20 * MiB},
             {AllocatorAction::SegmentMap, 0, base + 20 * MiB, 40 * MiB},
             {AllocatorAction::SegmentUnmap, 0, base + 10 * MiB, 30 * MiB}});
    const auto& reserved = t.pool(0, core::DevicePool::Reserved);
    EXPECT_EQ(reserved.peakBytes, 60 * MiB);
    EXPECT_EQ(reserved.currentBytes, 30 * MiB);
    EXPECT_EQ(reserved.allocCount, 30u);  // 2 MiB pages
    EXPECT_EQ(reserved.freeCount, 15u);
    // The rest goes; the pool is empty and every free matched.
    feed(t, {{AllocatorAction::SegmentUnmap, 0, base, 10 * MiB},
             {AllocatorAction::SegmentUnmap, 0, base + 40 * MiB, 20 * MiB}});
    EXPECT_EQ(reserved.currentBytes, 0u);
    EXPECT_EQ(t.agg.unmatchedFrees(), 0u);
}

TEST(CachingAllocatorTranslator, PoolKeysNeverCollideWithDeviceLevelKeys) {
    // The driver-level row sees the segment's cudaMalloc at the same address as the
    // reserved segment and the active block inside it: three live entries, one table.
    TrackerLike t;
    const uint64_t p = 0x7f0000000000ull;
    t.alloc(core::cudaDevice(0), p, 20 * MiB);  // what CUPTI records for cuMemAlloc
    feed(t, {{AllocatorAction::SegmentAlloc, 0, p, 20 * MiB},
             {AllocatorAction::Alloc, 0, p, 4 * MiB}});
    EXPECT_EQ(t.live.size(), 3u);
    EXPECT_EQ(t.agg.devices().at(core::cudaDevice(0)).currentBytes, 20 * MiB);
    EXPECT_EQ(t.pool(0, core::DevicePool::Reserved).currentBytes, 20 * MiB);
    EXPECT_EQ(t.pool(0, core::DevicePool::Active).currentBytes, 4 * MiB);
}

TEST(CachingAllocatorTranslator, SnapshotBlocksLieBackToBack) {
    TrackerLike t;
    const uint64_t a = 0x7f0000000000ull, b = 0x7f4000000000ull;
    replaySnapshot(
        {SnapshotSegment{
             0, a, 20 * MiB, false, {{4 * MiB, true}, {6 * MiB, false}, {10 * MiB, true}}},
         SnapshotSegment{2, b, 4 * MiB, true, {{4 * MiB, true}}}},
        t);
    EXPECT_EQ(t.pool(0, core::DevicePool::Active).currentBytes, 14 * MiB);
    EXPECT_EQ(t.pool(0, core::DevicePool::Reserved).currentBytes, 20 * MiB);
    EXPECT_EQ(t.pool(2, core::DevicePool::Reserved).allocCount, 2u);  // expandable: pages
    // The third block started at a + 10 MiB: freeing it there matches.
    feed(t, {{AllocatorAction::FreeRequested, 0, a + 10 * MiB, 10 * MiB}});
    EXPECT_EQ(t.pool(0, core::DevicePool::Active).currentBytes, 4 * MiB);
}

TEST(CachingAllocatorTranslator, UnknownDevicesAreIgnored) {
    TrackerLike t;
    feed(t, {{AllocatorAction::Alloc, -1, 0x1000, 10}, {AllocatorAction::Alloc, 64, 0x2000, 10}});
    EXPECT_TRUE(t.agg.devices().empty());
}

// torch raised OutOfMemoryError: its OOM entry carries the request's size and,
// in its address, the device's free bytes.
TEST(CachingAllocatorTranslator, TheAllocatorsOutOfMemoryErrorIsAnEvent) {
    struct Log : AllocationSink {
        std::vector<std::tuple<uint8_t, uint64_t, bool, uint64_t>> ooms;
        void alloc(uint8_t, uint64_t, uint64_t) override {}
        void free(uint64_t) override {}
        void oom(uint8_t device, uint64_t size, bool torch, uint64_t deviceFree) override {
            ooms.emplace_back(device, size, torch, deviceFree);
        }
    } log;
    translateAllocatorEvent({AllocatorAction::Oom, 1, 300 * MiB, 4096 * MiB}, log);
    ASSERT_EQ(log.ooms.size(), 1u);
    EXPECT_EQ(log.ooms[0], std::make_tuple(core::cudaDevice(1), 4096 * MiB, true, 300 * MiB));
}

// A private pool's blocks and segments count in active and reserved as every
// other, and again in graphs_active and graphs, each pool apart by its number:
// the aggregator's per-pool peaks are what that pool alone held.
TEST(CachingAllocatorTranslator, PrivatePoolsAreCountedAgainEachApart) {
    struct Noting : TrackerLike {
        std::vector<std::string> notes;
        void note(const char* key, const char* text) override {
            notes.push_back(std::string(key) + " " + text);
        }
    } t;
    graphPoolNumbers().reset();
    const uint64_t a = 0x7f0000000000ull, b = 0x7f4000000000ull;
    const MempoolId graph{5, 0}, handle{0, 3};
    feed(t, {
                {AllocatorAction::SegmentAlloc, 1, a, 8 * MiB, graph},
                {AllocatorAction::Alloc, 1, a, 6 * MiB, graph},
                {AllocatorAction::SegmentAlloc, 1, b, 2 * MiB, handle},
                {AllocatorAction::Alloc, 1, b, 2 * MiB, handle},
                {AllocatorAction::FreeRequested, 1, a, 6 * MiB, graph},
                {AllocatorAction::Alloc, 1, a, 1 * MiB, graph},
            });
    EXPECT_EQ(t.notes,
              (std::vector<std::string>{"cuda.graph_pool 1 1 5 0", "cuda.graph_pool 2 1 0 3"}));
    EXPECT_EQ(t.pool(1, core::DevicePool::Reserved).currentBytes, 10 * MiB);
    EXPECT_EQ(t.pool(1, core::DevicePool::Active).peakBytes, 8 * MiB);
    EXPECT_EQ(t.pool(1, core::DevicePool::Graphs).currentBytes, 10 * MiB);
    EXPECT_EQ(t.pool(1, core::DevicePool::GraphsActive).peakBytes, 8 * MiB);
    EXPECT_EQ(t.pool(1, core::DevicePool::GraphsActive).currentBytes, 3 * MiB);
    const auto& pools = t.agg.graphPools();
    ASSERT_EQ(pools.size(), 2u);
    EXPECT_EQ(pools.at(1).ordinal, 1);
    EXPECT_EQ(pools.at(1).reservedPeak, 8 * MiB);
    EXPECT_EQ(pools.at(1).activePeak, 6 * MiB);
    EXPECT_EQ(pools.at(1).activeBytes, 1 * MiB);
    EXPECT_EQ(pools.at(2).reservedPeak, 2 * MiB);
    EXPECT_EQ(pools.at(2).activePeak, 2 * MiB);
    // The same pool's id on another device is another pool.
    feed(t, {{AllocatorAction::SegmentAlloc, 0, 0x7f8000000000ull, 2 * MiB, graph}});
    EXPECT_EQ(t.notes.back(), "cuda.graph_pool 3 0 5 0");
    EXPECT_EQ(t.agg.graphPools().at(3).ordinal, 0);
    graphPoolNumbers().reset();
}

// A snapshot's segment names the pool that owns it; devices past the codes the
// graph rows have count in reserved alone.
TEST(CachingAllocatorTranslator, SnapshotSegmentsKeepTheirPoolAndFarDevicesOnlyReserved) {
    TrackerLike t;
    graphPoolNumbers().reset();
    const uint64_t a = 0x7f0000000000ull;
    replaySnapshot({SnapshotSegment{0, a, 4 * MiB, false, {{4 * MiB, true}}, MempoolId{9, 0}}}, t);
    EXPECT_EQ(t.pool(0, core::DevicePool::Graphs).currentBytes, 4 * MiB);
    EXPECT_EQ(t.pool(0, core::DevicePool::GraphsActive).currentBytes, 4 * MiB);
    feed(t, {{AllocatorAction::SegmentAlloc, 20, a + 64 * MiB, 2 * MiB, MempoolId{9, 0}}});
    EXPECT_EQ(t.pool(20, core::DevicePool::Reserved).currentBytes, 2 * MiB);
    EXPECT_EQ(t.agg.graphPools().size(), 1u);
    graphPoolNumbers().reset();
}
