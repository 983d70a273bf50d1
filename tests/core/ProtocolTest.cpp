#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/Aggregator.h"
#include "core/DecimalPair.h"
#include "core/StreamDecoder.h"
#include "trace/TraceModel.h"

using namespace memtool::core;

namespace {

struct Recorder : RecordSink {
    std::vector<std::string> log;
    Handshake handshake;
    ModuleRecord module;
    PyCodeRecord code;
    std::vector<AllocRecord> allocs;
    std::vector<FreeRecord> frees;
    EndFields end;
    void onHandshake(const Handshake& h) override { handshake = h, log.push_back("H"); }
    void onModule(const ModuleRecord& m) override { module = m, log.push_back("M"); }
    void onPyCode(const PyCodeRecord& c) override {
        code = c, log.push_back("C" + std::to_string(c.id));
    }
    void onNativeNode(const NativeNodeRecord& n) override {
        log.push_back("N" + std::to_string(n.id) + "<" + std::to_string(n.parent) + ":" +
                      std::to_string(n.ip));
    }
    void onPyNode(const PyNodeRecord& n) override {
        log.push_back("P" + std::to_string(n.id) + "<" + std::to_string(n.parent) + ":" +
                      std::to_string(n.codeId) + "@" + std::to_string(n.line));
    }
    void onAlloc(const AllocRecord& a) override { allocs.push_back(a), log.push_back("A"); }
    void onFree(const FreeRecord& f) override { frees.push_back(f), log.push_back("F"); }
    void onShortLived(const AllocRecord& a, const FreeRecord& f) override {
        allocs.push_back(a), frees.push_back(f), log.push_back("S");
    }
    void onNote(const NoteRecord& n) override { log.push_back("W" + n.key + "=" + n.text); }
    void onRegion(const RegionRecord& g) override {
        region = g, log.push_back("R" + std::to_string(g.id) + "=" + g.tag);
    }
    void onControl(const ControlRecord& x) override {
        control = x, log.push_back("X" + std::to_string(x.f.region));
    }
    void onReply(const ReplyRecord& y) override {
        reply = y, log.push_back("Y" + std::to_string(y.id));
    }
    RegionRecord region;
    ControlRecord control;
    ReplyRecord reply;
    void onEnd(const EndFields& e) override { end = e, log.push_back("E"); }
    std::vector<WindowRecord> windows;
    void onWindow(const WindowRecord& w) override { windows.push_back(w), log.push_back("B"); }
};

std::vector<uint8_t> sampleStream() {
    Handshake h;
    h.pid = 4242;
    h.ppid = 1;
    h.startUnixNs = 1700000000123456789ull;
    h.pythonStacks = false;
    h.command = {"python3", "train.py", std::string("arg with \0 nul", 14)};
    std::vector<uint8_t> out = encodeHandshake(h);
    uint8_t buf[4096];
    auto put = [&](uint8_t* end) { out.insert(out.end(), buf, end); };
    std::string path = "/usr/lib/libc10.so";
    uint8_t* p = encodeModuleHead(buf, 1, path.data(), path.size(), 0x7f0000000000ull, 2);
    p = encodeModuleRange(p, 0x7f0000001000ull, 0x2000);
    put(encodeModuleRange(p, 0x7f0000010000ull, 0x100));
    put(encodePyCode(buf, "t.py", 4, "outer", 5, 12));
    put(encodeNativeNode(buf, 0, 0x7f0000001234ull));
    put(encodeNativeNode(buf, 1, 0x7f0000001300ull));
    put(encodePyNode(buf, 0, 1, 14));
    put(encodeNote(buf, kNoteTorchBridge, 12, "attached", 8));
    put(encodeAlloc(buf, AllocFields{kDeviceCpu, 0x5000, 3000000, 2, 1, 1000}));
    put(encodeAlloc(buf, AllocFields{static_cast<uint8_t>(kDeviceCudaBase + 1), 0x7f00ffff0000ull,
                                     UINT64_MAX, 0, 0, 5}));
    put(encodeFree(buf, FreeFields{kDeviceCpu, 0x5000, 250}));
    put(encodeAlloc(buf, AllocFields{cudaDevice(1, DevicePool::Reserved),
                                     0x7f00ffff0000ull | kKeyReservedPool, 2u << 20, 0, 0, 0}));
    put(encodeRegion(buf, 7, "weights", 7, kDeviceCpu, BackupKind::Disk));
    put(encodeAlloc(buf, AllocFields{kDeviceCpu, 0x9000, 4096, 0, 0, 10, 7}));
    ControlFields x;
    x.timeDeltaNs = 40;
    x.region = 7;
    x.action = ControlAction::Pause;
    x.origin = ControlOrigin::Ctl;
    x.bytes = 4096;
    x.backup = BackupKind::Disk;
    x.durationNs = 123456;
    put(encodeControl(buf, x, "ok", 2));
    put(encodeReply(buf, 3, ReplyStatus::Ok, "{}", 2));
    put(encodeEnd(buf, EndFields{4, 1, 3004096, 3000000, 15, 0, 1}));
    return out;
}

}  // namespace

