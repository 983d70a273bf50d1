// Recorded driver-call sequences through the translator and the real aggregator:
// what the CUPTI front end would feed on a GPU.
#include <gtest/gtest.h>

#include "collectors/cuda/DriverCallTranslator.h"
#include "core/Aggregator.h"
#include "trace/TraceModel.h"

using namespace memtool::collectors;
using namespace memtool::core;

namespace {

// Feeds the translator's events to an Aggregator, as the tracker and CLI would.
struct AggregatingSink : AllocationSink {
    DriverCallTranslator translator;
    Aggregator agg;
    std::unordered_map<uint64_t, uint8_t> deviceOf;
    uint64_t t = 0;
    void alloc(uint8_t device, uint64_t key, uint64_t size) override {
        deviceOf[key] = device;
        AllocRecord a;
        a.f = AllocFields{device, key, size, 0, 0, 1};
        a.timeNs = ++t;
        agg.onAlloc(a);
    }
    void free(uint64_t key) override {
        auto it = deviceOf.find(key);
        FreeRecord f;
        f.f = FreeFields{it == deviceOf.end() ? kDeviceCpu : it->second, key, 1};
        f.timeNs = ++t;
        agg.onFree(f);
    }
    const DeviceState& dev(uint8_t d) { return agg.devices().at(d); }
    std::vector<std::string> ooms;
    void oom(uint8_t device, uint64_t size, bool torch, uint64_t deviceFree) override {
        ooms.push_back(deviceName(device) + " " + std::to_string(size) +
                       (torch ? " torch " : " call ") + std::to_string(deviceFree));
    }
};

DriverCall enter(DriverApi api, uint64_t pointer = 0, uint64_t handle = 0) {
    DriverCall c;
    c.api = api;
    c.pointer = pointer;
    c.handle = handle;
    return c;
}

DriverCall exitOk(DriverApi api, int device, uint64_t pointer, uint64_t size, uint64_t handle = 0) {
    DriverCall c;
    c.api = api;
    c.exit = true;
    c.device = device;
    c.pointer = pointer;
    c.size = size;
    c.handle = handle;
    return c;
}

void call(AggregatingSink& s, DriverCall enterCall, DriverCall exitCall) {
    s.translator.translate(enterCall, s);
    s.translator.translate(exitCall, s);
}

constexpr uint8_t kCuda0 = kDeviceCudaBase, kCuda1 = kDeviceCudaBase + 1;

}  // namespace

TEST(DriverCallTranslator, ClassicAllocAndFreePerDevice) {
    AggregatingSink s;
    call(s, enter(DriverApi::MemAlloc), exitOk(DriverApi::MemAlloc, 0, 0x7f0000000000, 1 << 20));
    call(s, enter(DriverApi::MemAlloc), exitOk(DriverApi::MemAlloc, 1, 0x7f1000000000, 3 << 20));
    call(s, enter(DriverApi::MemAllocPitch),
         exitOk(DriverApi::MemAllocPitch, 0, 0x7f0000200000, 512 * 100));
    call(s, enter(DriverApi::MemFree, 0x7f0000000000), exitOk(DriverApi::MemFree, 0, 0, 0));
    EXPECT_EQ(s.dev(kCuda0).peakBytes, (1u << 20) + 51200u);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 51200u);
    EXPECT_EQ(s.dev(kCuda1).currentBytes, 3u << 20);
    EXPECT_EQ(s.agg.unmatchedFrees(), 0u);
}

TEST(DriverCallTranslator, FailedCallsAndNullFreesCountNothing) {
    AggregatingSink s;
    DriverCall oom = exitOk(DriverApi::MemAlloc, 0, 0, 80ull << 30);
    oom.result = 2;  // CUDA_ERROR_OUT_OF_MEMORY
    call(s, enter(DriverApi::MemAlloc), oom);
    call(s, enter(DriverApi::MemFree, 0), exitOk(DriverApi::MemFree, 0, 0, 0));
    EXPECT_TRUE(s.agg.devices().empty());
    // The out-of-memory failure is an event of its own; other failures are not.
    EXPECT_EQ(s.ooms, std::vector<std::string>{"cuda:0 85899345920 call 0"});
    DriverCall invalid = exitOk(DriverApi::MemAlloc, 0, 0, 100);
    invalid.result = 1;  // CUDA_ERROR_INVALID_VALUE
    call(s, enter(DriverApi::MemAlloc), invalid);
    EXPECT_EQ(s.ooms.size(), 1u);
}

