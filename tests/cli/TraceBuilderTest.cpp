// The trace builder over hand-made aggregations: records fed straight into a
// core::Aggregator, native frames from a fake symbolizer (no ELF files), and
// every figure of the resulting trace checked against what was fed.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/Aggregator.h"
#include "tests/TestFrames.h"
#include "trace/Symbolizer.h"
#include "trace/TraceBuilder.h"
#include "trace/TraceReader.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;

namespace {

constexpr uint8_t kCpu = core::kDeviceCpu;
const uint8_t kCuda0 = core::cudaDevice(0);
const uint8_t kCuda0Active = core::cudaDevice(0, core::DevicePool::Active);
const uint8_t kCuda0Reserved = core::cudaDevice(0, core::DevicePool::Reserved);

// Answers from a table, like ElfSymbolizer would from the ELF files, and
// remembers what it was asked: `frames` for an address with nothing inlined,
// `chains` for one with inlined functions (innermost first).
class FakeSymbolizer : public cli::Symbolizer {
public:
    std::map<uint64_t, core::Frame> frames;
    std::map<uint64_t, std::vector<core::Frame>> chains;
    std::set<uint64_t> asked;

    const std::vector<core::Frame>& symbolize(uint64_t ip) override {
        asked.insert(ip);
        if (auto chain = chains.find(ip); chain != chains.end()) return chain->second;
        auto [it, fresh] = answered_.try_emplace(ip);
        if (fresh) {
            auto known = frames.find(ip);
            it->second = {known == frames.end() ? core::Frame{} : known->second};
        }
        return it->second;
    }

private:
    std::map<uint64_t, std::vector<core::Frame>> answered_;
};

// One collector stream, record by record, keeping the counts its End record carries.
class Stream {
public:
    core::Aggregator agg;

    void handshake(int64_t pid, std::vector<std::string> command) {
        core::Handshake h;
        h.protocolVersion = core::kProtocolVersion;
        h.pid = pid;
        h.ppid = 1;
        h.command = std::move(command);
        agg.onHandshake(h);
        ++records_;
    }
    void module(const std::string& path) {
        core::ModuleRecord m;
        m.id = agg.modules().size() + 1;
        m.path = path;
        agg.onModule(m);
        ++records_;
    }
    uint64_t code(const std::string& file, const std::string& name, uint64_t firstLine) {
        core::PyCodeRecord c;
        c.id = agg.pyCodes().size();
        c.file = file;
        c.name = name;
        c.firstLine = firstLine;
        agg.onPyCode(c);
        ++records_;
        return c.id;
    }
    uint64_t pyNode(uint64_t parent, uint64_t code, uint64_t line) {
        core::PyNodeRecord n;
        n.id = agg.pyNodes().size();
        n.parent = parent;
        n.codeId = code;
        n.line = line;
        agg.onPyNode(n);
        ++records_;
        return n.id;
    }
    // A chain of native nodes, outermost frame first; returns the innermost node.
    uint64_t nativeStack(uint64_t parent, std::initializer_list<uint64_t> ips) {
        for (uint64_t ip : ips) {
            core::NativeNodeRecord n;
            n.id = agg.nativeNodes().size();
            n.parent = parent;
            n.ip = ip;
            agg.onNativeNode(n);
            ++records_;
            parent = n.id;
        }
        return parent;
    }
    // Each event 1 ms after the previous one.
    void alloc(uint8_t device, uint64_t address, uint64_t size, uint64_t nativeNode,
               uint64_t pyNode) {
        core::AllocRecord a;
        a.f.device = device;
        a.f.address = address;
        a.f.size = size;
        a.f.nativeNode = nativeNode;
        a.f.pyNode = pyNode;
        a.timeNs = clockNs_ += 1000000;
        agg.onAlloc(a);
        ++records_;
        ++end_.allocCount;
        end_.allocatedBytes += size;
    }
    void free(uint8_t device, uint64_t address, uint64_t size) {
        core::FreeRecord f;
        f.f.device = device;
        f.f.address = address;
        f.timeNs = clockNs_ += 1000000;
        agg.onFree(f);
        ++records_;
        ++end_.freeCount;
        end_.freedBytes += size;
    }
    void oom(uint8_t device, uint64_t size, uint64_t nativeNode) {
        core::OomRecord o;
        o.f.device = device;
        o.f.size = size;
        o.f.nativeNode = nativeNode;
        o.timeNs = clockNs_ += 1000000;
        agg.onOom(o);
        ++records_;
    }
    void note(const std::string& key, const std::string& text) {
        agg.onNote(core::NoteRecord{key, text});
        ++records_;
    }
    // The collector's End record; `extraRecords` pretends it counted records that never arrived.
    void end(uint64_t missedEvents = 0, uint64_t extraRecords = 0) {
        end_.recordCount = records_ + extraRecords;
        end_.missedEvents = missedEvents;
        agg.onEnd(end_);
    }

private:
    uint64_t records_ = 0;
    uint64_t clockNs_ = 0;
    core::EndFields end_;
};

const char* const kTrainPy = "/home/me/proj/train.py";
const char* const kThreadingPy = "/usr/lib/python3.11/threading.py";

// A Python program on torch's CPU allocator, as the collector in `python3 train.py`
// would describe it. Native stacks run from libc's start through the interpreter
// into torch and the collector's hook; Python stacks:
//   P2  build (train.py:6)        <- <module> (train.py:20)          1000 B, freed
//   P3  build (train.py:7)        <- <module> (train.py:20)          3000 B, freed
//   P7  recurse (train.py:11)     <- recurse (:12) <- recurse (:12) <- <module> (:21)   500 B,
//   leaked P8  Thread.run (threading.py:950), library code only              2000 B, freed
// Live cpu bytes: 1000, 4000, 3000 (free P2), 3500, 5500 (the peak), 3500, 500.
struct PythonRun {
    Stream s;
    FakeSymbolizer symbolizer;
    uint64_t native = 0;

