#pragma once
// `memtool diff base.json new.json`: for each process that allocated, matched
// with its counterpart in the other trace, the per-device deltas, then the call
// sites whose contribution to the peak grew most and those that shrank or
// vanished, matched by site identity (Python: file, function and the line's code
// where both traces recorded it, else the line number; native: the function).
//
// Processes are matched in this order, each step in order of start (their order
// in the trace), a process matched once: (1) the same rank and command line,
// (2) the same rank, (3) neither with a rank, the same command line, (4) neither
// with a rank, what is left. A process with a rank the other trace lacks, and any
// left over, is listed as found in one trace only.

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/Units.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

struct DeviceDelta {
    std::string device;
    uint64_t basePeak = 0, newPeak = 0;
    uint64_t baseAllocated = 0, newAllocated = 0;
    uint64_t baseLeaked = 0, newLeaked = 0;
};

struct SiteDelta {
    std::string device;
    // "function (file:line)" for Python (the new trace's line, or the base's for a
    // site that vanished), "function" for native
    std::string site;
    uint64_t basePeak = 0, newPeak = 0;
    uint64_t baseAllocated = 0, newAllocated = 0;
    bool isNew = false;   // absent from the baseline
    bool isGone = false;  // absent from the new trace
};

// Who a process is, as the diff names it.
struct ProcessName {
    int64_t pid = 0;
    std::vector<std::string> command;
    std::optional<int64_t> rank;
    std::string label;                      // "pid 42 (python3 train.py)"
    std::map<std::string, uint64_t> peaks;  // per device, for one found in one trace only
};

// One process of the base trace and its counterpart in the new one.
struct ProcessDiff {
    ProcessName base, current;
    std::string matchedBy;  // "rank", "command" (line) or "order" (of start)
    std::vector<DeviceDelta> devices;
    std::vector<SiteDelta> sites;   // grown peak contribution, largest growth first
    std::vector<SiteDelta> shrunk;  // shrunk or vanished, largest drop first
};

struct TraceDiff {
    std::vector<ProcessDiff> processes;  // in the base trace's order
    std::vector<ProcessName> onlyInBase, onlyInNew;
    // More than one process took part: the text output names each.
    bool several() const { return processes.size() + onlyInBase.size() + onlyInNew.size() > 1; }
};

struct DiffOptions {
    size_t top = 10;             // sites per table
    std::optional<int64_t> pid;  // only this process (of either trace) and its counterpart
    std::string command;         // only processes whose command line contains this
};

// How a site is matched across runs and shown. A Python frame's file under `cwd`
// is named relative to it, so two checkouts at different paths still match. By
// line: "function (file:line)"; with `code` (the line's code, both traces having
// recorded theirs): the function, file and code, so lines moved by an edit
// elsewhere still match. Native frames: the function. kNoStackSite for none.
std::string siteIdentity(const core::Frame* site, const std::string& cwd,
                         const std::string& code = "");
std::string siteText(const core::Frame* site, const std::string& cwd);

// The processes compared are those of each trace that allocated (the first of a
// trace where none did), narrowed by options; throws core::Error (2) when
// options name none.
TraceDiff diffTraces(const core::Trace& base, const core::Trace& current,
                     const DiffOptions& options);
// Sizes as `units` says (--bytes); JSON has whole bytes only.
void renderDiffText(const TraceDiff& d, std::ostream& out,
                    core::ByteUnits units = core::ByteUnits::Iec);
void renderDiffJson(const TraceDiff& d, std::ostream& out);

}  // namespace memtool::reporters
