#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "core/Aggregator.h"

using namespace memtool::core;

namespace {

struct Feed {
    Aggregator agg;
    uint64_t t = 0;
    // Stacks here are native node ids; an allocation declares its on first use.
    AllocRecord allocation(uint64_t addr, uint64_t size, uint64_t stack, uint8_t device) {
        while (agg.nativeNodes().size() <= stack)
            agg.onNativeNode(
                NativeNodeRecord{agg.nativeNodes().size(), 0, 0x1000 + agg.nativeNodes().size()});
        AllocRecord a;
        a.f = AllocFields{device, addr, size, stack, 0, 1};
        a.timeNs = ++t;
        return a;
    }
    FreeRecord freeing(uint64_t addr, uint8_t device) {
        FreeRecord f;
        f.f = FreeFields{device, addr, 1};
        f.timeNs = ++t;
        return f;
    }
    void alloc(uint64_t addr, uint64_t size, uint64_t stack, uint8_t device = kDeviceCpu) {
        agg.onAlloc(allocation(addr, size, stack, device));
    }
    void release(uint64_t addr, uint8_t device = kDeviceCpu) { agg.onFree(freeing(addr, device)); }
    // A block allocated and freed in one ShortLived record.
    void shortLived(uint64_t addr, uint64_t size, uint64_t stack, uint8_t device) {
        const AllocRecord a = allocation(addr, size, stack, device);
        agg.onShortLived(a, freeing(addr, device));
    }
    const StackState& stack(uint64_t id, uint8_t device = kDeviceCpu) {
        for (const auto& s : agg.stacks())
            if (s.nativeNode == id && s.device == device) return s;
        throw std::runtime_error("no such stack");
    }
};

// One note, as the stream's decoder hands it on.
void feedNote(Aggregator& agg, const char* key, const char* text) {
    NoteRecord n;
    n.key = key;
    n.text = text;
    agg.onNote(n);
}

}  // namespace

TEST(Aggregator, PeakIsTheLargestLiveSum) {
    Feed f;
    f.alloc(0x10, 100, 1);
    f.alloc(0x20, 50, 2);   // 150
    f.release(0x10);        // 50
    f.alloc(0x30, 120, 1);  // 170: the peak
    f.release(0x30);        // 50
    f.alloc(0x40, 110, 3);  // 160
    const DeviceState& cpu = f.agg.devices().at(kDeviceCpu);
    EXPECT_EQ(cpu.peakBytes, 170u);
    EXPECT_EQ(cpu.currentBytes, 160u);
    EXPECT_EQ(cpu.allocatedBytes, 380u);
    EXPECT_EQ(cpu.freedBytes, 220u);
    EXPECT_EQ(cpu.allocCount, 4u);
    EXPECT_EQ(cpu.freeCount, 2u);
    EXPECT_EQ(cpu.peakTimeNs, 4u);
}

TEST(Aggregator, PeakConsumersAreWhatEachStackHeldAtThePeak) {
    Feed f;
    f.alloc(0x10, 100, 1);
    f.alloc(0x20, 50, 2);
    f.release(0x10);
    f.alloc(0x30, 120, 1);  // peak 170 = stack1 120 + stack2 50
    f.release(0x30);
    f.release(0x20);
    f.alloc(0x40, 110, 3);  // after the peak: stack3 held nothing then
    EXPECT_EQ(f.agg.liveAtPeak(f.stack(1)), 120u);
    EXPECT_EQ(f.agg.liveAtPeak(f.stack(2)), 50u);
    EXPECT_EQ(f.agg.liveAtPeak(f.stack(3)), 0u);
    EXPECT_EQ(f.stack(3).liveBytes, 110u);  // leaked at the end
    EXPECT_EQ(f.stack(1).allocatedBytes, 220u);
    EXPECT_EQ(f.stack(1).count, 2u);
}

TEST(Aggregator, StackSeesTheDevicePeakWhileItAllocated) {
    Feed f;
    f.alloc(0x10, 4, 1);  // outer holds 4
    f.alloc(0x20, 8, 2);  // inner: 12 live
    f.release(0x20);
    f.alloc(0x30, 1, 3);  // 5 live
    EXPECT_EQ(f.stack(1).maxDeviceBytesAtAlloc, 4u);
    EXPECT_EQ(f.stack(2).maxDeviceBytesAtAlloc, 12u);
    EXPECT_EQ(f.stack(3).maxDeviceBytesAtAlloc, 5u);
}