    // cutAtInterpreter: the native stacks end at the interpreter's innermost frame,
    // as today's collector sends them; otherwise they go on to libc's start-up
    // frames, as earlier collectors did.
    explicit PythonRun(bool cutAtInterpreter = false) {
        const std::string python = "/usr/bin/python3.11", libc = "/lib/x86_64-linux-gnu/libc.so.6";
        const std::string torchCpu = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
        const std::string torchPython = "/usr/lib/x86_64-linux-gnu/libtorch_python.so.1.13";
        const std::string c10 = "/usr/lib/x86_64-linux-gnu/libc10.so.1.13";
        const std::string collector = "/opt/memtool/lib/memtool/libmemtool_collector.so";
        // Named frames come with an offset, as ElfSymbolizer gives them; the trace drops it.
        symbolizer.frames = {
            {0x1009, nativeFrame("__libc_start_main", libc, "", 0, 0x29d90)},
            {0x1008, nativeFrame("main", python, "", 0, 0x100)},
            {0x1007, nativeFrame("Py_RunMain", python, "", 0, 0x200)},
            {0x1006, nativeFrame("_PyEval_EvalFrameDefault", python, "", 0, 0x300)},
            {0x1005, nativeFrame("PyObject_Vectorcall", python, "", 0, 0x400)},
            {0x1004, nativeFrame("", torchPython, "", 0, 0x48a99c)},
            {0x1003, nativeFrame("at::empty(c10::ArrayRef<long>)", torchCpu, "", 0, 0x500)},
            {0x1002, nativeFrame("c10::alloc_cpu(unsigned long)", c10, "", 0, 0x600)},
            {0x1001,
             nativeFrame("memtool::hookedPosixMemalign(void**, unsigned long, unsigned long)",
                         collector, "", 0, 0x700)},
        };
        s.handshake(4242, {"python3", "train.py"});
        for (const auto& m : {python, libc, torchCpu, torchPython, c10, collector}) s.module(m);
        native = cutAtInterpreter ? s.nativeStack(0, {0x1005, 0x1004, 0x1003, 0x1002, 0x1001})
                                  : s.nativeStack(0, {0x1009, 0x1008, 0x1007, 0x1006, 0x1005,
                                                      0x1004, 0x1003, 0x1002, 0x1001});
        const uint64_t module = s.code(kTrainPy, "<module>", 1),
                       build = s.code(kTrainPy, "build", 5),
                       recurse = s.code(kTrainPy, "recurse", 10),
                       run = s.code(kThreadingPy, "Thread.run", 900);
        const uint64_t p1 = s.pyNode(0, module, 20), p2 = s.pyNode(p1, build, 6),
                       p3 = s.pyNode(p1, build, 7);
        const uint64_t p4 = s.pyNode(0, module, 21), p5 = s.pyNode(p4, recurse, 12),
                       p6 = s.pyNode(p5, recurse, 12), p7 = s.pyNode(p6, recurse, 11);
        const uint64_t p8 = s.pyNode(0, run, 950);
        s.alloc(kCpu, 0xa1, 1000, native, p2);
        s.alloc(kCpu, 0xa2, 3000, native, p3);
        s.free(kCpu, 0xa1, 1000);
        s.alloc(kCpu, 0xa3, 500, native, p7);
        s.alloc(kCpu, 0xa4, 2000, native, p8);  // the peak: 5500
        s.free(kCpu, 0xa4, 2000);
        s.free(kCpu, 0xa2, 3000);
        s.end();
    }

    core::ProcessTrace build(cli::SiteMode mode = cli::SiteMode::User,
                             const cli::ProcessOutcome& outcome = exited0()) {
        return cli::buildProcessTrace(s.agg, symbolizer, outcome, mode);
    }
    static cli::ProcessOutcome exited0() {
        cli::ProcessOutcome o;
        o.exitCode = 0;
        o.durationS = 1.5;
        return o;
    }
};

const core::Hotspot& hotspotWithSite(const core::ProcessTrace& p, const std::string& site) {
    for (const auto& h : p.hotspots)
        if (h.site == site) return h;
    throw std::runtime_error("no hotspot with site " + site);
}

const core::LineStat& lineRow(const core::ProcessTrace& p, const std::string& file, uint64_t line) {
    for (const auto& l : p.lines)
        if (l.file == file && l.line == line) return l;
    throw std::runtime_error("no line row " + file + ":" + std::to_string(line));
}

}  // namespace

TEST(TraceBuilder, ProcessAndDeviceTotals) {
    PythonRun run;
    core::ProcessTrace p = run.build();
    EXPECT_EQ(p.pid, 4242);
    EXPECT_EQ(p.ppid, 1);
    EXPECT_EQ(p.command, (std::vector<std::string>{"python3", "train.py"}));
    EXPECT_EQ(p.exitCode, 0);
    EXPECT_FALSE(p.exitSignal);
    EXPECT_EQ(p.durationS, 1.5);
    ASSERT_EQ(p.devices.size(), 1u);
    const core::DeviceTotals& cpu = p.devices.at("cpu");
    EXPECT_EQ(cpu.source, "libc10");
    EXPECT_EQ(cpu.peakBytes, 5500u);
    EXPECT_EQ(cpu.currentBytes, 500u);
    EXPECT_EQ(cpu.allocatedBytes, 6500u);
    EXPECT_EQ(cpu.freedBytes, 6000u);
    EXPECT_EQ(cpu.allocCount, 4u);
    EXPECT_EQ(cpu.freeCount, 3u);
    EXPECT_DOUBLE_EQ(cpu.peakTimeS, 0.005);  // the 5th event, 1 ms apart
    EXPECT_TRUE(cpu.pools.empty());
}

TEST(TraceBuilder, PeakConsumersAddUpToThePeak) {
    PythonRun run;
    core::ProcessTrace p = run.build();
    ASSERT_EQ(p.hotspots.size(), 4u);
    const auto& first = hotspotWithSite(p, "build (/home/me/proj/train.py:6)");
    EXPECT_EQ(first.peakBytes, 0u);  // freed before the peak
    EXPECT_EQ(first.allocatedBytes, 1000u);
    EXPECT_EQ(first.count, 1u);
    EXPECT_EQ(first.leakedBytes, 0u);
    const auto& second = hotspotWithSite(p, "build (/home/me/proj/train.py:7)");
    EXPECT_EQ(second.peakBytes, 3000u);
    EXPECT_EQ(second.leakedBytes, 0u);
    const auto& recursive = hotspotWithSite(p, "recurse (/home/me/proj/train.py:11)");
    EXPECT_EQ(recursive.peakBytes, 500u);
    EXPECT_EQ(recursive.leakedBytes, 500u);
    const auto& thread =
        hotspotWithSite(p, "at::empty(c10::ArrayRef<long>) (libtorch_cpu.so.1.13)");
    EXPECT_EQ(thread.peakBytes, 2000u);
    EXPECT_EQ(thread.allocatedBytes, 2000u);
    uint64_t sum = 0;
    for (const auto& h : p.hotspots) sum += h.peakBytes;
    EXPECT_EQ(sum, 5500u);
}