TEST(Protocol, VarintBoundaries) {
    uint8_t buf[kMaxVarintBytes];
    for (uint64_t v : std::initializer_list<uint64_t>{0, 127, 128, 300, 16383, 16384, UINT64_MAX}) {
        uint8_t* end = putVarint(buf, v);
        EXPECT_EQ(static_cast<size_t>(end - buf), varintBytes(v)) << v;
    }
    putVarint(buf, 300);
    EXPECT_EQ(buf[0], 0xAC);
    EXPECT_EQ(buf[1], 0x02);
}

TEST(Protocol, VarintsOfEveryLengthDecodeWholeAndByteAtATime) {
    // Whole, most varints are read by the fast path (ten bytes or more remain);
    // a byte at a time, every one by the careful path.
    std::vector<uint64_t> values;
    for (int bits = 7; bits < 64; bits += 7)
        values.insert(values.end(), {(1ull << bits) - 1, 1ull << bits});
    // Bit patterns that tell each 7-bit group apart, for the one-load fast path.
    values.insert(values.end(), {0x7fff12345678ull, 0x0123456789abcdull, 0x55aa55aa55aa55ull,
                                 0xaa55aa55aa55aaull, 0x81020408102040ull, UINT64_MAX, 0});
    std::vector<uint8_t> bytes = encodeHandshake(Handshake{});
    uint8_t buf[kMaxFixedRecordBytes];
    for (uint64_t v : values) {
        uint8_t* end = encodeFree(buf, FreeFields{kDeviceCpu, v, v});
        bytes.insert(bytes.end(), buf, end);
    }
    Recorder whole, split;
    StreamDecoder a(whole), b(split);
    a.feed(bytes.data(), bytes.size());
    for (uint8_t byte : bytes) b.feed(&byte, 1);
    for (Recorder* r : {&whole, &split}) {
        ASSERT_EQ(r->frees.size(), values.size());
        uint64_t clock = 0;
        for (size_t i = 0; i < values.size(); ++i) {
            EXPECT_EQ(r->frees[i].f.address, values[i]) << i;
            EXPECT_EQ(r->frees[i].f.timeDeltaNs, values[i]) << i;
            clock += values[i];
            EXPECT_EQ(r->frees[i].timeNs, clock) << i;
        }
    }
}

TEST(Protocol, RoundTripsEveryRecord) {
    Recorder r;
    StreamDecoder d(r);
    auto bytes = sampleStream();
    d.feed(bytes.data(), bytes.size());
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "M", "C1", "N1<0:139637976732212",
                                               "N2<1:139637976732416", "P1<0:1@14",
                                               "Wtorch.bridge=attached", "A", "A", "F", "A",
                                               "R7=weights", "A", "X7", "Y3", "E"}));
    EXPECT_EQ(r.handshake.pid, 4242);
    EXPECT_EQ(r.handshake.startUnixNs, 1700000000123456789ull);
    EXPECT_TRUE(r.handshake.nativeStacks);
    EXPECT_FALSE(r.handshake.pythonStacks);
    ASSERT_EQ(r.handshake.command.size(), 3u);
    EXPECT_EQ(r.handshake.command[2], std::string("arg with \0 nul", 14));
    EXPECT_EQ(r.module.path, "/usr/lib/libc10.so");
    ASSERT_EQ(r.module.ranges.size(), 2u);
    EXPECT_EQ(r.module.ranges[0].second, 0x7f0000003000ull);
    EXPECT_EQ(r.code.name, "outer");
    EXPECT_EQ(r.code.firstLine, 12u);
    ASSERT_EQ(r.allocs.size(), 4u);
    EXPECT_EQ(r.allocs[2].f.device, 144 + 1);  // cuda:1.reserved, as PROTOCOL.md numbers it
    EXPECT_EQ(deviceName(r.allocs[2].f.device), "cuda:1.reserved");
    EXPECT_EQ(deviceName(cudaDevice(63, DevicePool::Active)), "cuda:63.active");
    EXPECT_EQ(deviceName(cudaDevice(0)), "cuda:0");
    EXPECT_EQ(r.allocs[0].f.size, 3000000u);
    EXPECT_EQ(r.allocs[0].f.nativeNode, 2u);
    EXPECT_EQ(r.allocs[0].timeNs, 1000u);
    EXPECT_EQ(r.allocs[1].f.device, kDeviceCudaBase + 1);
    EXPECT_EQ(r.allocs[1].f.size, UINT64_MAX);
    EXPECT_EQ(r.allocs[1].timeNs, 1005u);
    EXPECT_EQ(r.frees[0].timeNs, 1255u);
    EXPECT_EQ(r.end.recordCount, 15u);
    EXPECT_EQ(r.region.backup, BackupKind::Disk);
    EXPECT_EQ(r.allocs[3].f.region, 7u);
    EXPECT_EQ(r.control.f.origin, ControlOrigin::Ctl);
    EXPECT_EQ(r.control.f.durationNs, 123456u);
    EXPECT_EQ(r.control.message, "ok");
    EXPECT_EQ(r.control.timeNs, 1255u + 10 + 40);  // on the allocations' clock
    EXPECT_EQ(r.reply.body, "{}");
    EXPECT_EQ(r.end.exitKind, 1u);
    EXPECT_TRUE(d.sawEnd());
    EXPECT_EQ(d.pendingBytes(), 0u);
}

