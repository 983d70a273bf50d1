#pragma once
// What every hotspot reporter shows: a process's hotspots, ordered and cut to N.

#include <cstddef>
#include <string>
#include <vector>

#include "core/TraceModel.h"

namespace memtool::reporters {

// Active and Reserved: the hotspot's peak in PyTorch's caching-allocator pools
// (CUDA devices with the torch bridge attached).
enum class SortKey { Peak, Allocated, Count, Leaked, Active, Reserved };

struct ReportOptions {
    size_t top = 10;
    SortKey sort = SortKey::Peak;
};

// Parses "peak" | "allocated" | "count" | "leaked" | "active" | "reserved"; throws core::Error
// (exit 2) otherwise.
SortKey parseSortKey(const std::string& text);
const char* sortKeyName(SortKey key);

// The options a device's hotspots are selected with: an active or reserved sort
// falls back to the peak on a device without caching-allocator pools (cpu, pinned,
// CUDA without the bridge).
ReportOptions optionsFor(const core::ProcessTrace& p, const std::string& device,
                         const ReportOptions& requested);

// Hotspots of `device`, largest first by options.sort (ties: allocated bytes, then
// site); callers pass optionsFor(...).
std::vector<const core::Hotspot*> selectHotspots(const core::ProcessTrace& p,
                                                 const std::string& device,
                                                 const ReportOptions& options);

// A frame for a table: path cut to the file name, C++ parameters dropped:
// "f (/a/b/x.py:3)" -> "f (x.py:3)", "ns::g(long) (lib.so)" -> "ns::g (lib.so)".
std::string shortFrame(const core::Frame& frame);

// The frame a hotspot is named after, or null when it came with no stack.
const core::Frame* siteFrame(const core::ProcessTrace& p, const core::Hotspot& h);

}  // namespace memtool::reporters