TEST(TraceBuilder, PythonFramesStandWhereTheInterpreterLoopWas) {
    PythonRun run;
    core::ProcessTrace p = run.build();
    const auto& h = hotspotWithSite(p, "recurse (/home/me/proj/train.py:11)");
    // torch's C++ inside the evaluation loop, then the Python stack; the collector's
    // hook, the interpreter's plumbing and everything outside the loop are gone.
    EXPECT_EQ(h.stack, (std::vector<std::string>{
                           "c10::alloc_cpu(unsigned long) (libc10.so.1.13)",
                           "at::empty(c10::ArrayRef<long>) (libtorch_cpu.so.1.13)",
                           "?? (libtorch_python.so.1.13+0x48a99c)",
                           "recurse (/home/me/proj/train.py:11)",
                           "recurse (/home/me/proj/train.py:12)",
                           "recurse (/home/me/proj/train.py:12)",
                           "<module> (/home/me/proj/train.py:21)",
                       }));
    // Each frame is stored once; stacks name them by id, innermost first.
    ASSERT_EQ(p.frames.size(), 10u);
    EXPECT_EQ(h.frames, (std::vector<uint32_t>{0, 1, 2, 6, 7, 7, 8}));
    EXPECT_EQ(h.siteFrame, 6u);
    EXPECT_EQ(p.frames[0], nativeFrame("c10::alloc_cpu(unsigned long)",
                                       "/usr/lib/x86_64-linux-gnu/libc10.so.1.13"));
    EXPECT_EQ(p.frames[2], nativeFrame("", "/usr/lib/x86_64-linux-gnu/libtorch_python.so.1.13", "",
                                       0, 0x48a99c));
    EXPECT_EQ(p.frames[6], pythonFrame("recurse", kTrainPy, 11, true));
    EXPECT_EQ(p.frames[9], pythonFrame("Thread.run", kThreadingPy, 950, false));
    // The interpreter's innermost frame ends the walk: its loop and libc's start-up
    // frames are never looked up.
    EXPECT_EQ(run.symbolizer.asked.count(0x1009), 0u);
    EXPECT_EQ(run.symbolizer.asked.count(0x1006), 0u);
    EXPECT_EQ(run.symbolizer.asked.count(0x1005), 1u);
}

TEST(TraceBuilder, StacksCutAtTheInterpreterReadAsThoseThatGoOn) {
    PythonRun cut(/*cutAtInterpreter=*/true), whole;
    core::ProcessTrace c = cut.build(), w = whole.build();
    ASSERT_EQ(c.hotspots.size(), w.hotspots.size());
    for (size_t i = 0; i < c.hotspots.size(); ++i) {
        EXPECT_EQ(c.hotspots[i].stack, w.hotspots[i].stack);
        EXPECT_EQ(c.hotspots[i].site, w.hotspots[i].site);
    }
    EXPECT_EQ(hotspotWithSite(c, "recurse (/home/me/proj/train.py:11)").stack.size(), 7u);
}

TEST(TraceBuilder, SiteIsTheInnermostUserFrameOrTheInnermostOfAll) {
    PythonRun run;
    core::ProcessTrace user = run.build(cli::SiteMode::User);
    std::vector<std::string> sites;
    std::vector<std::optional<uint32_t>> siteFrames;
    for (const auto& h : user.hotspots) {
        sites.push_back(h.site);
        siteFrames.push_back(h.siteFrame);
    }
    // No user frame in the thread's stack: the first frame outside the allocator (libc10).
    EXPECT_EQ(sites, (std::vector<std::string>{
                         "build (/home/me/proj/train.py:6)", "build (/home/me/proj/train.py:7)",
                         "recurse (/home/me/proj/train.py:11)",
                         "at::empty(c10::ArrayRef<long>) (libtorch_cpu.so.1.13)"}));
    EXPECT_EQ(siteFrames, (std::vector<std::optional<uint32_t>>{3, 5, 6, 1}));

    core::ProcessTrace all = run.build(cli::SiteMode::All);
    ASSERT_EQ(all.hotspots.size(), 4u);
    for (const auto& h : all.hotspots) {
        EXPECT_EQ(h.site, "c10::alloc_cpu(unsigned long) (libc10.so.1.13)");
        EXPECT_EQ(h.siteFrame, 0u);
    }
}

TEST(TraceBuilder, LineRowsAreInclusiveAndCountRecursionOnce) {
    PythonRun run;
    core::ProcessTrace p = run.build();
    ASSERT_EQ(p.lines.size(), 7u);
    struct Row {
        std::string file;
        uint64_t line;
        std::string function;
        uint64_t peak, allocated, self, count;
    };
    // Ordered by file, then line. peak: the most the device held right after an
    // allocation made while the line executed.
    const std::vector<Row> expected = {
        {kTrainPy, 6, "build", 1000, 1000, 1000, 1},
        {kTrainPy, 7, "build", 4000, 3000, 3000, 1},
        {kTrainPy, 11, "recurse", 3500, 500, 500, 1},
        {kTrainPy, 12, "recurse", 3500, 500, 0, 1},  // twice on the stack, counted once
        {kTrainPy, 20, "<module>", 4000, 4000, 0, 2},
        {kTrainPy, 21, "<module>", 3500, 500, 0, 1},
        {kThreadingPy, 950, "Thread.run", 5500, 2000, 2000, 1},
    };
    for (size_t i = 0; i < expected.size(); ++i) {
        const core::LineStat& l = p.lines[i];
        const Row& e = expected[i];
        EXPECT_EQ(l.file, e.file) << i;
        EXPECT_EQ(l.line, e.line) << i;
        EXPECT_EQ(l.function, e.function) << i;
        EXPECT_EQ(l.device, "cpu") << i;
        EXPECT_EQ(l.peakBytes, e.peak) << i;
        EXPECT_EQ(l.allocatedBytes, e.allocated) << i;
        EXPECT_EQ(l.selfAllocatedBytes, e.self) << i;
        EXPECT_EQ(l.count, e.count) << i;
    }
}