TEST(Protocol, ARecordMeasuredWhileIncompleteIsPassedOnOnce) {
    // Byte at a time, every record is incomplete first, so measured (a dry run)
    // before it is decoded: the sink sees each once, on the same clock.
    struct Timed : Recorder {
        void onAlloc(const AllocRecord& a) override {
            Recorder::onAlloc(a), log.push_back(std::to_string(a.timeNs));
        }
        void onOom(const OomRecord& o) override { log.push_back("O" + std::to_string(o.timeNs)); }
    } whole, split;
    std::vector<uint8_t> bytes = encodeHandshake(Handshake{});
    uint8_t buf[128];
    auto put = [&](uint8_t* end) { bytes.insert(bytes.end(), buf, end); };
    put(encodeNativeNode(buf, 0, 0x1234));
    OomFields o;
    o.nativeNode = 1;
    o.timeDeltaNs = 7;
    put(encodeOom(buf, o));
    put(encodeAlloc(buf, AllocFields{kDeviceCpu, 0xa000, 1, 1, 0, 3}));
    put(encodeFree(buf, FreeFields{kDeviceCpu, 0xa000, 5}));
    put(encodeOom(buf, o));
    StreamDecoder a(whole), b(split);
    a.feed(bytes.data(), bytes.size());
    for (uint8_t byte : bytes) b.feed(&byte, 1);
    EXPECT_EQ(whole.log, split.log);
    EXPECT_EQ(split.log, (std::vector<std::string>{"H", "N1<0:4660", "O7", "A", "10", "F", "O22"}));
}

TEST(Protocol, ByteAtATimeGivesTheSameRecords) {
    Recorder whole, split;
    StreamDecoder a(whole), b(split);
    auto bytes = sampleStream();
    a.feed(bytes.data(), bytes.size());
    for (uint8_t byte : bytes) b.feed(&byte, 1);
    EXPECT_EQ(whole.log, split.log);
}

TEST(Protocol, RejectsForeignStreams) {
    Recorder r;
    StreamDecoder d(r);
    std::vector<uint8_t> junk(16, 'x');
    EXPECT_THROW(d.feed(junk.data(), junk.size()), ProtocolError);

    auto bytes = sampleStream();
    bytes[8] = 99;  // protocol version
    StreamDecoder v(r);
    EXPECT_THROW(v.feed(bytes.data(), bytes.size()), ProtocolError);

    auto tagged = encodeHandshake(Handshake{});
    tagged.push_back('Z');
    StreamDecoder t(r);
    EXPECT_THROW(t.feed(tagged.data(), tagged.size()), ProtocolError);
}

TEST(Protocol, RejectsReferencesToUnknownNodes) {
    Recorder r;
    StreamDecoder d(r);
    auto bytes = encodeHandshake(Handshake{});
    uint8_t buf[64];
    uint8_t* end = encodeAlloc(buf, AllocFields{kDeviceCpu, 1, 1, 5, 0, 0});
    bytes.insert(bytes.end(), buf, end);
    EXPECT_THROW(d.feed(bytes.data(), bytes.size()), ProtocolError);
}

TEST(Protocol, AggregatorVerifiesTheEndCounters) {
    Aggregator agg;
    StreamDecoder d(agg);
    auto bytes = sampleStream();
    d.feed(bytes.data(), bytes.size());
    EXPECT_TRUE(agg.streamVerified());
    EXPECT_EQ(agg.recordsReceived(), 15u);
    // The pause took the region's 4096 bytes out of the resident bytes, not out of the live ones.
    EXPECT_EQ(agg.devices().at(kDeviceCpu).currentBytes, 0u);
    EXPECT_EQ(agg.devices().at(kDeviceCpu).pausedBytes, 4096u);
    EXPECT_EQ(agg.devices().at(kDeviceCpu).peakBytes, 3000000u);
    EXPECT_EQ(agg.regions().at(7).pausedBytes, 4096u);
    ASSERT_EQ(agg.controls().size(), 1u);
    ASSERT_EQ(agg.replies().size(), 1u);
    ASSERT_EQ(agg.notes().size(), 1u);
    EXPECT_EQ(agg.notes()[0].key, kNoteTorchBridge);
    EXPECT_EQ(agg.devices().at(cudaDevice(1, DevicePool::Reserved)).peakBytes, 2u << 20);

    // Drop the last allocation: the collector's counters no longer match.
    Aggregator lossy;
    StreamDecoder d2(lossy);
    auto trimmed = sampleStream();
    uint8_t buf[64];
    size_t allocLen = static_cast<size_t>(
        encodeAlloc(buf, AllocFields{cudaDevice(1, DevicePool::Reserved),
                                     0x7f00ffff0000ull | kKeyReservedPool, 2u << 20, 0, 0, 0}) -
        buf);
    // The reserved-pool allocation sits right before the region record.
    auto at = std::search(trimmed.begin(), trimmed.end(), buf, buf + allocLen);
    ASSERT_NE(at, trimmed.end());
    trimmed.erase(at, at + static_cast<long>(allocLen));
    d2.feed(trimmed.data(), trimmed.size());
    EXPECT_FALSE(lossy.streamVerified());
}