TEST(Aggregator, DevicesAreCountedApart) {
    Feed f;
    f.alloc(0x10, 100, 1, kDeviceCpu);
    f.alloc(0x10, 1000, 1, kDeviceCudaBase);  // same address, another device
    f.release(0x10, kDeviceCpu);
    EXPECT_EQ(f.agg.devices().at(kDeviceCpu).currentBytes, 0u);
    EXPECT_EQ(f.agg.devices().at(kDeviceCudaBase).currentBytes, 1000u);
    EXPECT_EQ(f.agg.devices().at(kDeviceCudaBase).peakBytes, 1000u);
    EXPECT_EQ(f.agg.liveAtPeak(f.stack(1, kDeviceCudaBase)), 1000u);
}

TEST(Aggregator, AMovedAggregatorKeepsCountingOnItsDevices) {
    // Each record's device state is found through a cached pointer into the
    // device map: the move takes the map's nodes, and the pointer with them.
    Feed f;
    f.alloc(0x10, 100, 1);
    f.alloc(0x20, 1000, 1, kDeviceCudaBase);
    Aggregator moved = std::move(f.agg);
    moved.onAlloc(f.allocation(0x30, 10, 1, kDeviceCudaBase));
    moved.onFree(f.freeing(0x10, kDeviceCpu));
    EXPECT_EQ(moved.devices().at(kDeviceCudaBase).currentBytes, 1010u);
    EXPECT_EQ(moved.devices().at(kDeviceCudaBase).peakBytes, 1010u);
    EXPECT_EQ(moved.devices().at(kDeviceCpu).currentBytes, 0u);
    EXPECT_EQ(moved.devices().at(kDeviceCpu).peakBytes, 100u);
}

// Stacks taken in turn, more of them than the lookups remembered inline, on two
// devices with the same node ids: each keeps its own counts.
TEST(Aggregator, StacksTakenInTurnKeepTheirOwnCounts) {
    Feed f;
    constexpr uint64_t kStacks = 20, kRounds = 5;
    for (uint64_t round = 0; round < kRounds; ++round)
        for (uint64_t id = 1; id <= kStacks; ++id)
            for (uint8_t device : {kDeviceCpu, kDeviceCudaBase})
                f.shortLived(0x1000 * id, id * (device == kDeviceCpu ? 1 : 1000), id, device);
    EXPECT_EQ(f.agg.stacks().size(), 2 * kStacks);
    for (uint64_t id = 1; id <= kStacks; ++id) {
        EXPECT_EQ(f.stack(id).count, kRounds) << id;
        EXPECT_EQ(f.stack(id).allocatedBytes, kRounds * id) << id;
        EXPECT_EQ(f.stack(id, kDeviceCudaBase).count, kRounds) << id;
        EXPECT_EQ(f.stack(id, kDeviceCudaBase).allocatedBytes, kRounds * id * 1000) << id;
    }
}

TEST(Aggregator, UnpairedEventsAreCountedNotFatal) {
    Feed f;
    f.release(0x99);
    EXPECT_EQ(f.agg.unmatchedFrees(), 1u);
    f.alloc(0x10, 10, 1);
    f.alloc(0x10, 30, 2);  // the free of the first never came
    EXPECT_EQ(f.agg.doubleAllocs(), 1u);
    EXPECT_EQ(f.agg.devices().at(kDeviceCpu).currentBytes, 30u);
    EXPECT_EQ(f.agg.devices().at(kDeviceCpu).peakBytes, 30u);
    // The block now at the address is the second, with its own size and stack.
    EXPECT_EQ(f.stack(1).liveBytes, 0u);
    EXPECT_EQ(f.stack(2).liveBytes, 30u);
    f.release(0x10);
    EXPECT_EQ(f.stack(2).liveBytes, 0u);
    EXPECT_EQ(f.agg.devices().at(kDeviceCpu).currentBytes, 0u);
    EXPECT_EQ(f.agg.devices().at(kDeviceCpu).freedBytes, 40u);
    EXPECT_EQ(f.agg.unmatchedFrees(), 1u);
    EXPECT_TRUE(f.agg.liveBlocks(kDeviceCpu).empty());
}

