// memtool run --events through the real CLI: the log beside the trace, the
// events before an out-of-memory error, what was live at a moment, and the log
// as PyTorch's memory snapshot read by torch's own torch.cuda._memory_viz.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

struct Logged {
    Outcome outcome;
    std::string trace;  // its path
    nlohmann::json json;
};

Logged runWithEvents(const std::string& scriptName, const std::string& events) {
    Logged l;
    l.trace = tempDir() + "/t.json";
    l.outcome = run({MEMTOOL_BIN, "run", "-q", "--events", events, "-o", l.trace, "--", pythonBin(),
                     script(scriptName)});
    l.json = readJson(l.trace);
    return l;
}

// Seconds as --at takes them, to the nanosecond.
std::string fmtSeconds(double s) {
    char text[64];
    std::snprintf(text, sizeof text, "%.9f", s);
    return text;
}

Outcome report(const std::vector<std::string>& words) {
    std::vector<std::string> argv{MEMTOOL_BIN, "report"};
    argv.insert(argv.end(), words.begin(), words.end());
    return run(argv);
}

}  // namespace

TEST(Events, TheLogIsBesideTheTraceAndCountsEveryEvent) {
    const Logged l = runWithEvents("events_known.py", "all");
    ASSERT_EQ(l.outcome.exitCode, 0) << l.outcome.err;
    EXPECT_EQ(l.json["events_file"], "t.events.zst");
    const nlohmann::json& p = l.json["processes"][0];
    const nlohmann::json& cpu = p["devices"]["cpu"];
    // Every allocation and free the trace counts is an event of the log.
    EXPECT_EQ(p["events"]["seen"],
              cpu["alloc_count"].get<uint64_t>() + cpu["free_count"].get<uint64_t>());
    EXPECT_EQ(p["events"]["kept"], p["events"]["seen"]);
    EXPECT_EQ(p["events"]["folded"], 0);
    EXPECT_EQ(p["events"]["mode"], "all");
    // Without a file to put it beside, --events is refused before the program runs.
    const Outcome refused =
        run({MEMTOOL_BIN, "run", "--events", "10", "-o", "-", "--", pythonBin(), "-c", "print(1)"});
    EXPECT_EQ(refused.exitCode, 2);
    EXPECT_EQ(refused.out, "");
    EXPECT_NE(refused.err.find("--events writes its log beside the trace file"), std::string::npos);
    EXPECT_EQ(run({MEMTOOL_BIN, "run", "--events", "0", "--", "true"}).exitCode, 2);
}

TEST(Events, TheReportListsTheThousandEventsBeforeAnOutOfMemoryError) {
    const Logged l = runWithEvents("oom_events.py", "1000");
    ASSERT_EQ(l.outcome.exitCode, 1) << l.outcome.err;  // the program dies of it, as it would
    const nlohmann::json& p = l.json["processes"][0];
    // The last 1,000 up to the refused request, then the (few) that followed it.
    EXPECT_GT(p["events"]["kept"].get<uint64_t>(), 1000u);
    EXPECT_GT(p["events"]["seen"].get<uint64_t>(), 1200u);  // 600 temporaries and their frees
    const Outcome json = report({l.trace, "--format", "json", "--events-before", "1000"});
    ASSERT_EQ(json.exitCode, 0) << json.err;
    const nlohmann::json before = nlohmann::json::parse(json.out)["events_before"][0];
    EXPECT_EQ(before["before"], "the out-of-memory error on cpu");
    const nlohmann::json& events = before["events"];
    ASSERT_EQ(events.size(), 1000u);
    EXPECT_EQ(events.back()["action"], "oom");
    EXPECT_EQ(events.back()["size"], 67108864);
    EXPECT_EQ(events.back()["site"], "grow (oom_events.py:15)");
    EXPECT_EQ(events[events.size() - 2]["action"], "alloc");
    EXPECT_EQ(events[events.size() - 2]["size"], 67108864);
    // The text report's table: its title, then 1,000 rows, the last the request.
    const Outcome text = report({l.trace, "--bytes", "exact", "--events-before", "1000"});
    ASSERT_EQ(text.exitCode, 0) << text.err;
    const size_t at = text.out.find("Events before the out-of-memory error on cpu");
    ASSERT_NE(at, std::string::npos) << text.out;
    std::istringstream rows(text.out.substr(at));
    std::string line, lastRow;
    int count = -2;  // the title and the header
    while (std::getline(rows, line) && !line.empty()) {
        ++count;
        lastRow = line;
    }
    EXPECT_EQ(count, 1000);
    EXPECT_NE(lastRow.find("oom     cpu"), std::string::npos) << lastRow;
    EXPECT_NE(lastRow.find("67,108,864 B"), std::string::npos) << lastRow;
    EXPECT_NE(lastRow.find("grow (oom_events.py:15)"), std::string::npos) << lastRow;
}