TEST(Protocol, AnOutOfMemoryRecordRoundTrips) {
    struct OomOnly : Recorder {
        std::vector<OomRecord> ooms;
        void onOom(const OomRecord& o) override { ooms.push_back(o), log.push_back("O"); }
    } r;
    Handshake h;
    h.pid = 7;
    std::vector<uint8_t> s = encodeHandshake(h);
    uint8_t buf[256];
    s.insert(s.end(), buf, encodeNativeNode(buf, 0, 0x1234));
    OomFields o;
    o.device = cudaDevice(2);
    o.size = 3ull << 30;
    o.nativeNode = 1;
    o.timeDeltaNs = 40;
    o.source = OomSource::Torch;
    o.deviceFree = 123456789;
    o.deviceTotal = 80ull << 30;
    uint8_t* end = encodeOom(buf, o);
    EXPECT_LE(static_cast<size_t>(end - buf), kMaxFixedRecordBytes);
    s.insert(s.end(), buf, end);
    StreamDecoder d(r);
    d.feed(s.data(), s.size());
    ASSERT_EQ(r.ooms.size(), 1u);
    EXPECT_EQ(r.ooms[0].f.device, cudaDevice(2));
    EXPECT_EQ(r.ooms[0].f.size, 3ull << 30);
    EXPECT_EQ(r.ooms[0].f.nativeNode, 1u);
    EXPECT_EQ(r.ooms[0].f.source, OomSource::Torch);
    EXPECT_EQ(r.ooms[0].f.deviceFree, 123456789u);
    EXPECT_EQ(r.ooms[0].f.deviceTotal, 80ull << 30);
    EXPECT_EQ(r.ooms[0].timeNs, 40u);
    // A stack not yet declared, or an unknown source, is not a stream.
    std::vector<uint8_t> bad = encodeHandshake(h);
    o.nativeNode = 5;
    bad.insert(bad.end(), buf, encodeOom(buf, o));
    Recorder quiet;
    StreamDecoder d2(quiet);
    EXPECT_THROW(d2.feed(bad.data(), bad.size()), ProtocolError);
}

namespace {

// Feeds `bytes`; the message of the ProtocolError it throws, "" when none.
std::string refusal(StreamDecoder& d, const std::vector<uint8_t>& bytes) {
    try {
        d.feed(bytes.data(), bytes.size());
    } catch (const ProtocolError& e) {
        return e.what();
    }
    return "";
}

std::vector<uint8_t> afterHandshake(std::initializer_list<uint8_t> record) {
    std::vector<uint8_t> bytes = encodeHandshake(Handshake{});
    bytes.insert(bytes.end(), record);
    return bytes;
}

}  // namespace

TEST(Protocol, RecordsThatNeverEndAreRefusedAtOnce) {
    Recorder r;
    // A note whose key is 2^60 bytes long: refused on its length, nothing waits for it.
    StreamDecoder huge(r);
    EXPECT_EQ(
        refusal(huge, afterHandshake({'W', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10})),
        "string of 1152921504606846976 bytes");
    // A varint that keeps saying "more follows".
    StreamDecoder endless(r);
    EXPECT_EQ(refusal(endless, afterHandshake({'F', 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                               0xff, 0xff, 0x80})),
              "varint longer than 10 bytes");
    // Ten bytes whose last one carries bits past 64.
    StreamDecoder wide(r);
    EXPECT_EQ(refusal(wide, afterHandshake({'F', 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                            0xff, 0x02})),
              "varint past 64 bits");
    StreamDecoder widest(r);  // 2^64 - 1 itself is fine
    EXPECT_EQ(refusal(widest, afterHandshake({'F', 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                              0xff, 0xff, 0x01, 0})),
              "");
}