// The out-of-memory moment: the failed request, and every stack that held bytes
// then, largest first, adding up to the device's live bytes.
TEST(Aggregator, AnOutOfMemoryKeepsWhatWasLiveThen) {
    Feed f;
    f.alloc(0x10, 100, 1);
    f.alloc(0x20, 300, 2);
    f.alloc(0x30, 50, 1);
    f.release(0x10);                       // stack 1 holds 50, stack 2 holds 300
    f.alloc(0x40, 7, 3, kDeviceCpu + 16);  // another device: not counted
    OomRecord o;
    o.f.device = kDeviceCpu;
    o.f.size = 1 << 30;
    o.f.nativeNode = 3;
    o.f.source = OomSource::Allocator;
    o.timeNs = 99;
    f.agg.onOom(o);
    f.release(0x20);  // later frees change nothing kept
    ASSERT_EQ(f.agg.ooms().size(), 1u);
    const auto& e = f.agg.ooms()[0];
    EXPECT_EQ(e.record.f.size, 1u << 30);
    EXPECT_EQ(e.record.timeNs, 99u);
    EXPECT_EQ(e.heldDevice, kDeviceCpu);
    EXPECT_EQ(e.liveBytes, 350u);
    ASSERT_EQ(e.consumers.size(), 2u);
    EXPECT_EQ(f.agg.stacks()[e.consumers[0].first].nativeNode, 2u);
    EXPECT_EQ(e.consumers[0].second, 300u);
    EXPECT_EQ(f.agg.stacks()[e.consumers[1].first].nativeNode, 1u);
    EXPECT_EQ(e.consumers[1].second, 50u);
    EXPECT_EQ(f.agg.stacks()[e.stack].nativeNode, 3u);
    EXPECT_EQ(f.agg.oomCount(), 1u);
}

// On CUDA with the torch bridge, the tensors' blocks (cuda:N.active) say who
// held the device.
TEST(Aggregator, ACudaOutOfMemoryCountsPytorchsBlocksWhenTheBridgeReportsThem) {
    Feed f;
    const uint8_t cuda0 = cudaDevice(0), active0 = cudaDevice(0, DevicePool::Active);
    f.alloc(0x1000, 2 << 20, 1, cuda0);                     // a segment
    f.alloc(0x1000 | kKeyActivePool, 1 << 20, 2, active0);  // a tensor in it
    OomRecord o;
    o.f.device = cuda0;
    o.f.size = 5 << 20;
    o.f.source = OomSource::Torch;
    f.agg.onOom(o);
    ASSERT_EQ(f.agg.ooms().size(), 1u);
    EXPECT_EQ(f.agg.ooms()[0].heldDevice, active0);
    EXPECT_EQ(f.agg.ooms()[0].liveBytes, 1u << 20);
    ASSERT_EQ(f.agg.ooms()[0].consumers.size(), 1u);
}

TEST(Aggregator, LeaksAreWhatWasLiveWhenTheProgramEnded) {
    Feed f;
    f.alloc(0x10, 100, 1);
    f.alloc(0x20, 50, 2);
    f.release(0x20);
    f.alloc(0x30, 30, 2);
    auto note = [&](const char* key, const char* text) {
        NoteRecord n;
        n.key = key;
        n.text = text;
        f.agg.onNote(n);
    };
    note(kNoteProgramEnd, "bogus");  // not a moment: ignored
    EXPECT_FALSE(f.agg.programEnd());
    note(kNoteProgramEnd, kProgramEndPython);
    note(kNoteProgramEnd, kProgramEndExit);  // later moments do not move it
    ASSERT_TRUE(f.agg.programEnd());
    EXPECT_EQ(f.agg.programEnd()->how, kProgramEndPython);
    EXPECT_EQ(f.agg.programEnd()->timeNs, 4u);
    // Teardown frees both, and allocates what it never frees.
    f.release(0x10);
    f.release(0x30);
    f.alloc(0x40, 7, 3);
    const DeviceState& cpu = f.agg.devices().at(kDeviceCpu);
    EXPECT_EQ(cpu.liveAtProgramEnd, 130u);
    EXPECT_EQ(cpu.teardownFreedBytes, 130u);
    EXPECT_EQ(cpu.teardownFreeCount, 2u);
    EXPECT_EQ(cpu.freeCount, 3u);
    EXPECT_EQ(cpu.currentBytes, 7u);
    EXPECT_EQ(f.stack(1).liveAtProgramEnd, 100u);
    EXPECT_EQ(f.stack(2).liveAtProgramEnd, 30u);
    EXPECT_EQ(f.stack(3).liveAtProgramEnd, 0u);
}