TEST(TraceBuilder, TheTimelineHoldsEveryChangeOfAShortRun) {
    PythonRun run;
    core::ProcessTrace p = run.build();
    ASSERT_EQ(p.timeline.size(), 1u);
    const core::TimelineSeries& cpu = p.timeline.at("cpu");
    // 7 ms in at most 1024 buckets: 8.192 µs each, one event in each.
    EXPECT_EQ(cpu.bucketS, 8192e-9);
    std::vector<std::pair<double, uint64_t>> points;
    for (const auto& point : cpu.points) points.emplace_back(point.timeS, point.bytes);
    EXPECT_EQ(points, (std::vector<std::pair<double, uint64_t>>{{0.001, 1000},
                                                                {0.002, 4000},
                                                                {0.003, 3000},
                                                                {0.004, 3500},
                                                                {0.005, 5500},
                                                                {0.006, 3500},
                                                                {0.007, 500}}));
}

TEST(TraceBuilder, TheTimelinesPeakIsThePeakExactlyThroughTraceJson) {
    PythonRun run;
    core::Trace written;
    written.processes.push_back(run.build());
    const core::Trace t = reporters::traceFromJson(
        nlohmann::json::parse(reporters::traceToJson(written).dump(1)), "t.json");
    const core::ProcessTrace& p = t.processes.at(0);
    const core::TimelinePoint* peak = nullptr;
    for (const auto& point : p.timeline.at("cpu").points)
        if (!peak || point.bytes > peak->bytes) peak = &point;
    ASSERT_TRUE(peak);
    EXPECT_EQ(peak->bytes, p.devices.at("cpu").peakBytes);
    EXPECT_EQ(peak->timeS, p.devices.at("cpu").peakTimeS);  // the same double, not a near one
    EXPECT_EQ(p.timeline.at("cpu").points.size(), 7u);
}

TEST(TraceBuilder, VerifiedStreamIsComplete) {
    PythonRun run;
    core::ProcessTrace p = run.build();
    EXPECT_TRUE(p.complete);
    EXPECT_EQ(p.incompleteReason, "");
    EXPECT_TRUE(p.stream.verified);
    // Handshake, 6 modules, 9 native nodes, 4 codes, 8 Python nodes, 4 allocs, 3 frees.
    EXPECT_EQ(p.stream.recordsReceived, 35u);
    EXPECT_EQ(p.stream.allocsReceived, 4u);
    EXPECT_EQ(p.stream.freesReceived, 3u);
    EXPECT_EQ(p.stream.unmatchedFrees, 0u);
    EXPECT_EQ(p.stream.missedEvents, 0u);
    EXPECT_TRUE(p.warnings.empty());
}

TEST(TraceBuilder, IncompleteStreamsSayWhy) {
    auto reason = [](const std::function<void(Stream&)>& feed, const cli::ProcessOutcome& outcome) {
        Stream s;
        FakeSymbolizer symbolizer;
        s.handshake(1, {"x"});
        s.alloc(kCpu, 0x10, 100, 0, 0);
        feed(s);
        core::ProcessTrace p =
            cli::buildProcessTrace(s.agg, symbolizer, outcome, cli::SiteMode::User);
        EXPECT_EQ(p.complete, p.incompleteReason.empty());
        return p.incompleteReason;
    };
    cli::ProcessOutcome killed;
    killed.exitSignal = 9;
    EXPECT_EQ(reason([](Stream&) {}, killed),
              "the process was killed by signal 9 before its collector could finish the stream");
    EXPECT_EQ(reason([](Stream&) {}, cli::ProcessOutcome{}),
              "the stream ended without its end record (the process was killed)");
    EXPECT_EQ(reason([](Stream& s) { s.end(0, 3); }, cli::ProcessOutcome{}),
              "the collector counted 5 records, 1 allocations and 0 frees; 2, 1 and 0 arrived");
    cli::ProcessOutcome broken;
    broken.streamError = "the stream broke: unknown record tag 0x51";
    EXPECT_EQ(reason([](Stream& s) { s.end(); }, broken),
              "the stream broke: unknown record tag 0x51");
    EXPECT_EQ(reason([](Stream& s) { s.end(); }, cli::ProcessOutcome{}), "");
}

TEST(TraceBuilder, MissedEventsAndUnpairedEventsAreReported) {
    Stream s;
    FakeSymbolizer symbolizer;
    s.handshake(1, {"x"});
    s.note(core::kNoteWarning, "the collector saw a fork");
    s.alloc(kCpu, 0x10, 100, 0, 0);
    s.alloc(kCpu, 0x10, 300, 0, 0);  // the free of the first never came
    s.free(kCpu, 0x99, 0);           // a free of an address never allocated
    s.end(2);
    core::ProcessTrace p =
        cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{}, cli::SiteMode::User);
    EXPECT_FALSE(p.stream.verified);
    EXPECT_EQ(p.stream.missedEvents, 2u);
    EXPECT_EQ(p.stream.unmatchedFrees, 1u);
    EXPECT_FALSE(p.complete);
    // Every record it sent arrived: what is missing is what it could not record.
    EXPECT_EQ(p.incompleteReason,
              "the collector could not record 2 events (each made while it was recording "
              "another on the same thread)");
    EXPECT_EQ(p.warnings, (std::vector<std::string>{
                              "the collector saw a fork",
                              "1 allocations reused a live address (a free went unseen)"}));
    EXPECT_EQ(p.devices.at("cpu").currentBytes, 300u);
    EXPECT_EQ(p.devices.at("cpu").peakBytes, 300u);
}

