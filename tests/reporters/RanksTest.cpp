// Every rank of a job in one view: the rank holding most, the spread between the
// ranks, each host's combined peak swept over the timelines on one clock; the
// same figures in the table, JSON, Perfetto and check, and from several traces.
#include <gtest/gtest.h>

#include <sstream>

#include "core/Error.h"
#include "reporters/Check.h"
#include "reporters/JsonReporter.h"
#include "reporters/PerfettoReporter.h"
#include "reporters/RankSummary.h"
#include "reporters/TableReporter.h"
#include "trace/TraceMerge.h"

using namespace memtool;
using nlohmann::json;

namespace {

// A rank (or the launcher: no rank) that held `peak` bytes on the CPU from `from`
// to `to` seconds into its own clock, which began at `startUnixS`.
core::ProcessTrace rankProcess(int64_t pid, std::optional<int64_t> rank, double startUnixS,
                               uint64_t peak, double from, double to, double durationS) {
    core::ProcessTrace p;
    p.pid = pid;
    p.ppid = 20;
    p.rank = rank;
    p.host = "node1";
    p.startUnixS = startUnixS;
    p.command = {"python3", "train.py"};
    p.exitCode = 0;
    p.complete = true;
    p.durationS = durationS;
    core::DeviceTotals& cpu = p.devices["cpu"];
    cpu.peakBytes = peak;
    cpu.peakTimeS = from;
    cpu.allocCount = 1;
    cpu.freeCount = 1;
    p.timeline["cpu"] = core::TimelineSeries{1e-6, {{from, peak}, {to, 0}}};
    return p;
}

// The job: a launcher and two ranks of 4,000,000 and 7,000,000 B, the
// second started 0.1 s after the first; both hold theirs over 0.4-1.0 s.
core::Trace job() {
    core::Trace t;
    t.processes = {rankProcess(20, std::nullopt, 1000.0, 1000, 0.01, 1.4, 1.5),
                   rankProcess(21, 0, 1000.0, 4'000'000, 0.2, 1.0, 1.2),
                   rankProcess(22, 1, 1000.1, 7'000'000, 0.3, 0.9, 1.0)};
    return t;
}

std::string table(const core::Trace& t) {
    reporters::ReportOptions o;
    o.bytes = core::ByteUnits::Exact;
    std::ostringstream out;
    reporters::renderTable(t, o, out);
    return out.str();
}

}  // namespace

TEST(Ranks, TheRankHoldingMostTheSpreadAndTheHostsCombinedPeak) {
    const core::Trace t = job();
    const reporters::RankSummary s = reporters::summarizeRanks(t);
    EXPECT_EQ(s.ranks, 2u);
    EXPECT_EQ(s.hosts, 1u);
    ASSERT_EQ(s.spreads.size(), 1u);  // no rank used CUDA
    const reporters::RankSpread& cpu = s.spreads[0];
    EXPECT_EQ(cpu.kind, "cpu");
    EXPECT_EQ(cpu.largest.rank, 1);
    EXPECT_EQ(cpu.largest.peakBytes, 7'000'000u);
    EXPECT_EQ(cpu.smallest.rank, 0);
    EXPECT_EQ(cpu.smallest.peakBytes, 4'000'000u);
    EXPECT_EQ(*cpu.spread, 1.75);
    ASSERT_EQ(s.hostPeaks.size(), 1u);
    const reporters::HostPeak& host = s.hostPeaks[0];
    EXPECT_EQ(host.host, "node1");
    EXPECT_EQ(host.device, "cpu");
    // Rank 1's 7,000,000 B came at 0.1 + 0.3 s, when rank 0 and the launcher held theirs.
    EXPECT_EQ(host.combinedBytes, 11'001'000u);
    EXPECT_NEAR(host.timeS, 0.4, 1e-9);
    EXPECT_EQ(host.sumOfPeaks, 11'001'000u);
    EXPECT_EQ(host.processes, (std::vector<size_t>{0, 1, 2}));
    // What Perfetto and the spread check ask for: the same but the hosts' sweep.
    const reporters::RankSummary lean =
        reporters::summarizeRanks(t, reporters::RankFigures::WithoutHostPeaks);
    EXPECT_TRUE(lean.hostPeaks.empty());
    EXPECT_EQ(lean.zeroUnixS, s.zeroUnixS);
    ASSERT_EQ(lean.spreads.size(), 1u);
    EXPECT_EQ(*lean.spreads[0].spread, 1.75);
    EXPECT_EQ(lean.hosts, 1u);
}

