// The timeline of live bytes: a bounded series whose highest sample is the
// device's peak, at its peak time, however many events went in.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/Aggregator.h"
#include "core/Timeline.h"

using namespace memtool::core;

namespace {

std::vector<std::pair<uint64_t, uint64_t>> pairs(const Timeline& t) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const TimelineSample& s : t.samples()) out.emplace_back(s.timeNs, s.bytes);
    return out;
}

// The first sample holding the most bytes.
TimelineSample highest(const std::vector<TimelineSample>& samples) {
    TimelineSample best;
    for (const TimelineSample& s : samples)
        if (s.bytes > best.bytes) best = s;
    return best;
}

AllocRecord alloc(uint64_t address, uint64_t size, uint64_t timeNs, uint64_t region = 0) {
    AllocRecord a;
    a.f = AllocFields{kDeviceCpu, address, size, 0, 0, 0, region};
    a.timeNs = timeNs;
    return a;
}

FreeRecord release(uint64_t address, uint64_t timeNs) {
    FreeRecord f;
    f.f = FreeFields{kDeviceCpu, address, 0};
    f.timeNs = timeNs;
    return f;
}

ControlRecord control(uint64_t region, ControlAction action, uint64_t timeNs, bool ok = true) {
    ControlRecord c;
    c.f.region = region;
    c.f.action = action;
    c.f.ok = ok;
    c.timeNs = timeNs;
    return c;
}

}  // namespace

TEST(Timeline, ABucketKeepsItsFirstLowestHighestAndLast) {
    Timeline t;
    // One 1.024 µs bucket: first 5, highest 9, lowest 1, last 4; the rest goes.
    t.record(100, 5);
    t.record(200, 7);
    t.record(300, 9);
    t.record(400, 2);
    t.record(500, 1);
    t.record(600, 4);
    EXPECT_EQ(pairs(t),
              (std::vector<std::pair<uint64_t, uint64_t>>{{100, 5}, {300, 9}, {500, 1}, {600, 4}}));
    EXPECT_EQ(t.bucketNs(), 1024u);
}

TEST(Timeline, SamplesOfOneBucketThatCoincideComeOutOnce) {
    Timeline t;
    t.record(10, 3);  // first and lowest
    t.record(20, 8);  // highest and last
    EXPECT_EQ(pairs(t), (std::vector<std::pair<uint64_t, uint64_t>>{{10, 3}, {20, 8}}));
}

TEST(Timeline, WideningMergesNeighboursAndKeepsTheFirstTimeOfTheHighest) {
    Timeline t;
    // Buckets 0 and 1 (1024 ns each) both reach 50; then a time past 1024 buckets
    // doubles the width once, and they become one bucket.
    t.record(0, 10);
    t.record(500, 50);
    t.record(1100, 50);
    t.record(1200, 20);
    t.record(1024 * 1024, 7);
    EXPECT_EQ(t.bucketNs(), 2048u);
    EXPECT_EQ(pairs(t), (std::vector<std::pair<uint64_t, uint64_t>>{
                            {0, 10}, {500, 50}, {1200, 20}, {1024 * 1024, 7}}));
}

TEST(Timeline, AMillionSamplesStayWithinTheBound) {
    Timeline t;
    // A saw tooth over ~1 s with one spike of 999 at 0.5 s.
    for (uint64_t i = 0; i < 1000000; ++i) t.record(i * 1000, i == 500000 ? 999 : i % 100);
    const auto samples = t.samples();
    EXPECT_LE(samples.size(), Timeline::kMaxSamples);
    EXPECT_EQ(highest(samples).bytes, 999u);
    EXPECT_EQ(highest(samples).timeNs, 500000000u);
    EXPECT_EQ(samples.front().timeNs, 0u);
    EXPECT_EQ(samples.back().timeNs, 999999000u);
    EXPECT_TRUE(std::is_sorted(samples.begin(), samples.end(),
                               [](auto& a, auto& b) { return a.timeNs < b.timeNs; }));
}

TEST(AggregatorTimeline, TenMillionEventsKeepTheExactPeakWithinTheBound) {
    // 5 M allocations every 2 µs, each freed 6 µs later (3 blocks live between
    // events, 4 right after an allocation): 10 M events over 10 s. Every block is
    // 100 bytes but one of 1,000,000, so the peak is 1,000,300 bytes, first reached
    // when that block is allocated (three later allocations reach it again).
    constexpr uint64_t kAllocs = 5000000, kBig = 3333333;
    Aggregator agg;
    for (uint64_t i = 0; i < kAllocs; ++i) {
        agg.onAlloc(alloc(0x1000 + i, i == kBig ? 1000000 : 100, 2000 * i));
        if (i >= 3) agg.onFree(release(0x1000 + i - 3, 2000 * i + 1000));
    }
    const DeviceState& cpu = agg.devices().at(kDeviceCpu);
    ASSERT_EQ(cpu.allocCount + cpu.freeCount, 2 * kAllocs - 3);
    EXPECT_EQ(cpu.peakBytes, 1000300u);
    EXPECT_EQ(cpu.peakTimeNs, 2000 * kBig);
    const auto samples = cpu.timeline.samples();
    EXPECT_LE(samples.size(), Timeline::kMaxSamples);
    EXPECT_EQ(highest(samples).bytes, cpu.peakBytes);
    EXPECT_EQ(highest(samples).timeNs, cpu.peakTimeNs);
    EXPECT_EQ(samples.back().bytes, 300u);
    EXPECT_EQ(samples.back().timeNs, 2000 * (kAllocs - 1) + 1000);
}

TEST(AggregatorTimeline, PausesAndResumesMoveTheResidentBytes) {
    // Events 10 µs apart, each in a bucket of its own: every sample is kept.
    Aggregator agg;
    RegionRecord r;
    r.id = 1;
    r.tag = "kv";
    agg.onRegion(r);
    agg.onAlloc(alloc(0x10, 1000, 10000, 1));
    agg.onAlloc(alloc(0x20, 30, 20000));
    agg.onControl(control(1, ControlAction::Pause, 30000));          // 30 resident
    agg.onControl(control(1, ControlAction::Resume, 40000, false));  // failed: nothing changes
    agg.onFree(release(0x99, 45000));                                // unknown address: no sample
    agg.onAlloc(alloc(0x30, 2000, 50000));                           // 2030: the peak
    agg.onFree(release(0x30, 60000));                                // 30
    agg.onControl(control(1, ControlAction::Restore, 70000));        // 1030
    const DeviceState& cpu = agg.devices().at(kDeviceCpu);
    std::vector<std::pair<uint64_t, uint64_t>> want{{10000, 1000}, {20000, 1030}, {30000, 30},
                                                    {50000, 2030}, {60000, 30},   {70000, 1030}};
    EXPECT_EQ(pairs(cpu.timeline), want);
    EXPECT_EQ(cpu.peakBytes, 2030u);
    EXPECT_EQ(cpu.peakTimeNs, 50000u);
}
