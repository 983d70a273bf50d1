// Chrome trace-event JSON: a counter per device and pool from the timeline, the
// peaks, and the control and OOM events as instants, per process.
#include <gtest/gtest.h>

#include "reporters/PerfettoReporter.h"

using namespace memtool;
using nlohmann::json;

namespace {

core::Trace perfettoTrace() {
    core::ProcessTrace p;
    p.pid = 42;
    p.command = {"python3", "t.py"};
    p.devices["cpu"].peakBytes = 300;
    p.devices["cpu"].peakTimeS = 0.25;
    p.devices["cpu"].allocCount = 2;
    p.devices["cuda:0"].pools["active"].peakBytes = 64;
    p.devices["cuda:0"].pools["active"].peakTimeS = 0.5;
    p.devices["cuda:0"].pools["active"].allocCount = 1;
    p.timeline["cpu"] = core::TimelineSeries{1e-6, {{0.125, 100}, {0.25, 300}, {0.75, 0}}};
    p.timeline["cuda:0.active"] = core::TimelineSeries{1e-6, {{0.5, 64}}};
    core::ControlEvent pause;
    pause.timeS = 0.375;
    pause.action = "pause";
    pause.origin = "ctl";
    pause.tag = "kv";
    pause.device = "cpu";
    pause.bytes = 4096;
    p.control.push_back(pause);
    core::OomEvent oom;
    oom.timeS = 0.625;
    oom.device = "cuda:0";
    oom.requestedBytes = 1 << 20;
    p.oom.push_back(oom);
    core::Trace t;
    t.processes.push_back(p);
    return t;
}

std::vector<json> eventsOf(const json& j, const std::string& phase) {
    std::vector<json> out;
    for (const json& e : j.at("traceEvents"))
        if (e.at("ph") == phase) out.push_back(e);
    return out;
}

}  // namespace

TEST(Perfetto, ACounterPerDeviceAndPoolFromZero) {
    const json j = json::parse(reporters::renderPerfetto(perfettoTrace()).dump());
    const auto counters = eventsOf(j, "C");
    ASSERT_EQ(counters.size(), 6u);  // each series starts at 0 bytes at 0 s
    std::vector<std::tuple<std::string, double, uint64_t>> got;
    for (const json& c : counters) {
        EXPECT_EQ(c.at("pid"), 42);
        got.emplace_back(c.at("name"), c.at("ts"), c.at("args").at("bytes"));
    }
    EXPECT_EQ(got, (std::vector<std::tuple<std::string, double, uint64_t>>{
                       {"cpu", 0, 0},
                       {"cpu", 125000, 100},
                       {"cpu", 250000, 300},
                       {"cpu", 750000, 0},
                       {"cuda:0.active", 0, 0},
                       {"cuda:0.active", 500000, 64}}));
    const auto names = eventsOf(j, "M");
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].at("args").at("name"), "python3 t.py");
    // A command with code on several lines is named on one, as the reports show it.
    core::Trace code = perfettoTrace();
    code.processes[0].command = {"python3", "-c", "import torch\nx = 1"};
    EXPECT_EQ(eventsOf(reporters::renderPerfetto(code), "M")[0].at("args").at("name"),
              "python3 -c $'import torch\\nx = 1'");
}

TEST(Perfetto, PeaksControlAndOomAreInstantsOfTheProcess) {
    const json j = reporters::renderPerfetto(perfettoTrace());
    const auto instants = eventsOf(j, "i");
    ASSERT_EQ(instants.size(), 4u);
    std::vector<std::pair<std::string, double>> got;
    for (const json& i : instants) {
        EXPECT_EQ(i.at("s"), "p");
        got.emplace_back(i.at("name"), i.at("ts"));
    }
    EXPECT_EQ(got,
              (std::vector<std::pair<std::string, double>>{{"cpu peak 300 B", 250000},
                                                           {"cuda:0.active peak 64 B", 500000},
                                                           {"pause kv (ctl) 4.00 KiB", 375000},
                                                           {"OOM 1.00 MiB requested", 625000}}));
    EXPECT_EQ(instants[2].at("args"),
              json({{"kind", "pause"}, {"device", "cpu"}, {"bytes", 4096}, {"ok", true}}));
    EXPECT_EQ(instants[3].at("args"),
              json({{"kind", "oom"}, {"device", "cuda:0"}, {"requested_bytes", 1 << 20}}));
}

// Times are written to the nanosecond, without the float noise of seconds * 1e6.
TEST(Perfetto, TimesAreMicrosecondsToTheNanosecond) {
    core::Trace t = perfettoTrace();
    t.processes[0].timeline["cpu"] = core::TimelineSeries{1e-9, {{0.4900329, 100}}};
    const std::string text = reporters::renderPerfetto(t).dump();
    EXPECT_NE(text.find("\"ts\":490032.9"), std::string::npos) << text;
    EXPECT_EQ(text.find("490032.89999"), std::string::npos) << text;
}