// Peaks that never meet: the combined peak is the larger one's and the launcher's,
// not the sum of the peaks.
TEST(Ranks, TheCombinedPeakIsWhatWasHeldAtOnceNotTheSumOfPeaks) {
    core::Trace t = job();
    t.processes[2].startUnixS = 1001.0;  // rank 1 begins after rank 0 freed its memory
    const reporters::RankSummary s = reporters::summarizeRanks(t);
    ASSERT_EQ(s.hostPeaks.size(), 1u);
    EXPECT_EQ(s.hostPeaks[0].combinedBytes, 7'001'000u);
    EXPECT_NEAR(s.hostPeaks[0].timeS, 1.3, 1e-9);
    EXPECT_EQ(s.hostPeaks[0].sumOfPeaks, 11'001'000u);
    // A process holds nothing after its end: the launcher's 1,000 B end at 1.5 s.
    t.processes[2].startUnixS = 1002.0;
    EXPECT_EQ(reporters::summarizeRanks(t).hostPeaks[0].combinedBytes, 7'000'000u);
}

TEST(Ranks, TheTableOpensWithEveryProcessOnOneClockAndTheRanksFigures) {
    const std::string text = table(job());
    const std::string list = text.substr(0, text.find("\nCommand:"));
    EXPECT_NE(list.find("3 processes, 2 ranks · peak times in seconds from the first start\n"),
              std::string::npos)
        << list;
    // Rank 1's peak, 0.3 s into its own clock, stands at 0.4 s on the shared one.
    EXPECT_NE(list.find("      22     1  cpu 7,000,000 B @0.400s"), std::string::npos) << list;
    EXPECT_NE(list.find("Largest:  cpu: rank 1 holds most, 7,000,000 B on cpu (pid 22); least "
                        "rank 0, 4,000,000 B; spread 1.75x\n"),
              std::string::npos)
        << list;
    EXPECT_NE(list.find("Host:     node1 cpu: 3 processes held 11,001,000 B at once, 0.400 s in "
                        "(their peaks sum to 11,001,000 B)\n"),
              std::string::npos)
        << list;
}

TEST(Ranks, JsonCarriesTheSameFigures) {
    const json j = reporters::renderJson(job(), reporters::ReportOptions{}, nullptr);
    const json& r = j.at("ranks");
    EXPECT_EQ(r.at("clock_zero_unix_s"), 1000.0);
    EXPECT_EQ(r.at("ranks"), 2);
    EXPECT_EQ(r.at("spread").at("cpu").at("largest"), json({{"rank", 1},
                                                            {"pid", 22},
                                                            {"host", "node1"},
                                                            {"device", "cpu"},
                                                            {"peak_bytes", 7'000'000}}));
    EXPECT_EQ(r.at("spread").at("cpu").at("smallest").at("rank"), 0);
    EXPECT_EQ(r.at("spread").at("cpu").at("spread"), 1.75);
    ASSERT_EQ(r.at("hosts").size(), 1u);
    EXPECT_EQ(r.at("hosts")[0].at("combined_peak_bytes"), 11'001'000);
    EXPECT_EQ(r.at("hosts")[0].at("pids"), json({20, 21, 22}));
    EXPECT_NEAR(r.at("processes")[2].at("devices").at("cpu").at("peak_time_s").get<double>(), 0.4,
                1e-9);
    // One process: no ranks to set side by side.
    core::Trace one = job();
    one.processes.resize(1);
    EXPECT_FALSE(reporters::renderJson(one, reporters::ReportOptions{}, nullptr).contains("ranks"));
}

// Perfetto and Holistic Trace Analysis list processes by name: ranks are named so,
// ordered by rank, their counters on the shared clock.
TEST(Ranks, PerfettoNamesRanksAndPutsThemOnOneClock) {
    const json j = reporters::renderPerfetto(job());
    std::map<int64_t, std::string> names;
    std::map<int64_t, int64_t> order;
    std::map<int64_t, double> firstCounter;
    for (const json& e : j.at("traceEvents")) {
        const int64_t pid = e.at("pid");
        if (e.at("name") == "process_name") names[pid] = e.at("args").at("name");
        if (e.at("name") == "process_sort_index") order[pid] = e.at("args").at("sort_index");
        if (e.at("ph") == "C" && !firstCounter.count(pid)) firstCounter[pid] = e.at("ts");
    }
    EXPECT_EQ(names[22], "rank 1 · python3 train.py");
    EXPECT_EQ(names[20], "python3 train.py");
    EXPECT_EQ(order[21], 0);
    EXPECT_EQ(order[22], 1);
    // Rank 1's counter starts at its own zero, 0.1 s after rank 0's.
    EXPECT_EQ(firstCounter[21], 0);
    EXPECT_EQ(firstCounter[22], 100000);
    // Several hosts: the host is in the name too.
    core::Trace two = job();
    two.processes[2].host = "node2";
    const json twoHosts = reporters::renderPerfetto(two);  // kept: .at() of a temporary dangles
    for (const json& e : twoHosts.at("traceEvents"))
        if (e.at("name") == "process_name" && e.at("pid") == 22) {
            EXPECT_EQ(e.at("args").at("name"), "rank 1 on node2 · python3 train.py");
        }
}

