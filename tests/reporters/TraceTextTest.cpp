// trace.json's text is written from the model without a JSON document: it must
// be laid out exactly as a document of it dumps (one space a level, keys in
// order, numbers as nlohmann writes them, strings escaped and made UTF-8), for
// every field a trace can hold, and read back as what was written.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "tests/TestFrames.h"
#include "trace/TraceReader.h"
#include "trace/TraceWriter.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;
using nlohmann::json;

namespace {

// Strings a program can hand memtool: quotes, backslashes, control characters,
// UTF-8 beyond ASCII, DEL, and bytes that are not UTF-8 at all.
const std::string kAwkward = "a \"quoted\" \\path\\\t\n\x01 caf\xc3\xa9 \x7f bad\xff\xfe end";
// The same for a source line, which holds no newline.
const std::string kAwkwardLine = "x = \"q\" \\ \t caf\xc3\xa9 bad\xff";

// Each figure a number of its own, from `base` up.
core::PoolTotals poolTotals(uint64_t base) {
    core::PoolTotals t;
    uint64_t* figures[] = {&t.peakBytes,          &t.currentBytes,      &t.leakedBytes,
                           &t.teardownFreedBytes, &t.teardownFreeCount, &t.pausedBytes,
                           &t.allocatedBytes,     &t.freedBytes,        &t.allocCount,
                           &t.freeCount};
    for (uint64_t* f : figures) *f = base++;
    t.peakTimeS = 0.125;
    return t;
}

core::DeviceTotals device(uint64_t base, const char* source) {
    core::DeviceTotals d;
    static_cast<core::PoolTotals&>(d) = poolTotals(base);
    d.source = source;
    return d;
}

// A process with every field set, every optional one present.
core::ProcessTrace everyField() {
    core::ProcessTrace p;
    p.pid = 4242;
    p.ppid = 1;
    p.command = {"python3", kAwkward, ""};
    p.cwd = "/work/" + kAwkward;
    p.exitCode = -3;
    p.exitSignal = 9;
    p.complete = false;
    p.incompleteReason = "stopped: " + kAwkward;
    p.snapshot = true;
    p.forked = true;
    p.exec = true;
    p.rank = 3;
    p.localRank = 1;
    p.worldSize = 8;
    p.rankEnvironment = {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", kAwkward}};
    p.durationS = 12.5;
    p.leakMoment = core::kLeakAtPython;
    p.leakTimeS = 1e-7;
    p.maxRssBytes = std::numeric_limits<uint64_t>::max();
    p.cpuS = 3.0;
    p.nativeStacks = false;
    p.pythonStacks = true;
    p.devices["cuda:0"] = device(100, "cupti");
    p.devices["cuda:0"].pools = {{core::kPoolActive, poolTotals(200)},
                                 {core::kPoolReserved, poolTotals(300)},
                                 {core::kPoolGraphs, poolTotals(400)},
                                 {core::kPoolGraphsActive, poolTotals(500)}};
    p.graphPools = {{"cuda:0", 1, 7, 0, 20971520, 4194304, 0, 0, {{"f (/src/t.py:3)", 4194304}}},
                    {"cuda:0", 2, 0, 18446744073709551615ull, 2, 1, 2, 1, {}}};
    p.devices["cpu"] = device(7, "libc10");
    p.devices["cpu"].heldBy = {{"model", 40}, {kAwkward, 2}, {"", 1}};
    p.frames = {nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
                nativeFrame("", "/usr/lib/" + kAwkward, "", 0, 0x1a),
                pythonFrame("step", "/src/t.py", 3, true)};
    p.frames[2].source = "x = torch.empty(" + kAwkward + ")";
    core::Hotspot h;
    h.device = "cuda:0";
    h.frames = {0, 1, 2};
    h.siteFrame = 2;
    h.site = "step (/src/t.py:3)";
    h.stack = {"a", kAwkward};
    h.allocatedBytes = 10;
    h.count = 1;
    h.peakBytes = 8;
    h.leakedBytes = 2;
    h.pools[core::kPoolActive] = {
        .allocatedBytes = 1, .count = 2, .peakBytes = 3, .leakedBytes = 4};
    p.hotspots.push_back(h);
    core::Hotspot none;
    none.device = "cpu";
    none.site = core::kNoStackSite;
    p.hotspots.push_back(none);
    core::LineStat l;
    l.file = "/src/" + kAwkward;
    l.line = 3;
    l.function = "step";
    l.device = "cuda:0";
    l.peakBytes = 5;
    l.allocatedBytes = 6;
    l.selfAllocatedBytes = 7;
    l.count = 8;
    l.pools[core::kPoolReserved] = {9, 10, 11, 12};
    p.lines.push_back(l);
    p.stream.verified = true;
    p.stream.readBack = true;
    p.stream.recordsReceived = 100;
    p.stream.allocsReceived = 40;
    p.stream.freesReceived = 39;
    p.stream.unmatchedFrees = 1;
    p.stream.missedEvents = 2;
    p.stream.lockCounted = true;
    p.stream.lockContended = 5;
    p.stream.lockWaits = 1;
    p.regions = {{"weights", "cuda:0", "host", 4096, 0}, {kAwkward, "cpu", "disk", 8192, 8192}};
    p.control = {{0.5, "pause", "ctl", "weights", "cuda:0", 4096, "host", 0.01, true, ""},
                 {0.75, "resume", "api", kAwkward, "cpu", 0, "none", 2.5e-5, false, kAwkward}};
    core::OomEvent oom;
    oom.timeS = 0.5;
    oom.device = "cpu";
    oom.requestedBytes = 64;
    oom.source = "allocator";
    oom.site = kAwkward;
    oom.stack = {kAwkward};
    oom.frames = {1};
    oom.file = "/w/" + kAwkward;
    oom.line = 2;
    oom.function = "f";
    oom.heldOn = "cpu";
    oom.liveBytes = 1000;
    oom.bySite = {{"f (x.so)", 1000, 1}, {"(no stack)", 0, std::nullopt}};
    oom.byLine = {{"", 0, kAwkward, 1000}};
    p.oom.push_back(oom);
    p.oomCount = 17;
    core::TimelineSeries series;
    series.bucketS = 2048e-9;
    series.points = {{0.0, 0}, {0.25, 100}, {123456.789, 3000000}, {1e21, 0}};
    p.timeline["cuda:0.active"] = series;
    p.timeline["cpu"] = core::TimelineSeries{};
    core::SourceFile source;
    source.fnv1a64 = 0xcbf29ce484222325;
    source.lines = {{1, "import torch"}, {3, kAwkwardLine}};
    p.sources["/src/t.py"] = source;
    p.warnings = {"first", kAwkward};
    return p;
}

// The fewest fields: a program that was not tracked.
core::ProcessTrace fewestFields() {
    core::ProcessTrace p;
    p.pid = 1;
    p.complete = true;
    p.tracked = false;
    return p;
}

// What a JSON document of `text` dumps, as trace.json is written.
std::string dumpedAgain(const std::string& text) {
    return json::parse(text).dump(1, ' ', false, json::error_handler_t::replace) + '\n';
}

}  // namespace

TEST(TraceText, EveryFieldIsLaidOutAsItsDocumentDumps) {
    core::Trace t;
    t.memtoolVersion = "0.1.0";
    t.cliMaxRssBytes = 123456789;
    t.cliCpuS = 0.080338;
    t.processes = {everyField(), fewestFields()};
    const std::string text = reporters::traceToText(t);
    EXPECT_EQ(text, dumpedAgain(text));
    // Bytes that are not UTF-8 became U+FFFD; the rest of the string is kept.
    EXPECT_NE(text.find("bad\xef\xbf\xbd\xef\xbf\xbd end"), std::string::npos);
    EXPECT_NE(text.find("caf\xc3\xa9"), std::string::npos);
    // Numbers as a document writes them: doubles that are whole keep ".0", large
    // and small ones their exponent.
    EXPECT_NE(text.find("\"cpu_s\": 3.0,"), std::string::npos);
    EXPECT_NE(text.find("\"leak_time_s\": 1e-07,"), std::string::npos);
    EXPECT_NE(text.find("\"max_rss_bytes\": 18446744073709551615,"), std::string::npos);
    EXPECT_NE(text.find("\"exit_code\": -3,"), std::string::npos);

    // Read back, it is what was written.
    const core::Trace back = reporters::traceFromText(text, "t.json");
    ASSERT_EQ(back.processes.size(), 2u);
    const core::ProcessTrace& p = back.processes[0];
    EXPECT_EQ(p.command.at(1),
              "a \"quoted\" \\path\\\t\n\x01 caf\xc3\xa9 \x7f bad\xef\xbf\xbd\xef\xbf\xbd end");
    EXPECT_EQ(p.devices.at("cuda:0").pools.at(core::kPoolReserved).freeCount, 309u);
    EXPECT_EQ(p.devices.at("cuda:0").pools.at(core::kPoolGraphsActive).freeCount, 509u);
    ASSERT_EQ(p.graphPools.size(), 2u);
    EXPECT_EQ(p.graphPools.at(0).reservedPeakBytes, 20971520u);
    EXPECT_EQ(p.graphPools.at(1).idSecond, 18446744073709551615ull);
    EXPECT_EQ(p.graphPools.at(1).activeEndBytes, 1u);
    EXPECT_EQ(p.graphPools.at(0).sites.at(0).site, "f (/src/t.py:3)");
    EXPECT_TRUE(p.graphPools.at(1).sites.empty());
    ASSERT_EQ(p.devices.at("cpu").heldBy.size(), 3u);
    EXPECT_EQ(p.devices.at("cpu").heldBy.at(0).name, "model");
    EXPECT_EQ(p.devices.at("cpu").heldBy.at(0).bytes, 40u);
    EXPECT_EQ(p.devices.at("cpu").heldBy.at(2).name, "");
    EXPECT_EQ(p.hotspots.at(0).pools.at(core::kPoolActive).leakedBytes, 4u);
    EXPECT_EQ(p.lines.at(0).pools.at(core::kPoolReserved).count, 12u);
    EXPECT_EQ(p.timeline.at("cuda:0.active").points.at(3).timeS, 1e21);
    EXPECT_EQ(p.sources.at("/src/t.py").lines.at(1), "import torch");
    EXPECT_EQ(p.rankEnvironment.at("WORLD_SIZE"), "8");
    EXPECT_EQ(p.control.at(1).durationS, 2.5e-5);
    EXPECT_EQ(p.oom.at(0).bySite.at(1).siteFrame, std::nullopt);
    EXPECT_EQ(back.cliCpuS, 0.080338);
    // Written again, the text is the same.
    EXPECT_EQ(reporters::traceToText(back), text);
}

// The layout itself, spelled out once: what a reader of trace.json sees.
TEST(TraceText, AHotspotIsWrittenOneMemberALineInKeyOrder) {
    core::Hotspot h;
    h.device = "cpu";
    h.frames = {2, 0};
    h.siteFrame = 2;
    h.site = "step (/src/t.py:3)";
    h.stack = {"step (/src/t.py:3)", "f (lib.so)"};
    h.allocatedBytes = 3000000;
    h.count = 1;
    h.peakBytes = 3000000;
    EXPECT_EQ(reporters::hotspotText(h), R"text({
 "allocated_bytes": 3000000,
 "count": 1,
 "device": "cpu",
 "frames": [
  2,
  0
 ],
 "held_at_exit_bytes": 0,
 "leaked_bytes": 0,
 "live_at_end_bytes": 0,
 "peak_bytes": 3000000,
 "site": "step (/src/t.py:3)",
 "site_frame": 2,
 "stack": [
  "step (/src/t.py:3)",
  "f (lib.so)"
 ]
})text");
    core::LineStat empty;
    EXPECT_EQ(reporters::lineText(empty), R"text({
 "allocated_bytes": 0,
 "count": 0,
 "device": "",
 "file": "",
 "function": "",
 "line": 0,
 "peak_bytes": 0,
 "self_allocated_bytes": 0
})text");
}