TEST(DriverCallTranslator, VmmCountsPhysicalMemoryOnceHoweverMapped) {
    // PyTorch's expandable segments: cuMemCreate physical chunks, map them into a
    // reserved range, unmap, release. Mapping adds nothing; release frees.
    AggregatingSink s;
    const uint64_t h1 = 0x55550001, h2 = 0x55550002;
    call(s, enter(DriverApi::MemCreate), exitOk(DriverApi::MemCreate, 0, 0, 2 << 20, h1));
    call(s, enter(DriverApi::MemCreate), exitOk(DriverApi::MemCreate, 0, 0, 2 << 20, h2));
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 4u << 20);
    call(s, enter(DriverApi::MemRelease, 0, h1), exitOk(DriverApi::MemRelease, 0, 0, 0));
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 2u << 20);
    EXPECT_EQ(s.dev(kCuda0).peakBytes, 4u << 20);
    // A handle value equal to some pointer's value is still a different object.
    call(s, enter(DriverApi::MemAlloc), exitOk(DriverApi::MemAlloc, 0, h2, 100));
    EXPECT_EQ(s.dev(kCuda0).currentBytes, (2u << 20) + 100);
    // Host memory made through the same API is pinned host memory, not the device's.
    const uint64_t h3 = 0x55550003;
    DriverCall host = exitOk(DriverApi::MemCreate, 0, 0, 4 << 20, h3);
    host.host = true;
    call(s, enter(DriverApi::MemCreate), host);
    EXPECT_EQ(s.dev(kDevicePinnedHost).currentBytes, 4u << 20);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, (2u << 20) + 100);
    call(s, enter(DriverApi::MemRelease, 0, h3), exitOk(DriverApi::MemRelease, 0, 0, 0));
    EXPECT_EQ(s.dev(kDevicePinnedHost).currentBytes, 0u);
}

namespace {
// cuMemMap / cuMemUnmap of `bytes` at `address`.
void map(AggregatingSink& s, uint64_t address, uint64_t bytes, uint64_t handle) {
    DriverCall c = enter(DriverApi::MemMap, address, handle);
    c.size = bytes;
    DriverCall done = c;
    done.exit = true;
    call(s, c, done);
}
void unmap(AggregatingSink& s, uint64_t address, uint64_t bytes) {
    DriverCall c = enter(DriverApi::MemUnmap, address);
    c.size = bytes;
    DriverCall done = c;
    done.exit = true;
    call(s, c, done);
}
void release(AggregatingSink& s, uint64_t handle) {
    call(s, enter(DriverApi::MemRelease, 0, handle), exitOk(DriverApi::MemRelease, 0, 0, 0));
}
constexpr uint64_t kVa = 0x7f4000000000, k2M = 2 << 20;
}  // namespace

TEST(DriverCallTranslator, AHandleReleasedWhileMappedHoldsItsBytesUntilUnmapped) {
    // CUDA's programming guide: create, map, release the handle at once; the
    // memory lives while it is mapped.
    AggregatingSink s;
    const uint64_t h = 0x55550011;
    call(s, enter(DriverApi::MemCreate), exitOk(DriverApi::MemCreate, 0, 0, k2M, h));
    map(s, kVa, k2M, h);
    release(s, h);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, k2M);
    call(s, enter(DriverApi::MemAlloc), exitOk(DriverApi::MemAlloc, 0, 0x7f0000000000, 1000));
    EXPECT_EQ(s.dev(kCuda0).peakBytes, k2M + 1000);
    unmap(s, kVa, k2M);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 1000u);
    // The handle is gone: a second release or unmap of it changes nothing.
    release(s, h);
    unmap(s, kVa, k2M);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 1000u);
    EXPECT_EQ(s.agg.unmatchedFrees(), 0u);
}

TEST(DriverCallTranslator, EveryReferenceAndMappingOfAHandleHoldsIt) {
    AggregatingSink s;
    const uint64_t h = 0x55550012;
    call(s, enter(DriverApi::MemCreate), exitOk(DriverApi::MemCreate, 0, 0, 2 * k2M, h));
    // Mapped twice, at two addresses (the second maps the handle's second half).
    map(s, kVa, 2 * k2M, h);
    map(s, kVa + (64 << 20), k2M, h);
    // NCCL's free: retain the handle of an address, release it, unmap, release.
    call(s, enter(DriverApi::MemRetain), exitOk(DriverApi::MemRetain, 0, 0, 0, h));
    release(s, h);
    unmap(s, kVa, 2 * k2M);
    release(s, h);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 2 * k2M);  // still mapped at the second address
    unmap(s, kVa + (64 << 20), k2M);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 0u);
    EXPECT_EQ(s.dev(kCuda0).freeCount, 1u);
}

