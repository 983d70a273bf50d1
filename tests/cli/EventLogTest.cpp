// The event log: its encoding, its file (written, read back, refused when it is
// not one), what memtool run's recorder keeps of a stream fed record by record,
// and what the reports read from it (the events before a moment, what was live
// then, PyTorch's snapshot). Every figure is the one fed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "cli/stream/EventRecorder.h"
#include "core/Error.h"
#include "reporters/EventViews.h"
#include "reporters/Pickler.h"
#include "reporters/TorchSnapshot.h"
#include "tests/TempDir.h"
#include "trace/EventLogFile.h"
#include "trace/Symbolizer.h"

using namespace memtool;

namespace {

constexpr uint8_t kCpu = core::kDeviceCpu;
const uint8_t kCuda0 = core::cudaDevice(0);

class NoSymbols : public cli::Symbolizer {
public:
    const std::vector<core::Frame>& symbolize(uint64_t) override { return none_; }

private:
    std::vector<core::Frame> none_{core::Frame{}};
};

// A stream with Python stacks only (step at lines 7 and 9 of train.py), fed
// through a recorder to its aggregator; every event 1 ms after the previous one.
class RecordedStream {
public:
    explicit RecordedStream(cli::EventsOption option) : recorder(agg, option) {
        core::Handshake h;
        h.protocolVersion = core::kProtocolVersion;
        h.pid = 4242;
        h.startUnixNs = 1'700'000'000'000'000'000;
        recorder.onHandshake(h);
        recorder.onPyCode({1, "/home/me/train.py", "step", 5});
        recorder.onPyNode({1, 0, 1, 7});
        recorder.onPyNode({2, 0, 1, 9});
    }
    void alloc(uint64_t address, uint64_t size, uint64_t line, uint8_t device = kCpu) {
        core::AllocRecord a;
        a.f.device = device;
        a.f.address = address;
        a.f.size = size;
        a.f.pyNode = line == 7 ? 1 : 2;
        a.timeNs = clock_ += 1'000'000;
        recorder.onAlloc(a);
    }
    void free(uint64_t address, uint8_t device = kCpu) {
        core::FreeRecord f;
        f.f.device = device;
        f.f.address = address;
        f.timeNs = clock_ += 1'000'000;
        recorder.onFree(f);
    }
    void oom(uint64_t size) {
        core::OomRecord o;
        o.f.size = size;
        o.f.pyNode = 2;
        o.timeNs = clock_ += 1'000'000;
        recorder.onOom(o);
    }
    // The log's entry as a reader gets it back from the file.
    core::ProcessEvents readBack(const std::string& dir) {
        NoSymbols symbols;
        const reporters::EventSection& s = recorder.section(symbols);
        const std::string path = dir + "/t.events.zst";
        reporters::writeEventLog(path, {&s}, core::kExitRunFailed);
        return reporters::loadEventLog(path).processes.at(0);
    }

    core::Aggregator agg;
    cli::EventRecorder recorder;

private:
    uint64_t clock_ = 0;
};

cli::EventsOption last(uint64_t n) {
    cli::EventsOption o;
    o.limit = n;
    return o;
}

void writeBytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string loadError(const std::string& path) {
    try {
        reporters::loadEventLog(path);
    } catch (const core::Error& e) {
        EXPECT_EQ(e.exitCode(), core::kExitBadInput);
        return e.what();
    }
    return "loaded";
}

}  // namespace

TEST(EventEncoding, EventsComeBackAsTheyWentIn) {
    const std::vector<core::Event> events = {
        {5, 0x7f0000001000, 3'000'000, 1, core::EventKind::Alloc, kCpu},
        {5, 0x7f0000001000, 3'000'000, 1, core::EventKind::Free, kCpu},
        {900, 0x10, 1, 2, core::EventKind::Alloc, kCuda0},               // the address goes down
        {UINT64_MAX / 2, 0, UINT64_MAX, 0, core::EventKind::Oom, kCpu},  // sizes to 64 bits
    };
    std::vector<uint8_t> bytes(events.size() * core::EventEncoder::kMaxEventBytes);
    core::EventEncoder encoder;
    uint8_t* end = bytes.data();
    for (const core::Event& e : events) end = encoder.encode(e, end);
    core::EventDecoder decoder;
    const uint8_t* at = bytes.data();
    for (const core::Event& want : events) {
        core::Event got;
        at = decoder.decode(at, end, 3, got);
        ASSERT_NE(at, nullptr);
        EXPECT_EQ(got.timeNs, want.timeNs);
        EXPECT_EQ(got.address, want.address);
        EXPECT_EQ(got.size, want.size);
        EXPECT_EQ(got.stack, want.stack);
        EXPECT_EQ(got.kind, want.kind);
        EXPECT_EQ(got.device, want.device);
    }
    EXPECT_EQ(at, end);
    // The same event again costs its tag and two one-byte deltas.
    uint8_t one[core::EventEncoder::kMaxEventBytes];
    EXPECT_EQ(encoder.encode(events[3], one) - one, 3);  // tag, delta 0, address delta 0
}

