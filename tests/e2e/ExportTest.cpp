// The exports other tools open, from a real run through the real CLI: folded
// stacks (flamegraph.pl, inferno, speedscope) and Chrome trace-event JSON
// (ui.perfetto.dev, chrome://tracing).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// storages.py under memtool, its trace written where the report can read it.
const std::string& storagesTrace() {
    static const std::string path = [] {
        Profiled p = profile({PYTHON_BIN, script("storages.py")});
        EXPECT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
        std::string trace = tempDir() + "/storages.json";
        std::ofstream(trace) << p.trace.dump();
        return trace;
    }();
    return path;
}

uint64_t sumOfFoldedLines(const std::string& text, size_t* lines) {
    std::istringstream in(text);
    uint64_t sum = 0;
    *lines = 0;
    for (std::string line; std::getline(in, line); ++*lines) {
        EXPECT_EQ(line.rfind("cpu;", 0), 0u) << line;
        sum += std::stoull(line.substr(line.rfind(' ') + 1));
    }
    return sum;
}

}  // namespace

TEST(Export, FoldedStacksOfARealRunAddUpUnderEveryMetric) {
    // a (3,000,000 B) and c (2,000,000 B) are live at the peak; b (1,000,000 B) was
    // freed before it; a and c are globals still held when the interpreter begins
    // to finalize (held at exit, not leaked; its teardown frees them then).
    for (auto [metric, total, stacks] :
         std::vector<std::tuple<std::string, uint64_t, size_t>>{{"peak", 5000000, 2},
                                                                {"allocated", 6000000, 3},
                                                                {"leaked", 0, 0},
                                                                {"held-at-exit", 5000000, 2}}) {
        Outcome o = run(
            {MEMTOOL_BIN, "report", storagesTrace(), "--format", "collapsed", "--metric", metric});
        ASSERT_EQ(o.exitCode, 0) << o.err;
        size_t lines = 0;
        EXPECT_EQ(sumOfFoldedLines(o.out, &lines), total) << metric << "\n" << o.out;
        EXPECT_EQ(lines, stacks) << metric;
    }
    Outcome peak = run({MEMTOOL_BIN, "report", storagesTrace(), "--format", "collapsed"});
    EXPECT_NE(peak.out.find(";<module> (" + script("storages.py") + ":15);"), std::string::npos)
        << peak.out;
}

TEST(Export, MetricIsForFoldedStacksOnly) {
    Outcome wrong = run({MEMTOOL_BIN, "report", storagesTrace(), "--metric", "allocated"});
    EXPECT_EQ(wrong.exitCode, 2);
    EXPECT_EQ(wrong.err, "memtool: --metric goes with --format collapsed\n");
    Outcome unknown =
        run({MEMTOOL_BIN, "report", storagesTrace(), "--format", "collapsed", "--metric", "count"});
    EXPECT_EQ(unknown.exitCode, 2);
}

TEST(Export, PerfettoJsonOfARealRun) {
    const std::string out = tempDir() + "/trace.perfetto.json";
    Outcome o = run({MEMTOOL_BIN, "report", storagesTrace(), "--format", "perfetto", "-o", out});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "");
    const nlohmann::json j = readJson(out);  // parses as JSON
    const nlohmann::json trace = readJson(storagesTrace());
    const auto& cpu = trace.at("processes").at(0).at("devices").at("cpu");
    std::set<std::string> counters;
    uint64_t highest = 0;
    double highestAt = -1;
    for (const auto& e : j.at("traceEvents")) {
        if (e.at("ph") != "C") continue;
        counters.insert(e.at("name"));
        if (e.at("args").at("bytes") > highest) {
            highest = e.at("args").at("bytes");
            highestAt = e.at("ts");
        }
    }
    EXPECT_EQ(counters, std::set<std::string>{"cpu"});
    EXPECT_EQ(highest, cpu.at("peak_bytes").get<uint64_t>());
    // Microseconds, to the nanosecond (the peak's time in seconds, rounded there).
    EXPECT_EQ(highestAt, std::round(cpu.at("peak_time_s").get<double>() * 1e9) / 1e3);
}