// The addresses the program's globals reach, listed before Python's moment:
// their live blocks are held at exit; the rest of what was live is leaked. Each
// address may name the global it was reached from: a block's bytes go to its
// first name, and what came without one is held by "".
TEST(Aggregator, WhatGlobalsReachAtTheEndIsHeldNotLeaked) {
    Feed f;
    f.alloc(0x10, 100, 1);
    f.alloc(0x20, 50, 2);
    f.alloc(0x30, 30, 2);
    f.alloc(0x40, 7, 3);
    auto note = [&](const char* key, const char* text) { feedNote(f.agg, key, text); };
    // Over two pieces; 0x99 is no live block, 0x20 comes twice.
    note(kNoteReachable, "10@model 99@x");
    note(kNoteReachable, "20@opt.state  20@later 40");
    note(kNoteReachableEnd, "5");
    note(kNoteProgramEnd, kProgramEndPython);
    ASSERT_TRUE(f.agg.programEnd());
    EXPECT_TRUE(f.agg.programEnd()->reachableKnown);
    const DeviceState& cpu = f.agg.devices().at(kDeviceCpu);
    EXPECT_EQ(cpu.liveAtProgramEnd, 187u);
    EXPECT_EQ(cpu.heldAtProgramEnd, 157u);
    EXPECT_EQ(f.stack(1).heldAtProgramEnd, 100u);
    EXPECT_EQ(f.stack(2).heldAtProgramEnd, 50u);
    EXPECT_EQ(f.stack(2).liveAtProgramEnd, 80u);
    EXPECT_EQ(cpu.heldBy,
              (std::map<std::string, uint64_t>{{"model", 100}, {"opt.state", 50}, {"", 7}}));
}

// A CUDA tensor's storage lies inside a segment the caching allocator took from
// the driver: the segment is held, whole and once, under the first storage's name.
TEST(Aggregator, AStorageInsideASegmentHoldsTheSegment) {
    Feed f;
    const uint8_t cuda = kDeviceCudaBase;
    f.alloc(0x100000, 0x200000, 1, cuda);  // a 2 MiB segment
    f.alloc(0x400000, 0x200000, 2, cuda);  // another, no storage of the globals in it
    auto note = [&](const char* key, const char* text) { feedNote(f.agg, key, text); };
    note(kNoteReachable, "100200@model 2fffff@opt 300000@past 600000@after");
    note(kNoteReachableEnd, "4");
    note(kNoteProgramEnd, kProgramEndPython);
    ASSERT_TRUE(f.agg.programEnd()->reachableKnown);
    const DeviceState& d = f.agg.devices().at(cuda);
    EXPECT_EQ(d.heldAtProgramEnd, 0x200000u);
    EXPECT_EQ(d.heldBy, (std::map<std::string, uint64_t>{{"model", 0x200000}}));
    EXPECT_EQ(f.stack(1, cuda).heldAtProgramEnd, 0x200000u);
    EXPECT_EQ(f.stack(2, cuda).heldAtProgramEnd, 0u);
}

// A list cut short, with a word that is no address, or ending at a C program's
// moment says nothing of what is held: no split, not a guess.
TEST(Aggregator, AListThatIsNotWholeSplitsNothing) {
    for (const auto& [pieces, count, how] :
         std::vector<std::tuple<std::vector<const char*>, const char*, const char*>>{
             {{"10 20"}, "3", kProgramEndPython},      // a piece lost
             {{"10 zz"}, "2", kProgramEndPython},      // not hex
             {{"10", "-20"}, "2", kProgramEndPython},  // signed
             {{"10"}, "1x", kProgramEndPython},        // not a count
             {{"10@ 20"}, "2", kProgramEndPython},     // an empty name
             {{"10"}, nullptr, kProgramEndPython},     // no count came
             {{"10"}, "1", kProgramEndExit}}) {        // C and C++: no globals listed
        Feed f;
        f.alloc(0x10, 100, 1);
        f.alloc(0x20, 50, 2);
        auto note = [&](const char* key, const char* text) { feedNote(f.agg, key, text); };
        for (const char* piece : pieces) note(kNoteReachable, piece);
        if (count) note(kNoteReachableEnd, count);
        note(kNoteProgramEnd, how);
        ASSERT_TRUE(f.agg.programEnd());
        EXPECT_FALSE(f.agg.programEnd()->reachableKnown) << count;
        EXPECT_EQ(f.agg.devices().at(kDeviceCpu).heldAtProgramEnd, 0u) << count;
        EXPECT_EQ(f.agg.devices().at(kDeviceCpu).liveAtProgramEnd, 150u);
    }
}