TEST(EventEncoding, BytesThatAreNoEventAreRefused) {
    core::EventEncoder encoder;
    uint8_t bytes[core::EventEncoder::kMaxEventBytes];
    const uint8_t* end = encoder.encode({7, 0x1000, 64, 2, core::EventKind::Alloc, kCpu}, bytes);
    core::Event e;
    for (const uint8_t* cut = bytes; cut < end; ++cut)
        EXPECT_EQ(core::EventDecoder().decode(bytes, cut, 3, e), nullptr);  // cut short
    EXPECT_EQ(core::EventDecoder().decode(bytes, end, 2, e), nullptr);      // stack 2 of 2
    const uint8_t badKind[] = {0x03, 0, 0};
    EXPECT_EQ(core::EventDecoder().decode(badKind, badKind + 3, 1, e), nullptr);
    const uint8_t badBits[] = {0x20, 0, 0};
    EXPECT_EQ(core::EventDecoder().decode(badBits, badBits + 3, 1, e), nullptr);
}

TEST(EventRecorder, AFreeCarriesTheSizeAndStackOfTheBlockItFreed) {
    const std::string dir = test_support::makeTempDir("eventlog");
    RecordedStream s(last(100));
    s.alloc(0x1000, 3'000'000, 7);
    s.alloc(0x2000, 5'000'000, 9);
    s.free(0x1000);
    s.free(0x9999);  // never allocated: no size, no stack
    const core::ProcessEvents p = s.readBack(dir);
    EXPECT_EQ(p.pid, 4242);
    EXPECT_EQ(p.seen, 4u);
    ASSERT_EQ(p.events.size(), 4u);
    EXPECT_EQ(p.events[2].kind, core::EventKind::Free);
    EXPECT_EQ(p.events[2].size, 3'000'000u);
    EXPECT_EQ(p.events[2].stack, p.events[0].stack);
    EXPECT_EQ(p.events[2].timeNs, 3'000'000u);
    EXPECT_EQ(p.events[3].size, 0u);
    EXPECT_EQ(p.events[3].stack, 0u);
    EXPECT_EQ(reporters::eventSite(p, p.events[0].stack, core::SiteMode::User),
              "step (train.py:7)");
    EXPECT_EQ(reporters::eventSite(p, p.events[1].stack, core::SiteMode::User),
              "step (train.py:9)");
    // What is live at the end: the 5,000,000 B block.
    ASSERT_EQ(p.endBlocks.size(), 1u);
    EXPECT_EQ(p.endBlocks[0].address, 0x2000u);
    EXPECT_EQ(p.endBlocks[0].size, 5'000'000u);
}

TEST(EventRecorder, ARingKeepsTheLastEventsAndWhatIsLiveAtAnyMomentAfterTheFirst) {
    const std::string dir = test_support::makeTempDir("eventlog");
    RecordedStream s(last(3));
    s.alloc(0x1000, 100, 7);  // 1 ms
    s.alloc(0x2000, 200, 9);  // 2 ms
    s.free(0x1000);           // 3 ms
    s.alloc(0x3000, 400, 7);  // 4 ms
    s.free(0x2000);           // 5 ms
    const core::ProcessEvents p = s.readBack(dir);
    EXPECT_EQ(p.mode, core::kEventsLast);
    EXPECT_EQ(p.seen, 5u);
    ASSERT_EQ(p.events.size(), 3u);
    EXPECT_EQ(p.events.front().timeNs, 3'000'000u);
    // At 3.5 ms, after the free of 0x1000: 0x2000 (line 9) and nothing else,
    // though the alloc of 0x2000 fell out of the ring.
    const auto at = reporters::liveAt(p, 3'500'000);
    ASSERT_EQ(at.size(), 1u);
    EXPECT_EQ(at[0].bytes, 200u);
    EXPECT_EQ(reporters::eventSite(p, at[0].stack, core::SiteMode::User), "step (train.py:9)");
    const auto later = reporters::liveAt(p, 4'000'000);
    ASSERT_EQ(later.size(), 2u);
    EXPECT_EQ(later[0].bytes, 400u);
    EXPECT_EQ(later[1].bytes, 200u);
    // Before the ring's first event it cannot say.
    EXPECT_THROW(reporters::liveAt(p, 2'999'999), core::Error);
}