// A window's figures are by device, one entry each: a device listed twice would
// start its points again at the window's start, a timeline that goes back in time
// (what the stream fuzzer found, tests/fuzz/corpus/stream/window-device-twice.bin).
TEST(Protocol, AWindowThatListsADeviceTwiceIsRefused) {
    Recorder r;
    // 10 ns long; device entries: device, allocs, bytes, frees, bytes, no peak, no points;
    // then no stacks, blocks or frees.
    StreamDecoder twice(r);
    EXPECT_EQ(refusal(twice, afterHandshake(
                                 {'B', 10, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
              "window lists a device twice");
    StreamDecoder two(r);  // devices 0 and 1
    EXPECT_EQ(refusal(two, afterHandshake(
                               {'B', 10, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
              "");
}

TEST(Protocol, ARecordThatKeepsComingIsRefusedPastItsLimit) {
    Recorder r;
    // A handshake announcing 2^40 arguments: refused on the count.
    std::vector<uint8_t> head = encodeHandshake(Handshake{});
    head.resize(kPreambleBytes);
    head.insert(head.end(), {'H', 1, 1, 1, 0});
    std::vector<uint8_t> many = head;
    many.insert(many.end(), {0x80, 0x80, 0x80, 0x80, 0x80, 0x20});
    StreamDecoder counted(r);
    EXPECT_EQ(refusal(counted, many), "1099511627776 arguments in a handshake, more than 1048576");
    // As many arguments as allowed, each 64 bytes: each is whole, the record
    // passes its limit first. The buffer stops there.
    head.insert(head.end(), {0x80, 0x80, 0x40});
    StreamDecoder d(r);
    EXPECT_EQ(refusal(d, head), "");
    std::vector<uint8_t> chunk;
    for (int i = 0; i < (1 << 14); ++i) {
        chunk.push_back(64);
        chunk.insert(chunk.end(), 64, 'a');
    }
    std::string error;
    size_t fed = 0;
    while (error.empty() && fed <= 2 * kMaxRecordBytes) {
        error = refusal(d, chunk);
        fed += chunk.size();
        EXPECT_LE(d.pendingBytes(), kMaxRecordBytes + chunk.size());
    }
    EXPECT_EQ(error, "a record longer than 67108864 bytes");
    // Refused with the chunk that takes it past 64 MiB, the 64th (8 bytes came first).
    EXPECT_EQ(fed, 64 * chunk.size());
    EXPECT_TRUE(r.log.empty());
}

TEST(Protocol, TheHandshakeComesFirstAndOnce) {
    Recorder r;
    std::vector<uint8_t> first = encodeHandshake(Handshake{});
    first.resize(kPreambleBytes);
    uint8_t buf[64];
    uint8_t* end = encodeFree(buf, FreeFields{kDeviceCpu, 1, 0});
    first.insert(first.end(), buf, end);
    StreamDecoder before(r);
    EXPECT_EQ(refusal(before, first), "a record before the handshake");
    std::vector<uint8_t> twice = encodeHandshake(Handshake{});
    std::vector<uint8_t> again = encodeHandshake(Handshake{});
    twice.insert(twice.end(), again.begin() + kPreambleBytes, again.end());
    StreamDecoder second(r);
    EXPECT_EQ(refusal(second, twice), "a second handshake");
}

TEST(Protocol, RegionIdsFitThirtyTwoBits) {
    Recorder r;
    uint8_t buf[128];
    std::vector<uint8_t> bytes = encodeHandshake(Handshake{});
    uint8_t* end = encodeRegion(buf, uint64_t{1} << 32, "t", 1, kDeviceCpu, BackupKind::None);
    bytes.insert(bytes.end(), buf, end);
    StreamDecoder d(r);
    EXPECT_EQ(refusal(d, bytes), "region id 0, past 2^32 - 1 or declared twice");
    std::vector<uint8_t> fits = encodeHandshake(Handshake{});
    end = encodeRegion(buf, UINT32_MAX, "t", 1, kDeviceCpu, BackupKind::None);
    fits.insert(fits.end(), buf, end);
    StreamDecoder ok(r);
    EXPECT_EQ(refusal(ok, fits), "");
}

// A ShortLived record is an allocation and its free: each at its own time, with
// the allocation's stack; one record, one allocation and one free by the End's
// counters. Its stack must be known, as an Alloc's.
TEST(Protocol, AShortLivedRecordIsAnAllocationAndItsFree) {
    auto bytes = encodeHandshake(Handshake{});
    uint8_t buf[128];
    auto put = [&](uint8_t* end) { bytes.insert(bytes.end(), buf, end); };
    put(encodeNativeNode(buf, 0, 0x1234));
    put(encodeAlloc(buf, AllocFields{kDeviceCpu, 0x5000, 100, 1, 0, 10}));
    put(encodeShortLived(buf, AllocFields{kDevicePinnedHost, 0x7000, 3000000, 1, 0, 20}, 300));
    put(encodeFree(buf, FreeFields{kDeviceCpu, 0x5000, 5}));
    EndFields e;
    e.allocCount = 2;
    e.freeCount = 2;
    e.recordCount = 5;
    put(encodeEnd(buf, e));

    Recorder r;
    StreamDecoder(r).feed(bytes.data(), bytes.size());
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "N1<0:4660", "A", "S", "F", "E"}));
    ASSERT_EQ(r.allocs.size(), 2u);
    const AllocRecord& a = r.allocs[1];
    EXPECT_EQ(a.f.device, kDevicePinnedHost);
    EXPECT_EQ(a.f.address, 0x7000u);
    EXPECT_EQ(a.f.size, 3000000u);
    EXPECT_EQ(a.f.nativeNode, 1u);
    EXPECT_EQ(a.f.region, 0u);
    EXPECT_EQ(a.timeNs, 30u);
    ASSERT_EQ(r.frees.size(), 2u);
    EXPECT_EQ(r.frees[0].f.device, kDevicePinnedHost);
    EXPECT_EQ(r.frees[0].f.address, 0x7000u);
    EXPECT_EQ(r.frees[0].timeNs, 330u);
    EXPECT_EQ(r.frees[1].timeNs, 335u);  // the clock goes on from the free

    Aggregator agg;
    StreamDecoder(agg).feed(bytes.data(), bytes.size());
    EXPECT_TRUE(agg.streamVerified());
    const DeviceState& pinned = agg.devices().at(kDevicePinnedHost);
    EXPECT_EQ(pinned.peakBytes, 3000000u);
    EXPECT_EQ(pinned.currentBytes, 0u);
    EXPECT_EQ(pinned.allocCount, 1u);
    EXPECT_EQ(pinned.freeCount, 1u);
    EXPECT_EQ(pinned.peakTimeNs, 30u);
    EXPECT_TRUE(agg.liveBlocks(kDevicePinnedHost).empty());

    // An unknown stack is refused, as in an Alloc.
    auto bad = encodeHandshake(Handshake{});
    uint8_t* end = encodeShortLived(buf, AllocFields{kDeviceCpu, 1, 1, 5, 0, 0}, 1);
    bad.insert(bad.end(), buf, end);
    Recorder r2;
    StreamDecoder d2(r2);
    EXPECT_THROW(d2.feed(bad.data(), bad.size()), ProtocolError);
}

namespace {

// A record of varints and bytes, as tests/e2e/scripts/wire.py writes them.
struct Fields {
    std::vector<uint8_t> bytes;
    Fields& v(uint64_t x) {
        uint8_t buf[kMaxVarintBytes];
        bytes.insert(bytes.end(), buf, putVarint(buf, x));
        return *this;
    }
    Fields& u8(uint8_t x) {
        bytes.push_back(x);
        return *this;
    }
};

}  // namespace

// Two windows, as tests/fuzz/make_stream_seeds.py's windows.bin has them, and
// the records they stand for. Before them, 0x5000 (100 B, stack 1). The first:
// +100 0x6000 (100 B, stack 2), +300 0x6100 (100 B, stack 2) and its free, +600
// 0x6200 (200 B, stack 1): a peak of 400 B, +1000 its free. The second: +10 frees
// 0x6000, +200 0x7000 (350 B, stack 2): a peak of 450 B, +490 frees 0x5000.
TEST(Protocol, AWindowLeavesTheReaderWhereItsEventsWould) {
    auto head = encodeHandshake(Handshake{});
    uint8_t buf[128];
    auto put = [&](std::vector<uint8_t>& to, uint8_t* end) { to.insert(to.end(), buf, end); };
    put(head, encodeNativeNode(buf, 0, 0x1000));
    put(head, encodeNativeNode(buf, 1, 0x2000));
    put(head, encodeAlloc(buf, AllocFields{kDeviceCpu, 0x5000, 100, 1, 0, 3}));
    std::vector<uint8_t> windows = head, records = head;
    Fields w1;
    w1.u8(static_cast<uint8_t>(RecordTag::Window)).v(1000);
    w1.v(1).u8(kDeviceCpu).v(3).v(400).v(2).v(300).v(400).v(600);  // cpu: peak 400 at +600
    w1.v(3).v(100).v(200).v(500).v(400).v(400).v(200);             // points
    w1.v(2).u8(kDeviceCpu).v(2).v(0).v(2).v(200).v(300).v(100);    // stack 2: 100 B at the peak
    w1.u8(kDeviceCpu).v(1).v(0).v(1).v(200).v(400).v(200);         // stack 1: 200 B at the peak
    w1.v(1).v(0).v(0x6000).v(100);                                 // a block of stack 2, live
    w1.v(0);
    Fields w2;
    w2.u8(static_cast<uint8_t>(RecordTag::Window)).v(490);
    w2.v(1).u8(kDeviceCpu).v(1).v(350).v(0).v(0).v(450).v(200);
    w2.v(3).v(10).v(100).v(190).v(450).v(290).v(350);
    w2.v(1).u8(kDeviceCpu).v(2).v(0).v(1).v(350).v(450).v(350);
    w2.v(1).v(0).v(0x7000).v(350);
    w2.v(2).u8(kDeviceCpu).v(0x6000).u8(kWindowFreeBeforePeak).u8(kDeviceCpu).v(0x5000).u8(0);
    for (const Fields* w : {&w1, &w2})
        windows.insert(windows.end(), w->bytes.begin(), w->bytes.end());
    put(records, encodeAlloc(buf, AllocFields{kDeviceCpu, 0x6000, 100, 2, 0, 100}));
    put(records, encodeShortLived(buf, AllocFields{kDeviceCpu, 0x6100, 100, 2, 0, 200}, 0));
    put(records, encodeAlloc(buf, AllocFields{kDeviceCpu, 0x6200, 200, 1, 0, 300}));
    put(records, encodeFree(buf, FreeFields{kDeviceCpu, 0x6200, 400}));
    put(records, encodeFree(buf, FreeFields{kDeviceCpu, 0x6000, 10}));
    put(records, encodeAlloc(buf, AllocFields{kDeviceCpu, 0x7000, 350, 2, 0, 190}));
    put(records, encodeFree(buf, FreeFields{kDeviceCpu, 0x5000, 290}));

    Recorder r;
    StreamDecoder(r).feed(windows.data(), windows.size());
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "N1<0:4096", "N2<1:8192", "A", "B", "B"}));
    ASSERT_EQ(r.windows.size(), 2u);
    const WindowRecord& a = r.windows[0];
    EXPECT_EQ(a.startNs, 3u);
    EXPECT_EQ(a.endNs, 1003u);
    ASSERT_EQ(a.devices.size(), 1u);
    EXPECT_EQ(a.devices[0].peakBytes, 400u);
    EXPECT_EQ(a.devices[0].peakTimeNs, 603u);
    EXPECT_EQ(a.devices[0].points,
              (std::vector<std::pair<uint64_t, uint64_t>>{{103, 200}, {603, 400}, {1003, 200}}));
    ASSERT_EQ(a.stacks.size(), 2u);
    EXPECT_EQ(a.stacks[1].nativeNode, 1u);
    EXPECT_EQ(a.stacks[1].liveAtPeak, 200u);
    ASSERT_EQ(a.blocks.size(), 1u);
    EXPECT_EQ(a.blocks[0].address, 0x6000u);
    ASSERT_EQ(r.windows[1].oldFrees.size(), 2u);
    EXPECT_TRUE(r.windows[1].oldFrees[0].beforePeak);
    EXPECT_FALSE(r.windows[1].oldFrees[1].beforePeak);

    Aggregator folded, plain;
    StreamDecoder(folded).feed(windows.data(), windows.size());
    StreamDecoder(plain).feed(records.data(), records.size());
    for (const Aggregator* agg : {&folded, &plain}) {
        SCOPED_TRACE(agg == &folded ? "windows" : "records");
        EXPECT_EQ(agg->allocsReceived(), 5u);
        EXPECT_EQ(agg->freesReceived(), 4u);
        EXPECT_EQ(agg->lastTimeNs(), 1493u);
        const DeviceState& cpu = agg->devices().at(kDeviceCpu);
        EXPECT_EQ(cpu.currentBytes, 350u);
        EXPECT_EQ(cpu.allocatedBytes, 850u);
        EXPECT_EQ(cpu.freedBytes, 500u);
        EXPECT_EQ(cpu.allocCount, 5u);
        EXPECT_EQ(cpu.freeCount, 4u);
        EXPECT_EQ(cpu.peakBytes, 450u);
        EXPECT_EQ(cpu.peakTimeNs, 1203u);
        const auto samples = cpu.timeline.samples();
        std::vector<std::pair<uint64_t, uint64_t>> points;
        for (const TimelineSample& p : samples) points.emplace_back(p.timeNs, p.bytes);
        // Buckets of 1,024 ns: each one's first, lowest, highest and last.
        EXPECT_EQ(points, (std::vector<std::pair<uint64_t, uint64_t>>{
                              {3, 100}, {603, 400}, {1013, 100}, {1203, 450}, {1493, 350}}));
        ASSERT_EQ(agg->stacks().size(), 2u);
        for (const StackState& s : agg->stacks()) {
            const bool one = s.nativeNode == 1;
            EXPECT_EQ(s.count, one ? 2u : 3u);
            EXPECT_EQ(s.allocatedBytes, one ? 300u : 550u);
            EXPECT_EQ(s.liveBytes, one ? 0u : 350u);
            EXPECT_EQ(s.maxDeviceBytesAtAlloc, one ? 400u : 450u);
            // At 1203 ns: 0x5000 still live; 0x6000 gone, 0x7000 come.
            EXPECT_EQ(agg->liveAtPeak(s), one ? 100u : 350u);
        }
        EXPECT_EQ(agg->liveBlocks(kDeviceCpu).size(), 1u);
        EXPECT_EQ(agg->liveBlocks(kDeviceCpu).count(0x7000), 1u);
        EXPECT_EQ(agg->unmatchedFrees(), 0u);
    }
}

