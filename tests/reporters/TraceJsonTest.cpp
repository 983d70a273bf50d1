// trace.json's frames: written as a per-process table plus ids, read back into the
// same model; a trace from before the table read from its text; malformed fields
// refused as bad input (exit 2), never as an escaping exception.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "tests/TestFrames.h"
#include "trace/TraceReader.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;
using nlohmann::json;

namespace {

core::Trace traceWithFrames() {
    core::ProcessTrace p;
    p.pid = 7;
    p.command = {"python3", "t.py"};
    p.complete = true;
    p.frames = {nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
                nativeFrame("", "/usr/lib/libtorch_python.so", "", 0, 0x1a),
                pythonFrame("step", "/src/t.py", 3, true)};
    core::Hotspot h;
    h.device = "cpu";
    h.frames = {0, 1, 2};
    h.siteFrame = 2;
    h.site = "step (/src/t.py:3)";
    h.stack = {"c10::alloc_cpu(unsigned long) (libc10.so)", "?? (libtorch_python.so+0x1a)",
               "step (/src/t.py:3)"};
    h.allocatedBytes = 10;
    h.count = 1;
    p.hotspots.push_back(h);
    core::Hotspot none;
    none.device = "cpu";
    none.site = core::kNoStackSite;
    none.allocatedBytes = 5;
    none.count = 1;
    p.hotspots.push_back(none);
    core::Trace t;
    t.processes.push_back(p);
    return t;
}

// The fields every process and hotspot needs, around what a test puts in.
json process(json hotspots, json frames = nullptr) {
    json p = {{"pid", 1},          {"command", {"x"}},          {"complete", true},
              {"duration_s", 1.0}, {"devices", json::object()}, {"hotspots", std::move(hotspots)}};
    if (!frames.is_null()) p["frames"] = std::move(frames);
    return p;
}

json hotspot(const std::string& site, json stack) {
    return {{"device", "cpu"},      {"site", site}, {"stack", std::move(stack)},
            {"allocated_bytes", 1}, {"count", 1},   {"peak_bytes", 0},
            {"leaked_bytes", 0}};
}

core::Trace read(json process) {
    return reporters::traceFromJson(
        json{{"schema", "memtool.trace/1"}, {"processes", json::array({std::move(process)})}},
        "t.json");
}

}  // namespace

