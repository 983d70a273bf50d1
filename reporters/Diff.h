#pragma once
// `memtool diff base.json new.json`: per-device deltas, then the call sites whose
// contribution to the peak grew most, matched by site identity (Python: file,
// function and line; native: the function).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/TraceModel.h"

namespace memtool::reporters {

struct DeviceDelta {
    std::string device;
    uint64_t basePeak = 0, newPeak = 0;
    uint64_t baseAllocated = 0, newAllocated = 0;
    uint64_t baseLeaked = 0, newLeaked = 0;
};

struct SiteDelta {
    std::string device;
    std::string site;  // identity: "function (file:line)" for Python, "function" for native
    uint64_t basePeak = 0, newPeak = 0;
    uint64_t baseAllocated = 0, newAllocated = 0;
    bool isNew = false;  // absent from the baseline
};

struct TraceDiff {
    std::vector<DeviceDelta> devices;
    std::vector<SiteDelta> sites;  // grown peak contribution, largest growth first
};

// The identity a site is matched by across runs: "function (file:line)" for a
// Python frame, with a file under `cwd` named relative to it, so two checkouts at
// different paths still match; "function" for a native frame; kNoStackSite for none.
std::string siteIdentity(const core::Frame* site, const std::string& cwd);

TraceDiff diffTraces(const core::Trace& base, const core::Trace& current, size_t top);
void renderDiffText(const TraceDiff& d, std::ostream& out);
void renderDiffJson(const TraceDiff& d, std::ostream& out);

}  // namespace memtool::reporters