TEST(Protocol, AWindowNamesOnlyStacksAndBlocksThatExist) {
    auto refused = [](const Fields& window) {
        auto bytes = encodeHandshake(Handshake{});
        uint8_t buf[32];
        bytes.insert(bytes.end(), buf, encodeNativeNode(buf, 0, 0x1000));
        bytes.insert(bytes.end(), window.bytes.begin(), window.bytes.end());
        Recorder r;
        StreamDecoder d(r);
        try {
            d.feed(bytes.data(), bytes.size());
        } catch (const ProtocolError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const uint8_t tag = static_cast<uint8_t>(RecordTag::Window);
    Fields unknownStack;
    unknownStack.u8(tag).v(0).v(0).v(1).u8(kDeviceCpu).v(2).v(0).v(1).v(8).v(8).v(0).v(0).v(0);
    EXPECT_EQ(refused(unknownStack), "window refers to an unknown stack");
    Fields noStack;
    noStack.u8(tag).v(0).v(0).v(1).u8(kDeviceCpu).v(1).v(0).v(1).v(8).v(8).v(0);
    noStack.v(1).v(1).v(0x1000).v(8).v(0);
    EXPECT_EQ(refused(noStack), "window block of no stack");
    Fields tooMany;
    tooMany.u8(tag).v(0).v(kMaxCount + 1);
    EXPECT_EQ(refused(tooMany), "1048577 devices in a window, more than 1048576");
    Fields fine;
    fine.u8(tag)
        .v(0)
        .v(0)
        .v(1)
        .u8(kDeviceCpu)
        .v(1)
        .v(0)
        .v(1)
        .v(8)
        .v(8)
        .v(0)
        .v(1)
        .v(0)
        .v(0x1000)
        .v(8)
        .v(0);
    EXPECT_EQ(refused(fine), "accepted");
}

// Runs of Alloc, ShortLived and Free records, fed whole, take the decoder's fast
// path (no check of the input's end per field) while a whole record surely
// fits: the same records, values and refusals as byte at a time.
TEST(Protocol, ALongRunOfHotRecordsDecodesAsByteAtATime) {
    auto bytes = encodeHandshake(Handshake{});
    uint8_t buf[128];
    auto put = [&](uint8_t* end) { bytes.insert(bytes.end(), buf, end); };
    put(encodeNativeNode(buf, 0, 0x1234));
    put(encodeRegion(buf, 3, "kv", 2, kDeviceCpu, BackupKind::None));
    // Every varint length from 1 to 10 bytes, in each field.
    auto value = [](int i) {
        return i % 10 == 9 ? UINT64_MAX : (uint64_t{1} << (7 * (i % 10))) + i;
    };
    uint64_t clock = 0;
    size_t middle = 0;  // a record boundary halfway
    for (int i = 0; i < 40; ++i) {
        if (i == 20) middle = bytes.size();
        const uint64_t address = value(i), size = value(i + 3), delta = value(i + 5) >> 8;
        put(encodeAlloc(buf, AllocFields{kDeviceCpu, address, size, uint64_t(i % 2), 0, delta,
                                         i % 3 == 0 ? 3u : 0u}));
        put(i % 2 ? encodeFree(buf, FreeFields{kDeviceCpu, address, 7})
                  : encodeShortLived(
                        buf, AllocFields{kDevicePinnedHost, address + 1, size, 1, 0, 1}, delta));
        clock += delta + (i % 2 ? 7 : 1 + delta);
    }
    Recorder whole, split, chunked;
    StreamDecoder a(whole), b(split), c(chunked);
    a.feed(bytes.data(), bytes.size());
    for (uint8_t byte : bytes) b.feed(&byte, 1);
    // Reads of every size up to 97 bytes: decoded from the read where nothing
    // waits, a record cut short kept for the next.
    for (size_t at = 0, n = 1; at < bytes.size(); at += n, n = n % 97 + 1)
        c.feed(bytes.data() + at, std::min(n, bytes.size() - at));
    EXPECT_EQ(whole.log, split.log);
    EXPECT_EQ(whole.log, chunked.log);
    EXPECT_EQ(c.pendingBytes(), 0u);
    ASSERT_EQ(whole.allocs.size(), 60u);
    ASSERT_EQ(whole.frees.size(), 40u);
    for (size_t i = 0; i < whole.allocs.size(); ++i) {
        EXPECT_EQ(whole.allocs[i].f.address, split.allocs[i].f.address) << i;
        EXPECT_EQ(whole.allocs[i].f.size, split.allocs[i].f.size) << i;
        EXPECT_EQ(whole.allocs[i].f.region, split.allocs[i].f.region) << i;
        EXPECT_EQ(whole.allocs[i].timeNs, split.allocs[i].timeNs) << i;
        EXPECT_EQ(whole.allocs[i].f.address, chunked.allocs[i].f.address) << i;
        EXPECT_EQ(whole.allocs[i].timeNs, chunked.allocs[i].timeNs) << i;
    }
    EXPECT_EQ(whole.allocs[14].f.address, UINT64_MAX);  // i = 9: ten bytes
    EXPECT_EQ(whole.allocs[14].f.size, (uint64_t{1} << 14) + 12);
    EXPECT_EQ(whole.allocs[0].f.region, 3u);
    EXPECT_EQ(whole.frees.back().timeNs, clock);
    EXPECT_EQ(a.pendingBytes(), 0u);

    // A reference to an unknown stack or region, deep in a long buffer, is refused
    // as it is alone; so is anything after the End.
    auto withBad = [&](const AllocFields& bad) {
        std::vector<uint8_t> out(bytes.begin(), bytes.begin() + middle);
        out.insert(out.end(), buf, encodeAlloc(buf, bad));
        out.insert(out.end(), bytes.begin() + middle, bytes.end());
        return out;
    };
    Recorder r;
    StreamDecoder stack(r), region(r), ended(r);
    EXPECT_EQ(refusal(stack, withBad(AllocFields{kDeviceCpu, 1, 1, 2, 0, 0})),
              "allocation refers to an unknown stack");
    EXPECT_EQ(refusal(region, withBad(AllocFields{kDeviceCpu, 1, 1, 1, 0, 0, 4})),
              "allocation refers to an unknown region");
    std::vector<uint8_t> late = encodeHandshake(Handshake{});
    late.insert(late.end(), buf, encodeEnd(buf, EndFields{}));
    late.insert(late.end(), bytes.begin() + middle, bytes.end());
    EXPECT_EQ(refusal(ended, late), "record after end of stream");
}

// Notes that carry two numbers ("PID STATUS", the lock's counts): the text the
// collector writes reads back exactly, and nothing else reads at all.
TEST(Protocol, DecimalPairsReadBackExactlyAndNothingElseDoes) {
    char text[kDecimalPairBytes];
    uint64_t a = 1, b = 1;
    EXPECT_STREQ(decimalPair(text, 0, 0), "0 0");
    EXPECT_TRUE(readDecimalPair(decimalPair(text, 0, 0), &a, &b));
    EXPECT_EQ(a, 0u);
    EXPECT_EQ(b, 0u);
    EXPECT_STREQ(decimalPair(text, UINT64_MAX, UINT64_MAX),
                 "18446744073709551615 18446744073709551615");
    EXPECT_TRUE(readDecimalPair(decimalPair(text, UINT64_MAX, 4242), &a, &b));
    EXPECT_EQ(a, UINT64_MAX);
    EXPECT_EQ(b, 4242u);
    for (const char* other : {"", "1", "1 ", " 1 2", "1  2", "-1 2", "1 -2", "+1 2", "1 2 3",
                              "1 2x", "1\t2", "18446744073709551616 0", "a b"})
        EXPECT_FALSE(readDecimalPair(other, &a, &b)) << other;
}