// The collector's lock counts (a note before each End): the last note's, as the
// trace's stream figures; a text that is not two whole numbers is no count.
TEST(TraceBuilder, TheCollectorsLockCountsAreTheLastNotes) {
    auto build = [](const std::vector<std::string>& texts) {
        Stream s;
        FakeSymbolizer symbolizer;
        s.handshake(1, {"x"});
        for (const std::string& t : texts) s.note(core::kNoteCollectorLock, t.c_str());
        s.end();
        return cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{},
                                      cli::SiteMode::User);
    };
    const core::ProcessTrace p = build({"7 2", "1300 604"});  // an exec that failed, then the end
    EXPECT_TRUE(p.stream.lockCounted);
    EXPECT_EQ(p.stream.lockContended, 1300u);
    EXPECT_EQ(p.stream.lockWaits, 604u);
    const nlohmann::json j = reporters::traceToJson(
        core::Trace{core::kTraceSchema, "0", 0, std::nullopt, {p}, {}, {}, {}});
    EXPECT_EQ(j["processes"][0]["stream"]["lock_contended"], 1300u);
    EXPECT_EQ(j["processes"][0]["stream"]["lock_waits"], 604u);
    const core::ProcessTrace back = reporters::traceFromJson(j, "t.json").processes.at(0);
    EXPECT_TRUE(back.stream.lockCounted);
    EXPECT_EQ(back.stream.lockContended, 1300u);
    EXPECT_EQ(back.stream.lockWaits, 604u);

    for (const char* hostile : {"", "1", "1 ", " 1 2", "1  2", "-1 2", "1 -2", "+1 2", "1 2 3",
                                "1 2x", "18446744073709551616 0", "a b"}) {
        const core::ProcessTrace q = build({hostile});
        EXPECT_FALSE(q.stream.lockCounted) << hostile;
        EXPECT_FALSE(reporters::traceToJson(core::Trace{
            core::kTraceSchema, "0", 0, std::nullopt, {q}, {}, {}, {}})["processes"][0]["stream"]
                         .contains("lock_contended"))
            << hostile;
    }
    // A stream without the note (an older collector's) has no counts.
    EXPECT_FALSE(build({}).stream.lockCounted);
}

TEST(TraceBuilder, AnAllocationWithoutStackHasNoSite) {
    Stream s;
    FakeSymbolizer symbolizer;
    s.handshake(1, {"x"});
    s.alloc(kCpu, 0x10, 64, 0, 0);
    s.end();
    core::ProcessTrace p =
        cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{}, cli::SiteMode::User);
    ASSERT_EQ(p.hotspots.size(), 1u);
    EXPECT_EQ(p.hotspots[0].site, "(no stack)");
    EXPECT_FALSE(p.hotspots[0].siteFrame);
    EXPECT_TRUE(p.hotspots[0].frames.empty());
    EXPECT_TRUE(p.hotspots[0].stack.empty());
    EXPECT_TRUE(p.frames.empty());
    EXPECT_TRUE(p.lines.empty());
}

TEST(TraceBuilder, StacksThatReadAlikeAreOneHotspot) {
    // Two call sites in one torch function: different return addresses, one name.
    Stream s;
    FakeSymbolizer symbolizer;
    const std::string torch = "/usr/lib/libtorch_cpu.so";
    symbolizer.frames = {{0x10, nativeFrame("at::empty", torch, "", 0, 0x1000)},
                         {0x20, nativeFrame("at::empty", torch, "", 0, 0x1040)},
                         {0x30, nativeFrame("", torch, "", 0, 0x2000)},
                         {0x40, nativeFrame("", torch, "", 0, 0x2040)}};
    s.handshake(1, {"x"});
    const uint64_t a = s.nativeStack(0, {0x10}), b = s.nativeStack(0, {0x20});
    const uint64_t c = s.nativeStack(0, {0x30}), d = s.nativeStack(0, {0x40});
    s.alloc(kCpu, 1, 100, a, 0);
    s.alloc(kCpu, 2, 200, b, 0);
    s.alloc(kCpu, 3, 400, c, 0);  // unnamed frames are told apart by their offset
    s.alloc(kCpu, 4, 800, d, 0);
    s.end();
    core::ProcessTrace p =
        cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{}, cli::SiteMode::User);
    ASSERT_EQ(p.hotspots.size(), 3u);
    EXPECT_EQ(p.hotspots[0].site, "at::empty (libtorch_cpu.so)");
    EXPECT_EQ(p.hotspots[0].allocatedBytes, 300u);
    EXPECT_EQ(p.hotspots[0].count, 2u);
    EXPECT_EQ(p.hotspots[1].site, "?? (libtorch_cpu.so+0x2000)");
    EXPECT_EQ(p.hotspots[2].site, "?? (libtorch_cpu.so+0x2040)");
    EXPECT_EQ(p.frames.size(), 3u);
}