TEST(Ranks, CheckLimitsTheSpreadBetweenRanks) {
    reporters::CheckOptions o;
    o.maxRankSpread = reporters::parseRankSpread("75%");
    std::vector<reporters::CheckResult> results = reporters::runChecks(job(), o);
    const auto spread = [](const std::vector<reporters::CheckResult>& rs) {
        for (const auto& r : rs)
            if (r.kind == "rank-spread") return r;
        return reporters::CheckResult{};
    };
    reporters::CheckResult r = spread(results);
    // 4,000,000 B x 1.75 allows rank 1's 7,000,000 B exactly.
    EXPECT_TRUE(r.passed) << r.message;
    EXPECT_EQ(r.value, 7'000'000u);
    EXPECT_EQ(r.limit, 7'000'000u);
    EXPECT_EQ(*r.rank, 1);
    EXPECT_EQ(*r.leastRank, 0);
    o.maxRankSpread = reporters::parseRankSpread("50%");
    r = spread(reporters::runChecks(job(), o));
    EXPECT_FALSE(r.passed);
    EXPECT_EQ(r.limit, 6'000'000u);
    EXPECT_EQ(r.message,
              "cpu rank spread: rank 1 holds 6.68 MiB (7000000 bytes), rank 0 3.81 MiB (4000000 "
              "bytes): 1.75x (+75.00%) exceeds 50%");
    std::ostringstream out;
    reporters::renderCheckJson({r}, out);
    const json c = json::parse(out.str()).at("checks")[0];
    EXPECT_EQ(c.at("rank"), 1);
    EXPECT_EQ(c.at("least_rank"), 0);
    // No ranks to compare is no pass.
    core::Trace none = job();
    for (auto& p : none.processes) p.rank.reset();
    r = spread(reporters::runChecks(none, o));
    EXPECT_FALSE(r.passed);
    EXPECT_NE(r.message.find("no process checked has a rank"), std::string::npos) << r.message;
    EXPECT_THROW(reporters::parseRankSpread("64MiB"), core::Error);
}

// A trace per node (or per rank): read as one, by host and rank; the same process
// twice is an error, not a doubled peak.
TEST(Ranks, TracesFromSeveralFilesMergeByHostAndRank) {
    core::Trace a = job(), b;
    a.processes.erase(a.processes.begin() + 1);  // node1: the launcher and rank 1
    b.processes = {job().processes[1]};          // node2: rank 0
    b.processes[0].host = "node2";
    b.eventsFile = "b.events";
    const core::Trace merged = reporters::mergeTraces({a, b}, {"a.json", "b.json"});
    ASSERT_EQ(merged.processes.size(), 3u);
    EXPECT_EQ(merged.processes[0].pid, 22);  // node1's rank 1, then its launcher
    EXPECT_EQ(merged.processes[1].pid, 20);
    EXPECT_EQ(merged.processes[2].pid, 21);  // node2's rank 0
    EXPECT_TRUE(merged.eventsFile.empty());  // an event log stays with its own trace
    const reporters::RankSummary s = reporters::summarizeRanks(merged);
    EXPECT_EQ(s.hosts, 2u);
    EXPECT_EQ(s.spreads.at(0).largest.rank, 1);
    EXPECT_EQ(*s.spreads.at(0).spread, 1.75);
    // Per host: node1's two processes; node2's one shares its host with no other.
    ASSERT_EQ(s.hostPeaks.size(), 1u);
    EXPECT_EQ(s.hostPeaks[0].host, "node1");
    EXPECT_EQ(s.hostPeaks[0].combinedBytes, 7'001'000u);
    EXPECT_NE(table(merged).find("3 processes, 2 ranks on 2 hosts"), std::string::npos);
    try {
        reporters::mergeTraces({a, a}, {"a.json", "again.json"});
        FAIL() << "no error";
    } catch (const core::Error& e) {
        EXPECT_EQ(e.exitCode(), core::kExitBadInput);
        EXPECT_STREQ(e.what(),
                     "a.json and again.json hold the same process (pid 20 on node1): give each "
                     "trace once");
    }
}