// memtool run renders a process's body while the program exits and sets how it
// ended afterwards: the trace's text must be the same as rendered whole.
TEST(TraceText, ABodyRenderedAheadIsWrittenAsTheWholeWouldBe) {
    core::Trace t;
    t.memtoolVersion = "0.1.0";
    t.processes = {everyField(), fewestFields(), everyField()};
    const reporters::RenderedBody first(t.processes[0]), second(t.processes[1]);
    // Set after rendering: what the outcome and the end of the run add.
    for (core::ProcessTrace& p : t.processes) {
        p.exitCode = 7;
        p.durationS = 2.75;
        p.cpuS = 1.5;
        p.warnings.push_back("added at the end");
        p.cwd = "/elsewhere";
    }
    const std::string whole = reporters::traceToText(t);
    // The third process has none rendered: it is written from itself.
    const std::vector<const reporters::RenderedBody*> rendered = {&first, &second};
    EXPECT_EQ(reporters::traceToText(t, rendered), whole);
    EXPECT_NE(whole.find("\"exit_code\": 7,"), std::string::npos);
    // What was rendered is what is written: a body that differs shows.
    core::Trace other = t;
    other.processes[0].hotspots.at(0).allocatedBytes += 1;
    EXPECT_NE(reporters::traceToText(other, rendered), reporters::traceToText(other));
}