// A C++ program (LibTorch and the CUDA runtime): native stacks only.
TEST(TraceBuilder, NativeStacksStopAtMainAndNameTheUsersCode) {
    Stream s;
    FakeSymbolizer symbolizer;
    const std::string app = "/home/me/app/build/app";
    symbolizer.frames = {
        {0x2006, nativeFrame("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6")},
        {0x2005, nativeFrame("main", app, "/home/me/app/main.cpp", 7)},
        {0x2004, nativeFrame("Model::forward()", app, "/home/me/app/model.cpp", 42)},
        // Inlined from a LibTorch header into the user's binary: library code all the same.
        {0x2003, nativeFrame("torch::empty(c10::ArrayRef<long>)", app,
                             "/usr/include/torch/csrc/api/include/torch/types.h", 10)},
        {0x2002, nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so")},
        {0x2001, nativeFrame("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12")},
        {0x2000, nativeFrame("memtool::TorchBridge::onBlock()",
                             "/opt/memtool/lib/memtool/libmemtool_torch_bridge.so")},
    };
    s.handshake(99, {"./app"});
    const uint64_t forward = s.nativeStack(0, {0x2006, 0x2005, 0x2004});
    const uint64_t cpuStack = s.nativeStack(forward, {0x2003, 0x2002});
    const uint64_t cudaStack = s.nativeStack(forward, {0x2001});
    // The bridge reports the caching allocator's blocks from inside the caller's cudaMalloc.
    const uint64_t poolStack = s.nativeStack(cudaStack, {0x2000});
    s.note(core::kNoteCudaSource, "runtime-hooks");
    s.alloc(kCpu, 0x100, 64, cpuStack, 0);
    s.alloc(kCuda0, 0xd1, 4096, cudaStack, 0);
    s.alloc(kCuda0Reserved, 0xd1, 4096, poolStack, 0);
    s.alloc(kCuda0Active, 0xd1, 1024, poolStack, 0);
    s.alloc(kCuda0Active, 0xd2, 2048, poolStack, 0);  // active peak 3072
    s.free(kCuda0Active, 0xd1, 1024);
    s.alloc(kCuda0, 0xd2, 8192, cudaStack, 0);  // device peak 12288
    s.free(kCuda0, 0xd2, 8192);
    s.end();
    core::ProcessTrace p =
        cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{}, cli::SiteMode::User);

    EXPECT_EQ(symbolizer.asked.count(0x2006), 0u);  // past main: never looked up
    ASSERT_EQ(p.hotspots.size(), 2u);
    const core::Hotspot& cpu = p.hotspots[0];
    EXPECT_EQ(cpu.device, "cpu");
    EXPECT_EQ(cpu.site, "Model::forward() (/home/me/app/model.cpp:42)");
    EXPECT_EQ(cpu.stack, (std::vector<std::string>{
                             "c10::alloc_cpu(unsigned long) (libc10.so)",
                             "torch::empty(c10::ArrayRef<long>) "
                             "(/usr/include/torch/csrc/api/include/torch/types.h:10)",
                             "Model::forward() (/home/me/app/model.cpp:42)",
                             "main (/home/me/app/main.cpp:7)",
                         }));
    EXPECT_FALSE(p.frames.at(cpu.frames[1]).user);  // the header's frame
    EXPECT_TRUE(p.frames.at(cpu.frames[2]).user);

    // The pools' events share the device's hotspot: the bridge's own frame is dropped,
    // so their stack reads as the cudaMalloc's.
    const core::Hotspot& cuda = p.hotspots[1];
    EXPECT_EQ(cuda.device, "cuda:0");
    EXPECT_EQ(cuda.site, "Model::forward() (/home/me/app/model.cpp:42)");
    EXPECT_EQ(cuda.stack.front(), "cudaMalloc (libcudart.so.12)");
    EXPECT_EQ(cuda.allocatedBytes, 12288u);
    EXPECT_EQ(cuda.count, 2u);
    EXPECT_EQ(cuda.peakBytes, 12288u);
    EXPECT_EQ(cuda.leakedBytes, 4096u);
    ASSERT_EQ(cuda.pools.size(), 2u);
    EXPECT_EQ(cuda.pools.at("active").allocatedBytes, 3072u);
    EXPECT_EQ(cuda.pools.at("active").count, 2u);
    EXPECT_EQ(cuda.pools.at("active").peakBytes, 3072u);
    EXPECT_EQ(cuda.pools.at("active").leakedBytes, 2048u);
    EXPECT_EQ(cuda.pools.at("reserved").allocatedBytes, 4096u);
    EXPECT_EQ(cuda.pools.at("reserved").peakBytes, 4096u);
    EXPECT_EQ(cuda.pools.at("reserved").leakedBytes, 4096u);

    const core::DeviceTotals& dev = p.devices.at("cuda:0");
    EXPECT_EQ(dev.source, "runtime-hooks");
    EXPECT_EQ(dev.peakBytes, 12288u);
    EXPECT_EQ(dev.currentBytes, 4096u);
    EXPECT_EQ(dev.allocatedBytes, 12288u);
    EXPECT_EQ(dev.freedBytes, 8192u);
    EXPECT_EQ(dev.pools.at("active").peakBytes, 3072u);
    EXPECT_EQ(dev.pools.at("active").currentBytes, 2048u);
    EXPECT_EQ(dev.pools.at("active").freeCount, 1u);
    EXPECT_EQ(dev.pools.at("reserved").peakBytes, 4096u);
    EXPECT_EQ(dev.pools.at("reserved").allocCount, 1u);
    EXPECT_EQ(p.devices.count("cuda:0.active"), 0u);  // a pool is no device of its own

    // Lines: the user's own native code with debug info, not the header. Ordered by
    // device, file, line: cpu's main.cpp:7 and model.cpp:42, then cuda:0's.
    ASSERT_EQ(p.lines.size(), 4u);
    const core::LineStat& forwardOnCpu = lineRow(p, "/home/me/app/model.cpp", 42);
    EXPECT_EQ(forwardOnCpu.device, "cpu");
    EXPECT_EQ(forwardOnCpu.selfAllocatedBytes, 64u);
    const core::LineStat& mainOnCuda = p.lines[2];
    EXPECT_EQ(mainOnCuda.device, "cuda:0");
    EXPECT_EQ(mainOnCuda.file, "/home/me/app/main.cpp");
    EXPECT_EQ(mainOnCuda.function, "main");
    EXPECT_EQ(mainOnCuda.selfAllocatedBytes, 0u);
    EXPECT_EQ(mainOnCuda.allocatedBytes, 12288u);
    const core::LineStat& forwardOnCuda = p.lines[3];
    EXPECT_EQ(forwardOnCuda.device, "cuda:0");
    EXPECT_EQ(forwardOnCuda.file, "/home/me/app/model.cpp");
    EXPECT_EQ(forwardOnCuda.function, "Model::forward()");
    EXPECT_EQ(forwardOnCuda.peakBytes, 12288u);
    EXPECT_EQ(forwardOnCuda.allocatedBytes, 12288u);
    EXPECT_EQ(forwardOnCuda.selfAllocatedBytes, 12288u);
    EXPECT_EQ(forwardOnCuda.count, 2u);
    EXPECT_EQ(forwardOnCuda.pools.at("active").peakBytes, 3072u);
    EXPECT_EQ(forwardOnCuda.pools.at("active").selfAllocatedBytes, 3072u);
    EXPECT_EQ(forwardOnCuda.pools.at("reserved").allocatedBytes, 4096u);
}

// An -O2 C++ program: at::empty (a LibTorch header) inlined into Net::forward
// inlined into main, and a constructor inlined into std::make_shared's code inlined
// into main. One return address each, several frames each.
namespace {

struct InlinedRun {
    Stream s;
    FakeSymbolizer symbolizer;
    const std::string app = "/home/me/mlp/build/mlp";
    const std::string mlp = "/home/me/mlp/mlp.cpp";