// A ShortLived record folds exactly as the Alloc and Free it stands for: the
// same devices, stacks, peaks, timelines and counts, before and after the
// program's end, over an address still live (its free never came) and on a
// second device; only the record count differs (one record, not two).
TEST(Aggregator, AShortLivedRecordFoldsAsItsAllocAndFree) {
    Feed pairs, fused;
    auto both = [&](auto step) { step(pairs), step(fused); };
    auto temporary = [&](uint64_t addr, uint64_t size, uint64_t stack, uint8_t device) {
        pairs.alloc(addr, size, stack, device);
        pairs.release(addr, device);
        fused.shortLived(addr, size, stack, device);
    };
    both([](Feed& f) { f.alloc(0x10, 100, 1); });
    temporary(0x20, 500, 2, kDeviceCpu);  // the peak: 600
    both([](Feed& f) { f.alloc(0x30, 50, 1); });
    temporary(0x40, 20, 3, kDeviceCpu);
    temporary(0x10, 70, 3, kDeviceCpu);  // over 0x10, whose free never came
    temporary(0x50, 4096, 2, kDevicePinnedHost);
    both([](Feed& f) {
        NoteRecord n;
        n.key = kNoteProgramEnd;
        n.text = kProgramEndExit;
        f.agg.onNote(n);
    });
    temporary(0x60, 30, 1, kDeviceCpu);  // teardown
    both([](Feed& f) { f.release(0x30); });

    for (uint8_t device : {kDeviceCpu, kDevicePinnedHost}) {
        const DeviceState& p = pairs.agg.devices().at(device);
        const DeviceState& q = fused.agg.devices().at(device);
        EXPECT_EQ(p.currentBytes, q.currentBytes);
        EXPECT_EQ(p.peakBytes, q.peakBytes);
        EXPECT_EQ(p.peakTimeNs, q.peakTimeNs);
        EXPECT_EQ(p.allocatedBytes, q.allocatedBytes);
        EXPECT_EQ(p.freedBytes, q.freedBytes);
        EXPECT_EQ(p.allocCount, q.allocCount);
        EXPECT_EQ(p.freeCount, q.freeCount);
        EXPECT_EQ(p.liveAtProgramEnd, q.liveAtProgramEnd);
        EXPECT_EQ(p.teardownFreedBytes, q.teardownFreedBytes);
        EXPECT_EQ(p.teardownFreeCount, q.teardownFreeCount);
        const auto ps = p.timeline.samples(), qs = q.timeline.samples();
        ASSERT_EQ(ps.size(), qs.size());
        for (size_t i = 0; i < ps.size(); ++i) {
            EXPECT_EQ(ps[i].timeNs, qs[i].timeNs) << i;
            EXPECT_EQ(ps[i].bytes, qs[i].bytes) << i;
        }
    }
    const DeviceState& cpu = fused.agg.devices().at(kDeviceCpu);
    EXPECT_EQ(cpu.peakBytes, 600u);
    EXPECT_EQ(cpu.currentBytes, 0u);
    EXPECT_EQ(cpu.teardownFreeCount, 2u);
    ASSERT_EQ(pairs.agg.stacks().size(), fused.agg.stacks().size());
    for (uint64_t id : {1, 2, 3}) {
        const StackState& p = pairs.stack(id);
        const StackState& q = fused.stack(id);
        EXPECT_EQ(p.allocatedBytes, q.allocatedBytes) << id;
        EXPECT_EQ(p.count, q.count) << id;
        EXPECT_EQ(p.liveBytes, q.liveBytes) << id;
        EXPECT_EQ(p.maxDeviceBytesAtAlloc, q.maxDeviceBytesAtAlloc) << id;
        EXPECT_EQ(pairs.agg.liveAtPeak(p), fused.agg.liveAtPeak(q)) << id;
        EXPECT_EQ(p.liveAtProgramEnd, q.liveAtProgramEnd) << id;
    }
    EXPECT_EQ(fused.stack(2).maxDeviceBytesAtAlloc, 600u);
    EXPECT_EQ(fused.agg.liveAtPeak(fused.stack(2)), 500u);
    EXPECT_EQ(pairs.agg.doubleAllocs(), 1u);
    EXPECT_EQ(fused.agg.doubleAllocs(), 1u);
    EXPECT_EQ(fused.agg.allocsReceived(), pairs.agg.allocsReceived());
    EXPECT_EQ(fused.agg.freesReceived(), pairs.agg.freesReceived());
    EXPECT_EQ(pairs.agg.recordsReceived() - fused.agg.recordsReceived(), 5u);
    EXPECT_TRUE(fused.agg.liveBlocks(kDeviceCpu).empty());
}