TEST(DriverCallTranslator, OneUnmapEndsEveryMappingItsRangeStarts) {
    // Two handles mapped side by side in one reserved range, both released, then
    // the whole range unmapped at once; a mapping outside it stays.
    AggregatingSink s;
    const uint64_t h1 = 0x55550021, h2 = 0x55550022, h3 = 0x55550023;
    for (uint64_t h : {h1, h2, h3})
        call(s, enter(DriverApi::MemCreate), exitOk(DriverApi::MemCreate, 0, 0, k2M, h));
    map(s, kVa, k2M, h1);
    map(s, kVa + k2M, k2M, h2);
    map(s, kVa + 2 * k2M, k2M, h3);
    for (uint64_t h : {h1, h2, h3}) release(s, h);
    unmap(s, kVa, 2 * k2M);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, k2M);
    unmap(s, kVa + 2 * k2M, k2M);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 0u);
}

TEST(DriverCallTranslator, FailedMapsAndUnknownHandlesHoldNothing) {
    AggregatingSink s;
    const uint64_t h = 0x55550031;
    call(s, enter(DriverApi::MemCreate), exitOk(DriverApi::MemCreate, 0, 0, k2M, h));
    DriverCall failed = enter(DriverApi::MemMap, kVa, h);
    failed.size = k2M;
    DriverCall failedExit = failed;
    failedExit.exit = true;
    failedExit.result = 1;  // CUDA_ERROR_INVALID_VALUE
    call(s, failed, failedExit);
    map(s, kVa + k2M, k2M, 0x99990000);  // a handle this process never created
    release(s, 0x99990000);
    release(s, h);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 0u);
    EXPECT_EQ(s.agg.unmatchedFrees(), 0u);
}

TEST(DriverCallTranslator, PinnedHostAndManagedAndAsync) {
    AggregatingSink s;
    call(s, enter(DriverApi::MemHostAlloc),
         exitOk(DriverApi::MemHostAlloc, 0, 0x7e0000000000, 4096));
    call(s, enter(DriverApi::MemAllocHost),
         exitOk(DriverApi::MemAllocHost, 0, 0x7e0000100000, 8192));
    call(s, enter(DriverApi::MemAllocManaged),
         exitOk(DriverApi::MemAllocManaged, 1, 0x7d0000000000, 1000));
    call(s, enter(DriverApi::MemAllocAsync),
         exitOk(DriverApi::MemAllocAsync, 0, 0x7c0000000000, 5000));
    call(s, enter(DriverApi::MemAllocFromPoolAsync),
         exitOk(DriverApi::MemAllocFromPoolAsync, 0, 0x7c0000010000, 7000));
    EXPECT_EQ(s.dev(kDevicePinnedHost).currentBytes, 12288u);
    EXPECT_EQ(s.dev(kCuda1).currentBytes, 1000u);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 12000u);
    call(s, enter(DriverApi::MemFreeHost, 0x7e0000000000), exitOk(DriverApi::MemFreeHost, 0, 0, 0));
    call(s, enter(DriverApi::MemFreeAsync, 0x7c0000000000),
         exitOk(DriverApi::MemFreeAsync, 0, 0, 0));
    EXPECT_EQ(s.dev(kDevicePinnedHost).currentBytes, 8192u);
    EXPECT_EQ(s.dev(kCuda0).currentBytes, 7000u);
    EXPECT_EQ(s.dev(kCuda0).peakBytes, 12000u);
}

TEST(DriverCallTranslator, FreesAreReportedBeforeTheCallRuns) {
    // The free must reach the stream before cuMemFree returns, or a reuse of the
    // address by another thread could arrive first.
    struct Log : AllocationSink {
        std::vector<std::string> events;
        void alloc(uint8_t, uint64_t, uint64_t) override { events.push_back("alloc"); }
        void free(uint64_t) override { events.push_back("free"); }
    } log;
    DriverCallTranslator translator;
    translator.translate(enter(DriverApi::MemFree, 0x1000), log);
    EXPECT_EQ(log.events, std::vector<std::string>{"free"});
    translator.translate(exitOk(DriverApi::MemFree, 0, 0x1000, 0), log);
    EXPECT_EQ(log.events.size(), 1u);
}