TEST(EventRecorder, TheFocusIsTheRefusedRequestElseTheFirstPeak) {
    const std::string dir = test_support::makeTempDir("eventlog");
    RecordedStream s(last(1000));
    s.alloc(0x1000, 3'000'000, 7);
    s.alloc(0x2000, 5'000'000, 9);  // the peak: 8,000,000
    s.free(0x2000);
    s.alloc(0x3000, 1'000'000, 9);
    core::ProcessTrace t;
    t.pid = 4242;
    t.devices["cpu"].peakBytes = 8'000'000;
    t.devices["cpu"].peakTimeS = 0.002;
    const core::ProcessEvents p = s.readBack(dir);
    const reporters::Focus peak = reporters::focusOf(t, p);
    EXPECT_EQ(peak.what, "the peak of cpu");
    EXPECT_EQ(peak.end, 2u);
    EXPECT_EQ(peak.bytes, 8'000'000u);
}

TEST(EventRecorder, AnOutOfMemoryErrorIsTheFocusAndTheLastEventBeforeIt) {
    const std::string dir = test_support::makeTempDir("eventlog");
    RecordedStream s(last(1000));
    for (uint64_t i = 0; i < 1500; ++i) {
        s.alloc(0x1000, 64, 7);
        s.free(0x1000);
    }
    s.oom(67'108'864);
    s.alloc(0x2000, 10, 7);  // after it: not before it
    core::ProcessTrace t;
    t.devices["cpu"].peakBytes = 64;
    const core::ProcessEvents p = s.readBack(dir);
    EXPECT_EQ(p.seen, 3002u);
    const reporters::Focus f = reporters::focusOf(t, p);
    EXPECT_EQ(f.what, "the out-of-memory error on cpu");
    ASSERT_EQ(f.end, 1000u);  // the last 1,000 up to it are kept whole, then what followed
    EXPECT_EQ(p.events.size(), 1001u);
    EXPECT_EQ(p.gapAt, 0u);
    EXPECT_EQ(p.events[f.end - 1].kind, core::EventKind::Oom);
    EXPECT_EQ(p.events[f.end - 1].size, 67'108'864u);
    EXPECT_EQ(reporters::eventSite(p, p.events[f.end - 1].stack, core::SiteMode::User),
              "step (train.py:9)");
}