    InlinedRun() {
        const std::string torch = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
        const std::string empty = "/usr/include/ATen/ops/empty.h";
        const std::string bits = "/usr/include/c++/12/bits/";
        symbolizer.frames = {
            {0x3001, nativeFrame("c10::alloc_cpu(unsigned long)",
                                 "/usr/lib/x86_64-linux-gnu/libc10.so.1.13")},
            {0x3002,
             nativeFrame("at::_ops::empty_memory_format::call(c10::ArrayRef<long>)", torch)},
            {0x3009, nativeFrame("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6")},
        };
        symbolizer.chains = {
            {0x3003,
             {nativeFrame("at::empty(c10::ArrayRef<long>, c10::TensorOptions)", app, empty, 37,
                          0x1234),
              nativeFrame("Net::forward(long)", app, mlp, 5, 0x1234),
              nativeFrame("main", app, mlp, 11, 0x1234)}},
            {0x3004,
             {nativeFrame("at::empty(c10::ArrayRef<long>, c10::TensorOptions)", app, empty, 37,
                          0x1300),
              nativeFrame("Holder::Holder(long)", app, mlp, 20, 0x1300),
              nativeFrame("std::_Sp_counted_ptr_inplace<Holder, std::allocator<void>, "
                          "(__gnu_cxx::_Lock_policy)2>::_Sp_counted_ptr_inplace<long>("
                          "std::allocator<void>, long&&)",
                          app, bits + "shared_ptr_base.h", 604, 0x1300),
              nativeFrame("std::shared_ptr<Holder> std::make_shared<Holder, long>(long&&)", app,
                          bits + "shared_ptr.h", 1010, 0x1300),
              nativeFrame("main", app, mlp, 13, 0x1300)}},
        };
        s.handshake(7, {"./mlp"});
        const uint64_t forward = s.nativeStack(0, {0x3009, 0x3003, 0x3002, 0x3001});
        const uint64_t holder = s.nativeStack(0, {0x3009, 0x3004, 0x3002, 0x3001});
        s.alloc(kCpu, 0x100, 4000, forward, 0);
        s.alloc(kCpu, 0x200, 1000, holder, 0);
        s.end();
    }

    core::ProcessTrace build(cli::SiteMode mode) {
        return cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{}, mode);
    }
};

}  // namespace

TEST(TraceBuilder, InlinedFunctionsAreFramesOfTheirOwn) {
    InlinedRun run;
    core::ProcessTrace p = run.build(cli::SiteMode::User);
    ASSERT_EQ(p.hotspots.size(), 2u);
    const core::Hotspot& forward = p.hotspots[0];
    EXPECT_EQ(forward.site, "Net::forward(long) (/home/me/mlp/mlp.cpp:5)");
    EXPECT_EQ(forward.stack,
              (std::vector<std::string>{
                  "c10::alloc_cpu(unsigned long) (libc10.so.1.13)",
                  "at::_ops::empty_memory_format::call(c10::ArrayRef<long>) (libtorch_cpu.so.1.13)",
                  "at::empty(c10::ArrayRef<long>, c10::TensorOptions) "
                  "(/usr/include/ATen/ops/empty.h:37)",
                  "Net::forward(long) (/home/me/mlp/mlp.cpp:5)",
                  "main (/home/me/mlp/mlp.cpp:11)",
              }));
    EXPECT_EQ(forward.allocatedBytes, 4000u);
    // The header's function is library code in the user's binary; named frames
    // lose their offset, so both stacks share it.
    EXPECT_FALSE(p.frames.at(forward.frames[2]).user);
    EXPECT_EQ(p.frames.at(forward.frames[2]).offset, 0u);
    EXPECT_TRUE(p.frames.at(forward.frames[3]).user);
    EXPECT_TRUE(p.frames.at(forward.frames[4]).user);

    const core::Hotspot& holder = p.hotspots[1];
    EXPECT_EQ(holder.site, "Holder::Holder(long) (/home/me/mlp/mlp.cpp:20)");
    ASSERT_EQ(holder.frames.size(), 7u);
    EXPECT_EQ(holder.frames[2], forward.frames[2]);
    EXPECT_FALSE(p.frames.at(holder.frames[4]).user);  // shared_ptr_base.h
    EXPECT_FALSE(p.frames.at(holder.frames[5]).user);  // shared_ptr.h
    EXPECT_EQ(holder.stack[6], "main (/home/me/mlp/mlp.cpp:13)");
    EXPECT_EQ(p.frames.size(), 9u);

    // Past main (the last frame of its address): never looked up.
    EXPECT_EQ(run.symbolizer.asked.count(0x3009), 0u);

    // Lines: the user's own, each inlined function's line with its bytes as self;
    // no row for a header's line.
    ASSERT_EQ(p.lines.size(), 4u);
    EXPECT_EQ(lineRow(p, run.mlp, 5).selfAllocatedBytes, 4000u);
    EXPECT_EQ(lineRow(p, run.mlp, 5).function, "Net::forward(long)");
    EXPECT_EQ(lineRow(p, run.mlp, 11).allocatedBytes, 4000u);
    EXPECT_EQ(lineRow(p, run.mlp, 11).selfAllocatedBytes, 0u);
    EXPECT_EQ(lineRow(p, run.mlp, 20).selfAllocatedBytes, 1000u);
    EXPECT_EQ(lineRow(p, run.mlp, 13).allocatedBytes, 1000u);
    EXPECT_EQ(lineRow(p, run.mlp, 13).selfAllocatedBytes, 0u);
}

TEST(TraceBuilder, AnInlinedFunctionIsASiteInEveryMode) {
    InlinedRun run;
    // What the user's inlined code called: the header's inlined at::empty.
    EXPECT_EQ(run.build(cli::SiteMode::Library).hotspots[0].site,
              "at::empty(c10::ArrayRef<long>, c10::TensorOptions) "
              "(/usr/include/ATen/ops/empty.h:37)");
    EXPECT_EQ(run.build(cli::SiteMode::All).hotspots[0].site,
              "c10::alloc_cpu(unsigned long) (libc10.so.1.13)");
    // The live view's site text: shortened, whole template arguments and all.
    EXPECT_EQ(cli::siteText(run.s.agg, run.symbolizer, run.s.agg.stacks()[1], cli::SiteMode::User),
              "Holder::Holder (mlp.cpp:20)");
}

