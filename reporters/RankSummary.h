#pragma once
// Every rank of a job in one view (a trace of several processes, or several traces
// read together): which rank held most, how far apart the ranks are, and per host
// the most that the processes sharing it held at once. The text, JSON, HTML and
// Perfetto reports and `memtool check --max-rank-spread` read these figures.
//
// One clock: each process's times count from its own start (startUnixS, the wall
// clock when its collector connected); summarizeRanks puts them on the clock of
// the earliest start among the processes shown.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::reporters {

// One rank's figure on a kind of device: its processes' largest peak (a rank's
// DataLoader workers carry its RANK too; the rank's own process holds most).
struct RankFigure {
    int64_t rank = 0;
    size_t process = 0;  // index into Trace::processes: the process of that peak
    std::string device;  // "cpu", or the cuda:N of that peak
    uint64_t peakBytes = 0;
};

// The ranks on one kind of device: "cpu" (host memory) or "cuda" (a rank's
// largest cuda:N, whichever GPU it used).
struct RankSpread {
    std::string kind;
    size_t ranks = 0;  // ranks that used that kind of device
    RankFigure largest, smallest;
    // largest / smallest; unset when the smallest held nothing.
    std::optional<double> spread;
};

// What the processes on one host held at once on one device, swept over their
// timelines on one clock; against the sum of their peaks (which they need not
// reach together).
struct HostPeak {
    std::string host;    // as the traces have it; empty: unnamed (an older trace)
    std::string device;  // "cpu", "cuda:0", ... as the processes name them
    uint64_t combinedBytes = 0;
    double timeS = 0;  // on the shared clock
    uint64_t sumOfPeaks = 0;
    std::vector<size_t> processes;  // indices into Trace::processes
};

struct RankSummary {
    // The shared clock's zero (Unix seconds); unset when no process has a start.
    std::optional<double> zeroUnixS;
    size_t ranks = 0;                 // distinct ranks shown
    size_t hosts = 0;                 // distinct hosts shown
    std::vector<RankSpread> spreads;  // with at least two ranks: cpu, then cuda
    std::vector<HostPeak> hostPeaks;  // per host and device used by two processes or more
};

// What a report asks of the summary: every figure, or (Perfetto's tracks, the
// rank-spread check) all but the hosts' combined peaks, whose sweep over every
// process's timeline is the costly part.
enum class RankFigures { All, WithoutHostPeaks };
RankSummary summarizeRanks(const core::Trace& trace, RankFigures figures = RankFigures::All);

// The sentences the text and HTML reports say them in, bytes as `bytes` writes
// them. "cpu: rank 1 holds most, 6.68 MiB on cpu{after}; least rank 0, 3.81 MiB;
// spread 1.75{times}" (`after`: what the text adds after the device, its pid;
// `times`: "x" or "×"; a smallest rank that held nothing: a spread of "-").
std::string rankSpreadText(const RankSpread& r, const std::function<std::string(uint64_t)>& bytes,
                           const std::string& after, const char* times);
// "node1 cpu: 3 processes held 10.49 MiB at once, 2.669 s in (their peaks sum to 10.49 MiB)".
std::string hostPeakText(const HostPeak& h, const std::function<std::string(uint64_t)>& bytes);

// `timeS` of process `p` on the shared clock: as it is when the process has no
// start (an older trace) or the summary no zero.
double sharedTimeS(const RankSummary& s, const core::ProcessTrace& p, double timeS);

// A host as the HTML and Perfetto reports name it: "(unnamed host)"
// for a trace that has none (an older one, a snapshot).
inline std::string hostText(const std::string& host) {
    return host.empty() ? "(unnamed host)" : host;
}

// (largest / smallest - 1) in percent, as `check --max-rank-spread` limits it.
double spreadPercent(double spread);

// The figures as `report --format json` carries them ("ranks"): processes with
// their peaks on the shared clock, the largest and smallest rank per kind of
// device and the spread, the hosts' combined peaks.
nlohmann::json rankSummaryJson(const core::Trace& trace, const RankSummary& s);

}  // namespace memtool::reporters
