#pragma once
// `memtool diff base.json new.json`: per-device deltas, then the call sites whose
// contribution to the peak grew most and those that shrank or vanished, matched by
// site identity (Python: file, function and the line's code where both traces
// keep it, else the line number; native: the function).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/TraceModel.h"
#include "core/Units.h"

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

struct TraceDiff {
    std::vector<DeviceDelta> devices;
    std::vector<SiteDelta> sites;   // grown peak contribution, largest growth first
    std::vector<SiteDelta> shrunk;  // shrunk or vanished, largest drop first
};

// How a site is matched across runs and shown. A Python frame's file under `cwd`
// is named relative to it, so two checkouts at different paths still match. By
// line: "function (file:line)"; `bySource` (both traces keep the lines' code): the
// function, file and code, so lines moved by an edit elsewhere still match.
// Native frames: the function. kNoStackSite for none.
std::string siteIdentity(const core::Frame* site, const std::string& cwd, bool bySource = false);
std::string siteText(const core::Frame* site, const std::string& cwd);

TraceDiff diffTraces(const core::Trace& base, const core::Trace& current, size_t top);
// Sizes as `units` says (--bytes); JSON has whole bytes only.
void renderDiffText(const TraceDiff& d, std::ostream& out,
                    core::ByteUnits units = core::ByteUnits::Iec);
void renderDiffJson(const TraceDiff& d, std::ostream& out);

}  // namespace memtool::reporters