// A process torchrun (or Slurm) started: its rank, local rank and world size, as
// its launcher set them; a value that is no number is kept but gives no rank.
TEST(TraceBuilder, RanksComeFromTheLaunchersVariables) {
    core::Aggregator agg;
    core::Handshake h;
    h.pid = 7;
    h.environment = {
        {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "x8"}, {"SLURM_NTASKS", "8"}};
    agg.onHandshake(h);
    agg.onEnd(core::EndFields{0, 0, 0, 0, 1, 0, 0, 1});
    FakeSymbolizer symbolizer;
    core::ProcessTrace p = cli::buildProcessTrace(agg, symbolizer, {}, cli::SiteMode::User);
    EXPECT_EQ(p.rank, 3);
    EXPECT_EQ(p.localRank, 1);
    EXPECT_EQ(p.worldSize, 8);  // WORLD_SIZE is no number: Slurm's count stands
    EXPECT_EQ(p.rankEnvironment.at("WORLD_SIZE"), "x8");
    // Not seen from outside: the status its collector saw it give exit().
    EXPECT_EQ(p.exitCode, 0);
    EXPECT_TRUE(p.complete);
    const core::ProcessTrace back =
        reporters::traceFromJson(reporters::traceToJson(core::Trace{
                                     core::kTraceSchema, "0", 0, std::nullopt, {p}, {}, {}, {}}),
                                 "t.json")
            .processes.at(0);
    EXPECT_EQ(back.rank, 3);
    EXPECT_EQ(back.localRank, 1);
    EXPECT_EQ(back.worldSize, 8);
    EXPECT_EQ(back.rankEnvironment, p.rankEnvironment);
}

// An image that exec'd: whole, no exit status of its own, and nothing leaked,
// since what it held went with it.
TEST(TraceBuilder, AnImageThatExecdLeaksNothing) {
    Stream s;
    s.handshake(9, {"python3", "first.py"});
    s.alloc(kCpu, 0x10, 2000000, 0, 0);
    s.alloc(kCpu, 0x20, 500000, 0, 0);
    s.free(kCpu, 0x20, 500000);
    core::EndFields end{2, 1, 2500000, 500000, 4, 0, static_cast<uint64_t>(core::ExitKind::Exec),
                        0};
    s.agg.onEnd(end);
    FakeSymbolizer symbolizer;
    core::ProcessTrace p = cli::buildProcessTrace(s.agg, symbolizer, {}, cli::SiteMode::User);
    EXPECT_TRUE(p.exec);
    EXPECT_TRUE(p.complete) << p.incompleteReason;
    EXPECT_FALSE(p.exitCode);
    const core::DeviceTotals& cpu = p.devices.at("cpu");
    EXPECT_EQ(cpu.peakBytes, 2500000u);
    EXPECT_EQ(cpu.currentBytes, 0u);
    for (const core::Hotspot& h : p.hotspots) EXPECT_EQ(h.leakedBytes, 0u);
    const core::ProcessTrace back =
        reporters::traceFromJson(reporters::traceToJson(core::Trace{
                                     core::kTraceSchema, "0", 0, std::nullopt, {p}, {}, {}, {}}),
                                 "t.json")
            .processes.at(0);
    EXPECT_TRUE(back.exec);
}

// An out-of-memory event keeps its frames as hotspots do: ids into the process's
// one table, its site and the sites that held memory the very frames hotspots
// are named after; a request whose stack never allocated adds its frames.
TEST(TraceBuilder, OutOfMemoryEventsKeepFramesAsHotspotsDo) {
    Stream s;
    FakeSymbolizer symbolizer;
    const std::string app = "/home/me/app/build/app", c10 = "/usr/lib/libc10.so";
    symbolizer.frames = {
        {0x3004, nativeFrame("main", app, "/home/me/app/main.cpp", 7)},
        {0x3003, nativeFrame("Model::grow(long)", app, "/home/me/app/model.cpp", 20)},
        {0x3002, nativeFrame("Model::huge(long)", app, "/home/me/app/model.cpp", 30)},
        {0x3001, nativeFrame("c10::alloc_cpu(unsigned long)", c10)},
    };
    s.handshake(77, {"./app"});
    s.module(app);
    s.module(c10);
    const uint64_t main = s.nativeStack(0, {0x3004});
    const uint64_t grow = s.nativeStack(main, {0x3003, 0x3001});
    const uint64_t huge = s.nativeStack(main, {0x3002, 0x3001});
    s.alloc(kCpu, 0x100, 4096, grow, 0);
    s.oom(kCpu, 1 << 30, huge);  // never allocated: no hotspot
    s.end();
    const core::ProcessTrace p =
        cli::buildProcessTrace(s.agg, symbolizer, cli::ProcessOutcome{}, cli::SiteMode::All);

    ASSERT_EQ(p.hotspots.size(), 1u);
    const core::Hotspot& h = p.hotspots[0];
    ASSERT_TRUE(h.siteFrame.has_value());
    EXPECT_EQ(p.frames.at(*h.siteFrame).function, "c10::alloc_cpu(unsigned long)");
    ASSERT_EQ(p.oom.size(), 1u);
    const core::OomEvent& e = p.oom[0];
    EXPECT_EQ(e.requestedBytes, 1u << 30);
    EXPECT_EQ(e.siteFrame, h.siteFrame);  // c10::alloc_cpu: one frame, one id
    EXPECT_EQ(e.site, "c10::alloc_cpu(unsigned long) (libc10.so)");
    ASSERT_EQ(e.frames.size(), e.stack.size());
    for (size_t i = 0; i < e.frames.size(); ++i)
        EXPECT_EQ(core::formatFrame(p.frames.at(e.frames[i])), e.stack[i]);
    ASSERT_EQ(e.frames.size(), 3u);
    EXPECT_EQ(p.frames.at(e.frames[1]).function, "Model::huge(long)");
    EXPECT_EQ(e.liveBytes, 4096u);
    ASSERT_EQ(e.bySite.size(), 1u);
    EXPECT_EQ(e.bySite[0].bytes, 4096u);
    EXPECT_EQ(e.bySite[0].siteFrame, h.siteFrame);
    EXPECT_EQ(e.bySite[0].site, "c10::alloc_cpu(unsigned long) (libc10.so)");
    // Through trace.json and back, ids and all.
    const core::ProcessTrace back =
        reporters::traceFromJson(reporters::traceToJson(core::Trace{
                                     core::kTraceSchema, "0", 0, std::nullopt, {p}, {}, {}, {}}),
                                 "t.json")
            .processes.at(0);
    EXPECT_EQ(back.frames, p.frames);
    EXPECT_EQ(back.oom.at(0).frames, e.frames);
    EXPECT_EQ(back.oom.at(0).siteFrame, e.siteFrame);
    EXPECT_EQ(back.oom.at(0).bySite.at(0).siteFrame, e.bySite[0].siteFrame);
}