TEST(Events, WhatWasLiveAtAMomentComesFromTheLog) {
    const Logged l = runWithEvents("events_known.py", "all");
    ASSERT_EQ(l.outcome.exitCode, 0) << l.outcome.err;
    // The moment of the 70,000,000 B allocation (line 13, the peak), from the log's own events.
    const Outcome json = report({l.trace, "--format", "json", "--events-before", "100000"});
    ASSERT_EQ(json.exitCode, 0) << json.err;
    double at = -1;
    const nlohmann::json before = nlohmann::json::parse(json.out);
    for (const auto& e : before["events_before"][0]["events"])
        if (e["action"] == "alloc" && e["size"] == 70000000) at = e["time_s"].get<double>();
    ASSERT_GE(at, 0) << json.out;
    const Outcome live = report({l.trace, "--at", fmtSeconds(at), "--format", "json"});
    ASSERT_EQ(live.exitCode, 0) << live.err;
    std::map<std::string, uint64_t> mine;  // events_known.py's sites -> live bytes
    const nlohmann::json stacks = nlohmann::json::parse(live.out)["processes"][0]["stacks"];
    for (const auto& s : stacks)
        if (s["site"].get<std::string>().find("events_known.py") != std::string::npos)
            mine[s["site"]] = s["bytes"];
    const std::map<std::string, uint64_t> want{{"<module> (events_known.py:11)", 50000000},
                                               {"<module> (events_known.py:13)", 70000000}};
    EXPECT_EQ(mine, want);
    const Outcome text = report({l.trace, "--at", fmtSeconds(at), "--bytes", "exact"});
    EXPECT_NE(text.out.find("70,000,000 B         1  <module> (events_known.py:13)"),
              std::string::npos)
        << text.out;
}

TEST(Events, TheSnapshotIsReadByTorchsOwnMemoryViz) {
    const Logged l = runWithEvents("events_known.py", "all");
    ASSERT_EQ(l.outcome.exitCode, 0) << l.outcome.err;
    const std::string snap = tempDir() + "/snap.pickle";
    const Outcome exported = report({l.trace, "--format", "torch-snapshot", "-o", snap});
    ASSERT_EQ(exported.exitCode, 0) << exported.err;
    const Outcome read = run({pythonBin(), script("snapshot_check.py"), snap});
    ASSERT_EQ(read.exitCode, 0) << read.err;
    const nlohmann::json s = nlohmann::json::parse(read.out);
    ASSERT_EQ(s["devices"], nlohmann::json::array({"cpu"}));
    const nlohmann::json& cpuTrace = s["traces"][0];
    const nlohmann::json& cpu = l.json["processes"][0]["devices"]["cpu"];
    EXPECT_EQ(cpuTrace["allocs"], cpu["alloc_count"]);
    EXPECT_EQ(cpuTrace["alloc_bytes"], cpu["allocated_bytes"]);
    EXPECT_EQ(cpuTrace["frees"], cpu["free_count"]);
    EXPECT_EQ(cpuTrace["free_bytes"], cpu["freed_bytes"]);
    const nlohmann::json known = nlohmann::json::parse(R"([
      ["alloc", 30000000, 10], ["alloc", 50000000, 11], ["free_requested", 30000000, 10],
      ["free_completed", 30000000, 10], ["alloc", 70000000, 13], ["free_requested", 50000000, 11],
      ["free_completed", 50000000, 11], ["free_requested", 70000000, 13],
      ["free_completed", 70000000, 13]])");
    EXPECT_EQ(cpuTrace["known"], known);
    EXPECT_EQ(s["trace_plot"], true);
    EXPECT_EQ(s["segment_plot"], true);
    EXPECT_EQ(s["memory_lines"], s["blocks"]);  // a line per block of the segments live at the end
    EXPECT_EQ(s["trace_text"].get<std::string>().rfind("TOTAL MEM: ", 0), 0u) << s["trace_text"];
}

TEST(Events, ReportsThatNeedALogSaySoAndATraceCannotPointElsewhere) {
    const std::string dir = tempDir();
    const Outcome plain = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/plain.json", "--",
                               pythonBin(), script("events_known.py")});
    ASSERT_EQ(plain.exitCode, 0) << plain.err;
    const Outcome none =
        report({dir + "/plain.json", "--format", "torch-snapshot", "-o", dir + "/s"});
    EXPECT_EQ(none.exitCode, 2);
    EXPECT_NE(none.err.find("the trace has no event log (memtool run --events N|all)"),
              std::string::npos)
        << none.err;
    EXPECT_EQ(report({dir + "/plain.json", "--at", "1"}).exitCode, 2);
    nlohmann::json t = readJson(dir + "/plain.json");
    t["events_file"] = "../etc/passwd";
    std::ofstream(dir + "/hostile.json") << t.dump();
    const Outcome hostile = report({dir + "/hostile.json"});
    EXPECT_EQ(hostile.exitCode, 2);
    EXPECT_NE(hostile.err.find("is not a file name beside it"), std::string::npos) << hostile.err;
    t["events_file"] = "plain.json";  // a file that is no log
    std::ofstream(dir + "/other.json") << t.dump();
    const Outcome other = report({dir + "/other.json"});
    EXPECT_EQ(other.exitCode, 2);
    EXPECT_NE(other.err.find("is not an event log"), std::string::npos) << other.err;
}

TEST(Events, ATrackedBlockKeepsItsEventsToo) {
    const std::string trace = tempDir() + "/t.json";
    const Outcome o = run({PYTHON_BIN, script("track_events.py"), trace}, "", packageEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(lineStarting(o.out, "memtool.track: events"),
              "memtool.track: events is a number of events above 0 or 'all', not 0");
    EXPECT_EQ(readJson(trace)["events_file"], "t.events.zst");
    // The peak is the 3,000,000 B block's (line 14): the events up to it, the last its allocation.
    EXPECT_NE(o.out.find("3,000,000 B"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("<module> (track_events.py:14)"), std::string::npos) << o.out;
}