TEST(TraceJson, FramesAreATablePerProcessAndIdsPerHotspot) {
    json j = reporters::traceToJson(traceWithFrames());
    const json& p = j.at("processes").at(0);
    EXPECT_EQ(p.at("frames"), json::parse(R"json([
        {"kind": "native", "function": "c10::alloc_cpu(unsigned long)", "file": "", "line": 0,
         "module": "/usr/lib/libc10.so", "user": false},
        {"kind": "native", "function": "", "file": "", "line": 0, "module": "/usr/lib/libtorch_python.so",
         "offset": 26, "user": false},
        {"kind": "python", "function": "step", "file": "/src/t.py", "line": 3, "user": true}])json"));
    const json& h = p.at("hotspots").at(0);
    EXPECT_EQ(h.at("frames"), json::parse("[0, 1, 2]"));
    EXPECT_EQ(h.at("site_frame"), 2);
    EXPECT_EQ(h.at("site"), "step (/src/t.py:3)");  // the text stays, as before
    EXPECT_EQ(h.at("stack").at(1), "?? (libtorch_python.so+0x1a)");
    const json& none = p.at("hotspots").at(1);
    EXPECT_EQ(none.at("frames"), json::array());
    EXPECT_TRUE(none.at("site_frame").is_null());

    core::Trace back = reporters::traceFromJson(j, "t.json");
    const core::ProcessTrace& q = back.processes.at(0);
    EXPECT_EQ(q.frames, traceWithFrames().processes[0].frames);
    EXPECT_EQ(q.hotspots.at(0).frames, (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(q.hotspots.at(0).siteFrame, 2u);
    EXPECT_EQ(q.hotspots.at(0).stack, traceWithFrames().processes[0].hotspots[0].stack);
    EXPECT_FALSE(q.hotspots.at(1).siteFrame);
}

TEST(TraceJson, ATraceWithoutFramesIsReadFromItsText) {
    core::Trace t = read(process({
        hotspot("step (/src/t.py:3)",
                {"c10::alloc_cpu(unsigned long) (libc10.so)", "?? (libtorch_python.so+0x1a)",
                 "Model::forward() (/src/model.cpp:42)", "step (/src/t.py:3)",
                 "run (/usr/lib/python3.11/threading.py:950)"}),
        hotspot("(no stack)", json::array()),
        hotspot("at::foo (libtorch_cpu.so)", json::array()),  // a site outside its stack
        hotspot("?? (?+0x10)", {"?? (?+0x10)"}),
    }));
    const core::ProcessTrace& p = t.processes.at(0);
    ASSERT_EQ(p.frames.size(), 7u);
    EXPECT_EQ(p.frames[0], nativeFrame("c10::alloc_cpu(unsigned long)", "libc10.so"));
    EXPECT_EQ(p.frames[1], nativeFrame("", "libtorch_python.so", "", 0, 0x1a));
    EXPECT_EQ(p.frames[2], nativeFrame("Model::forward()", "", "/src/model.cpp", 42));
    EXPECT_EQ(p.frames[3], pythonFrame("step", "/src/t.py", 3, true));
    EXPECT_EQ(p.frames[4], pythonFrame("run", "/usr/lib/python3.11/threading.py", 950, false));
    EXPECT_EQ(p.frames[5], nativeFrame("at::foo", "libtorch_cpu.so"));
    EXPECT_EQ(p.frames[6], nativeFrame("", "", "", 0, 0x10));
    EXPECT_EQ(p.hotspots[0].frames, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(p.hotspots[0].siteFrame, 3u);
    EXPECT_FALSE(p.hotspots[1].siteFrame);
    EXPECT_EQ(p.hotspots[2].siteFrame, 5u);
    EXPECT_EQ(p.hotspots[3].siteFrame, 6u);
    // Parsed back, each frame reads as it was written.
    for (size_t i = 0; i < p.hotspots[0].frames.size(); ++i)
        EXPECT_EQ(core::formatFrame(p.frames[p.hotspots[0].frames[i]]), p.hotspots[0].stack[i]);
    EXPECT_EQ(core::formatFrame(p.frames[6]), "?? (?+0x10)");
}

TEST(TraceJson, TimelineAndOomEventsRoundTrip) {
    core::Trace t = traceWithFrames();
    core::TimelineSeries series;
    series.bucketS = 2048e-9;
    series.points = {{0.25, 100}, {0.5, 3000000}, {0.75, 0}};
    t.processes[0].timeline["cuda:0.active"] = series;
    core::OomEvent oom;
    oom.timeS = 0.6;
    oom.device = "cuda:0";
    oom.requestedBytes = 1u << 30;
    oom.source = "torch";
    oom.site = "grow (/w/oom.py:16)";
    oom.stack = {"grow (/w/oom.py:16)", "<module> (/w/oom.py:20)"};
    oom.frames = {2, 0};  // ids into traceWithFrames()'s table, whatever their text
    oom.siteFrame = 2;
    oom.file = "/w/oom.py";
    oom.line = 16;
    oom.function = "grow";
    oom.heldOn = "cuda:0.active";
    oom.liveBytes = 3000;
    oom.deviceFreeBytes = 512;
    oom.deviceTotalBytes = 4096;
    oom.bySite = {{"grow (/w/oom.py:16)", 2000, 2}, {"(1 other site)", 1000, std::nullopt}};
    oom.byLine = {{"/w/oom.py", 16, "grow", 3000}};
    t.processes[0].oom.push_back(oom);
    t.processes[0].oomCount = 3;
    json j = reporters::traceToJson(t);
    const json& p = j.at("processes").at(0);
    EXPECT_EQ(p.at("timeline"), json::parse(R"json({"cuda:0.active": {"bucket_s": 2.048e-06,
        "points": [[0.25, 100], [0.5, 3000000], [0.75, 0]]}})json"));
    EXPECT_EQ(p.at("oom"), json::parse(R"json([{"time_s": 0.6, "device": "cuda:0",
        "requested_bytes": 1073741824, "source": "torch", "site": "grow (/w/oom.py:16)",
        "stack": ["grow (/w/oom.py:16)", "<module> (/w/oom.py:20)"], "frames": [2, 0],
        "site_frame": 2, "file": "/w/oom.py",
        "line": 16, "function": "grow", "held_on": "cuda:0.active", "live_bytes": 3000,
        "device_free_bytes": 512, "device_total_bytes": 4096,
        "by_site": [{"site": "grow (/w/oom.py:16)", "site_frame": 2, "bytes": 2000},
                    {"site": "(1 other site)", "site_frame": null, "bytes": 1000}],
        "by_line": [{"file": "/w/oom.py", "line": 16, "function": "grow", "bytes": 3000}]}])json"));
    EXPECT_EQ(p.at("oom_count"), 3);
    const core::ProcessTrace back = reporters::traceFromJson(j, "t.json").processes.at(0);
    ASSERT_EQ(back.timeline.size(), 1u);
    const core::TimelineSeries& s = back.timeline.at("cuda:0.active");
    EXPECT_EQ(s.bucketS, 2048e-9);
    ASSERT_EQ(s.points.size(), 3u);
    EXPECT_EQ(s.points[1].timeS, 0.5);
    EXPECT_EQ(s.points[1].bytes, 3000000u);
    ASSERT_EQ(back.oom.size(), 1u);
    EXPECT_EQ(back.oomCount, 3u);
    EXPECT_EQ(back.oom[0].frames, (std::vector<uint32_t>{2, 0}));
    EXPECT_EQ(back.oom[0].siteFrame, 2u);
    EXPECT_EQ(back.oom[0].bySite[0].siteFrame, 2u);
    EXPECT_EQ(back.oom[0].bySite[1].siteFrame, std::nullopt);
    EXPECT_EQ(reporters::traceToJson(reporters::traceFromJson(j, "t.json")), j);
    // A trace from before the capture of stacks: three fields, still read.
    json old = j;
    old["processes"][0]["oom"] = json::parse(R"json([{"time_s": 0.6, "device": "cuda:0",
        "requested_bytes": 1073741824}])json");
    old["processes"][0].erase("oom_count");
    const core::ProcessTrace oldBack = reporters::traceFromJson(old, "t.json").processes.at(0);
    ASSERT_EQ(oldBack.oom.size(), 1u);
    EXPECT_EQ(oldBack.oom[0].device, "cuda:0");
    EXPECT_EQ(oldBack.oom[0].requestedBytes, 1u << 30);
    EXPECT_EQ(oldBack.oom[0].liveBytes, 0u);
    EXPECT_EQ(oldBack.oomCount, 1u);
    // A trace from before the timeline has none, and no OOM events.
    EXPECT_TRUE(read(process(json::array())).processes.at(0).timeline.empty());
    EXPECT_TRUE(read(process(json::array())).processes.at(0).oom.empty());
}