TEST(EventLogFile, ALoopOfTemporariesCostsLessThanAByteAnEvent) {
    const std::string dir = test_support::makeTempDir("eventlog");
    cli::EventsOption all;
    all.all = true;
    all.spillDir = dir;  // compressed into a file no name points to
    RecordedStream s(all);
    for (uint64_t i = 0; i < 100'000; ++i) {
        s.alloc(0x7f0000001000, 4096, 7);
        s.free(0x7f0000001000);
    }
    const core::ProcessEvents p = s.readBack(dir);
    ASSERT_EQ(p.events.size(), 200'000u);
    EXPECT_EQ(p.events.back().timeNs, 200'000'000'000u);
    EXPECT_EQ(p.mode, core::kEventsAll);
    struct stat st {};
    ASSERT_EQ(stat((dir + "/t.events.zst").c_str(), &st), 0);
    EXPECT_LT(st.st_size, 200'000);  // the goal is 8 bytes an event
}

TEST(EventLogFile, WhatIsNoLogIsRefusedInOneLine) {
    const std::string dir = test_support::makeTempDir("eventlog");
    const std::string path = dir + "/x.events.zst";
    EXPECT_NE(loadError(dir + "/missing").find("cannot open"), std::string::npos);
    writeBytes(path, "not zstd at all");
    EXPECT_NE(loadError(path).find("is not an event log: zstd"), std::string::npos);
    // A real log cut short, and one whose header claims more events than its bytes.
    RecordedStream s(last(10));
    s.alloc(0x1000, 64, 7);
    s.readBack(dir);
    std::ifstream in(dir + "/t.events.zst", std::ios::binary);
    const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    writeBytes(path, whole.substr(0, whole.size() - 3));
    EXPECT_NE(loadError(path).find("is not an event log"), std::string::npos);
    writeBytes(path, whole + whole);
    EXPECT_NE(loadError(path).find("bytes follow its last process"), std::string::npos);
    setenv("MEMTOOL_MAX_EVENTS", "1", 1);
    EXPECT_NE(loadError(dir + "/t.events.zst").find("MEMTOOL_MAX_EVENTS allows (1)"),
              std::string::npos);  // an event and its end block
    unsetenv("MEMTOOL_MAX_EVENTS");
    for (const char* name : {"../t.events.zst", "a/b", "", ".."})
        EXPECT_THROW(reporters::eventLogPath(dir + "/t.json", name), core::Error);
    EXPECT_EQ(reporters::eventLogPath("/runs/t.json", "t.events.zst"), "/runs/t.events.zst");
    EXPECT_EQ(reporters::eventLogName("/runs/trace.json"), "trace.events.zst");
}

TEST(Pickler, WritesWhatPythonReadsBack) {
    // pickle.loads of these bytes is {'a': [1, 300, -5, 1099511627776, 2**64 - 1], 'b': None,
    // 'c': (0, 0), 'd': True, 'e': 0.5, 'f': '\ufffd'}, as Python 3.11 reads it.
    reporters::Pickler p;
    p.beginDict();
    p.text("a");
    p.beginList();
    p.integer(1);
    p.integer(300);
    p.integer(-5);
    p.integer(int64_t{1} << 40);
    p.unsignedInteger(UINT64_MAX);
    p.endList();
    p.text("b");
    p.none();
    p.text("c");
    p.integer(0);
    p.integer(0);
    p.tuple2();
    p.text("d");
    p.boolean(true);
    p.text("e");
    p.real(0.5);
    p.text("f");
    p.text("\xff");
    p.endDict();
    const std::string bytes = std::move(p).finish();
    std::string want;
    for (const char* part :
         {"80027d285801000000615d284b014a2c0100004afbffffff8a080000000000010000",
          "8a09ffffffffffffffff00655801000000624e5801000000634b004b008658010000",
          "006488580100000065473fe00000000000005801000000665803000000efbfbd752e"})
        for (const char* c = part; *c; c += 2)
            want += static_cast<char>(std::stoi(std::string(c, 2), nullptr, 16));
    EXPECT_EQ(bytes, want);
}

TEST(TorchSnapshot, EachEventIsAnEntryOfItsDevicesTrace) {
    const std::string dir = test_support::makeTempDir("eventlog");
    RecordedStream s(last(100));
    s.alloc(0x1000, 3'000'000, 7);
    s.alloc(0x2000, 512, 9, kCuda0);
    s.free(0x1000);
    const core::ProcessEvents p = s.readBack(dir);
    const std::string pickle = reporters::renderTorchSnapshot(p);
    // cuda:0 is device 0, the CPU device 1; entries in order with their actions.
    for (const char* key : {"segments", "device_traces", "memtool_devices", "segment_alloc",
                            "free_requested", "free_completed", "active_allocated", "cuda:0"})
        EXPECT_NE(pickle.find(key), std::string::npos) << key;
    EXPECT_LT(pickle.find("segment_alloc"), pickle.find("free_requested"));
    EXPECT_EQ(pickle.substr(0, 2), std::string("\x80\x02", 2));
    EXPECT_EQ(pickle.back(), '.');
}

TEST(EventRecorder, WhatFollowsARefusedRequestHasARingOfItsOwn) {
    const std::string dir = test_support::makeTempDir("eventlog");
    RecordedStream s(last(4));
    s.alloc(0x1000, 64, 7);
    s.oom(1 << 20);                                              // 2 ms
    for (uint64_t i = 0; i < 5; ++i) s.alloc(0x2000 + i, 8, 9);  // 3..7 ms
    const core::ProcessEvents p = s.readBack(dir);
    ASSERT_EQ(p.events.size(), 6u);  // the two before and with it, the last 4 after
    EXPECT_EQ(p.gapAt, 2u);          // the first allocation after it was not kept
    EXPECT_EQ(p.events[2].timeNs, 4'000'000u);
    EXPECT_EQ(reporters::liveAt(p, 5'000'000).size(), 2u);
    EXPECT_THROW(reporters::liveAt(p, 3'000'000), core::Error);
}
