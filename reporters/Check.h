#pragma once
// `memtool check`: memory limits and regression checks over trace.json, for CI.
// A check compares one figure of one device of one process with a limit; the
// whole run passes when every check holds. The processes checked are those that
// allocated memory memtool tracks (every one, each against the limit), or the
// ones --pid, --rank or --command name: a shell or launcher in front of the
// program is not what a limit is about, and a run that measured nothing passes
// nothing.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/Units.h"
#include "reporters/Metric.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// "cpu", "cuda" (every CUDA device), "cuda:0", "cuda:0.active", "cuda:0.reserved".
struct DeviceSelector {
    std::string device;  // "cpu", "cuda", "cuda:N"
    std::string pool;    // "", "active", "reserved", "graphs", "graphs_active"
    std::string text;    // as written
};

struct PeakLimit {
    DeviceSelector selector;
    uint64_t bytes = 0;
    // --max-leaked, --max-held-at-exit: this limit's own metric; unset: --metric's.
    std::optional<Metric> metric;
};

// Growth allowed over the baseline: a percentage of it, or a size.
struct Increase {
    bool percent = false;
    double value = 0;  // percent, or bytes
    std::string text;
};

struct CheckOptions {
    std::vector<PeakLimit> limits;
    std::optional<core::Trace> baseline;
    std::string baselinePath;
    std::optional<Increase> maxIncrease;
    // --max-rank-spread: how much more the rank holding most may hold than the one
    // holding least, per kind of device (cpu, cuda), in percent (75: 1.75x).
    std::optional<Increase> maxRankSpread;
    Metric metric = Metric::Peak;
    bool allowIncomplete = false;
    bool allowOom = false;  // an out-of-memory event in any process fails the check otherwise
    // Limits and baselines fail when no process checked allocated anything, unless this.
    bool allowEmpty = false;
    // The trace's processes were named (--pid, --rank: reporters/ProcessSelection):
    // each is checked, allocated or not.
    bool named = false;
    std::string command;  // only processes whose command line contains this
    // How sizes read in names and messages (--bytes); JSON's byte fields stay whole bytes.
    core::ByteUnits bytes = core::ByteUnits::Iec;
};

struct CheckResult {
    std::string name;    // e.g. "cpu peak <= 5.00 MiB"
    std::string device;  // as measured, e.g. "cuda:0.reserved"
    std::string kind;    // "limit", "baseline", "complete", "oom", "measured", "rank-spread"
    int64_t pid = 0;     // the process a limit or baseline check measured
    // Its rank (launcher's); a rank-spread check: the rank holding most, and least.
    std::optional<int64_t> rank, leastRank;
    uint64_t value = 0;
    uint64_t limit = 0;
    bool passed = true;
    std::string message;  // one line: measured, limit, excess
};

// Parsers for the command line; each throws core::Error (exit 2) naming the bad token.
Metric parseMetric(const std::string& text);
const char* metricName(Metric m);
DeviceSelector parseDeviceSelector(const std::string& text);
PeakLimit parsePeakLimit(const std::string& text);  // DEVICE=SIZE
Increase parseIncrease(const std::string& text);    // 10%, 2.5%, 64MiB, 1000
Increase parseRankSpread(const std::string& text);  // 50%, 0%

std::vector<CheckResult> runChecks(const core::Trace& trace, const CheckOptions& options);

void renderCheckText(const std::vector<CheckResult>& results, std::ostream& out);
void renderCheckJson(const std::vector<CheckResult>& results, std::ostream& out);
void renderCheckJunit(const std::vector<CheckResult>& results, const std::string& tracePath,
                      std::ostream& out);

}  // namespace memtool::reporters