// An out-of-memory event from before trace.json kept its frames: its stack, its
// site and the sites that held memory are read from their text into the
// process's table, as old hotspots are; the rest's row and "(no stack)" name no
// frame. A frame id past the table is bad input.
TEST(TraceJson, OldOomEventsGetFramesFromTheirText) {
    json p = process(json::array());
    p["oom"] = json::parse(R"json([{"time_s": 0.5, "device": "cpu", "requested_bytes": 64,
        "source": "allocator", "site": "grow (/w/oom.py:16)",
        "stack": ["at::empty(long) (/usr/lib/libtorch_cpu.so)", "grow (/w/oom.py:16)"],
        "file": "/w/oom.py", "line": 16, "function": "grow", "held_on": "cpu",
        "live_bytes": 30, "device_free_bytes": 0, "device_total_bytes": 0,
        "by_site": [{"site": "at::empty(long) (/usr/lib/libtorch_cpu.so)", "bytes": 10},
                    {"site": "grow (/w/oom.py:16)", "bytes": 9},
                    {"site": "(no stack)", "bytes": 8},
                    {"site": "(3 other sites)", "bytes": 3}],
        "by_line": []}])json");
    const core::ProcessTrace back = read(p).processes.at(0);
    ASSERT_EQ(back.frames.size(), 2u);
    EXPECT_EQ(back.frames[0], nativeFrame("at::empty(long)", "/usr/lib/libtorch_cpu.so"));
    EXPECT_EQ(back.frames[1], pythonFrame("grow", "/w/oom.py", 16, true));
    const core::OomEvent& e = back.oom.at(0);
    EXPECT_EQ(e.frames, (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(e.siteFrame, 1u);
    ASSERT_EQ(e.bySite.size(), 4u);
    EXPECT_EQ(e.bySite[0].siteFrame, 0u);
    EXPECT_EQ(e.bySite[1].siteFrame, 1u);
    EXPECT_EQ(e.bySite[2].siteFrame, std::nullopt);
    EXPECT_EQ(e.bySite[3].siteFrame, std::nullopt);
    EXPECT_EQ(e.bySite[3].site, "(3 other sites)");

    json bad = reporters::traceToJson(read(p));
    bad["processes"][0]["oom"][0]["by_site"][0]["site_frame"] = 2;
    try {
        reporters::traceFromJson(bad, "t.json");
        FAIL() << "a frame id past the table was read";
    } catch (const core::Error& error) {
        EXPECT_EQ(error.exitCode(), core::kExitBadInput);
        EXPECT_STREQ(error.what(),
                     "t.json: malformed trace: frame id 2 is not in the frames table (2 frames)");
    }
}

TEST(TraceJson, OldFrameTextOfAnyLengthIsReadWithoutRecursion) {
    // std::regex recursed per character: a frame text of a few hundred kilobytes
    // overflowed the stack (SIGSEGV).
    const std::string file = "/src/" + std::string(300000, 'a') + ".py";
    core::Trace t = read(process({hotspot("f (" + file + ":12)", {"f (" + file + ":12)"}),
                                  hotspot("g (m.so:99999999999999999999)", json::array()),
                                  hotspot("?? (m.so+0x10000000000000000)", json::array()),
                                  hotspot("?? (m.so+0xfA)", json::array())}));
    const core::ProcessTrace& p = t.processes.at(0);
    ASSERT_EQ(p.frames.size(), 4u);
    EXPECT_EQ(p.frames[0], pythonFrame("f", file, 12, true));
    // Numbers past 64 bits, or not in the form memtool wrote, are part of the name.
    EXPECT_EQ(p.frames[1], nativeFrame("g", "m.so:99999999999999999999"));
    EXPECT_EQ(p.frames[2], nativeFrame("", "m.so+0x10000000000000000"));
    EXPECT_EQ(p.frames[3], nativeFrame("", "m.so+0xfA"));
}

TEST(TraceJson, MalformedFieldsAreBadInput) {
    json good = process(json::array({hotspot("f (/a.py:1)", {"f (/a.py:1)"})}));
    good["hotspots"][0]["frames"] = json::array({0});
    good["hotspots"][0]["site_frame"] = 0;
    // json::array: `json j = {x}` with x a json is a copy of x to clang (CWG 2137), an
    // array of it to gcc.
    good["frames"] = json::array(
        {{{"kind", "python"}, {"function", "f"}, {"file", "/a.py"}, {"line", 1}, {"user", true}}});
    ASSERT_NO_THROW(read(good));

    struct Case {
        const char* what;
        std::function<void(json&)> spoil;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"negative count", [](json& p) { p["hotspots"][0]["count"] = -1; },
         "t.json: malformed trace: \"count\" is -1, not a whole number >= 0"},
        {"fractional bytes", [](json& p) { p["hotspots"][0]["allocated_bytes"] = 1.5; },
         "t.json: malformed trace: \"allocated_bytes\" is 1.5, not a whole number >= 0"},
        {"frame id past the table",
         [](json& p) {
             p["hotspots"][0]["frames"] = {0, 1};
         },
         "t.json: malformed trace: frame id 1 is not in the frames table (1 frames)"},
        {"negative site frame", [](json& p) { p["hotspots"][0]["site_frame"] = -2; },
         "t.json: malformed trace: a frame id is -2, not a whole number >= 0"},
        {"unknown frame kind", [](json& p) { p["frames"][0]["kind"] = "java"; },
         "t.json: malformed trace: unknown frame kind 'java'"},
        {"exit code out of range", [](json& p) { p["exit_code"] = 1e12; },
         "t.json: malformed trace: \"exit_code\" is 1000000000000.0, not an integer or null"},
        {"timeline point not a pair",
         [](json& p) {
             p["timeline"] = {
                 {"cpu", {{"bucket_s", 1e-6}, {"points", json::array({{0.5, 1, 2}})}}}};
         },
         "t.json: malformed trace: a timeline point is [0.5,1,2], not [time_s, bytes]"},
        {"timeline going back in time",
         [](json& p) {
             p["timeline"] = {{"cpu", {{"bucket_s", 1e-6}, {"points", {{0.5, 1}, {0.25, 2}}}}}};
         },
         "t.json: malformed trace: timeline points go back in time"},
        {"start not a time", [](json& p) { p["start_unix_s"] = 1e308; },
         "t.json: malformed trace: start_unix_s is not a time (Unix seconds)"},
        {"negative timeline bytes",
         [](json& p) {
             p["timeline"] = {{"cpu", {{"bucket_s", 1e-6}, {"points", json::array({{0.5, -1}})}}}};
         },
         "t.json: malformed trace: a timeline point's bytes is -1, not a whole number >= 0"},
        {"graph pool number 0",
         [](json& p) {
             p["graph_pools"] = {{{"device", "cuda:0"},
                                  {"number", 0},
                                  {"id", {1, 0}},
                                  {"reserved_peak_bytes", 1},
                                  {"active_peak_bytes", 1},
                                  {"reserved_end_bytes", 0},
                                  {"active_end_bytes", 0}}};
         },
         "t.json: malformed trace: a graph pool's \"number\" is 0, not 1 to 8191"},
        {"graph pool id not a pair",
         [](json& p) {
             p["graph_pools"] = {{{"device", "cuda:0"},
                                  {"number", 1},
                                  {"id", {1, -1}},
                                  {"reserved_peak_bytes", 1},
                                  {"active_peak_bytes", 1},
                                  {"reserved_end_bytes", 0},
                                  {"active_end_bytes", 0}}};
         },
         "t.json: malformed trace: a graph pool's \"id\" is [1,-1], not two unsigned integers"},
    };
    for (const Case& c : cases) {
        json p = good;
        c.spoil(p);
        try {
            read(p);
            ADD_FAILURE() << c.what << ": accepted";
        } catch (const core::Error& e) {
            EXPECT_EQ(e.exitCode(), core::kExitBadInput) << c.what;
            EXPECT_EQ(std::string(e.what()), c.message) << c.what;
        }
    }
    // A missing site_frame or a frame without its kind: nlohmann's own words, exit 2 all the same.
    for (auto spoil : std::vector<std::function<void(json&)>>{
             [](json& p) { p["hotspots"][0].erase("site_frame"); },
             [](json& p) { p["frames"][0].erase("kind"); },
             [](json& p) { p["frames"][0]["line"] = "one"; }}) {
        json p = good;
        spoil(p);
        try {
            read(p);
            ADD_FAILURE() << p.dump() << ": accepted";
        } catch (const core::Error& e) {
            EXPECT_EQ(e.exitCode(), core::kExitBadInput);
            EXPECT_EQ(std::string(e.what()).rfind("t.json: malformed trace: ", 0), 0u) << e.what();
        }
    }
}

TEST(TraceJson, CpuTimesAreWrittenWhenKnownAndReadBack) {
    core::Trace t = traceWithFrames();
    json unknown = reporters::traceToJson(t);
    EXPECT_FALSE(unknown.contains("cli_cpu_s"));  // traces of older memtools have none
    EXPECT_FALSE(unknown.at("processes").at(0).contains("cpu_s"));
    core::Trace back = reporters::traceFromJson(unknown, "t.json");
    EXPECT_FALSE(back.cliCpuS);
    EXPECT_FALSE(back.processes.at(0).cpuS);

    t.cliCpuS = 0.25;
    t.processes[0].cpuS = 5.5;
    json known = reporters::traceToJson(t);
    EXPECT_EQ(known.at("cli_cpu_s"), 0.25);
    EXPECT_EQ(known.at("processes").at(0).at("cpu_s"), 5.5);
    back = reporters::traceFromJson(known, "t.json");
    EXPECT_EQ(back.cliCpuS, 0.25);
    EXPECT_EQ(back.processes.at(0).cpuS, 5.5);
}