// memtool run writes trace.json in pieces, the bodies rendered ahead from where
// they are: one after another they are the whole text, and none is copied.
TEST(TraceText, PiecesAreTheWholeTextWithTheRenderedBodiesNotCopied) {
    core::Trace t;
    t.memtoolVersion = "0.1.0";
    t.processes = {everyField(), fewestFields(), everyField()};
    const reporters::RenderedBody first(t.processes[0]), third(t.processes[2]);
    t.processes[1].exitCode = 3;
    const std::vector<const reporters::RenderedBody*> rendered = {&first, nullptr, &third};
    // As written from the processes themselves, nothing rendered ahead.
    const std::string whole = reporters::traceToText(t);
    const reporters::TextPieces pieces = reporters::traceToPieces(t, rendered);
    std::string joined;
    for (std::string_view piece : pieces.views()) joined += piece;
    EXPECT_EQ(joined, whole);
    // Each rendered member is a piece of its own, viewing the rendered text.
    std::set<const char*> renderedText;
    for (const reporters::RenderedBody* body : {&first, &third})
        for (const auto& [key, text] : body->members()) renderedText.insert(text.data());
    ASSERT_EQ(pieces.inserts.size(), renderedText.size());
    for (const auto& [at, text] : pieces.inserts) EXPECT_EQ(renderedText.count(text.data()), 1u);
    EXPECT_EQ(pieces.own.size(), whole.size() - first.size() - third.size());
    // Without anything rendered, the text is all its own.
    const reporters::TextPieces alone = reporters::traceToPieces(t, {});
    EXPECT_TRUE(alone.inserts.empty());
    EXPECT_EQ(alone.own, reporters::traceToText(t));
    ASSERT_EQ(alone.views().size(), 1u);
}
