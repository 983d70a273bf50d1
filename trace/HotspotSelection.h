#pragma once
// What every hotspot reporter shows: a process's hotspots, ordered and cut to N.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/SiteChoice.h"
#include "core/Units.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// Active and Reserved: the hotspot's peak in PyTorch's caching-allocator pools
// (CUDA devices with the torch bridge attached).
enum class SortKey { Peak, Allocated, Count, Leaked, HeldAtExit, Active, Reserved };

// What a row of the hotspot table stands for: a call site (with the frames
// below and above it), or every stack whose site is in one function, whose
// innermost nn.Module forward is one class's, or whose torch operator is one.
enum class GroupBy { Site, Function, Module, Op };

struct ReportOptions {
    size_t top = 10;
    SortKey sort = SortKey::Peak;
    std::optional<core::SiteMode> site;  // choose sites again; none: as recorded
    size_t depth = 1;                    // frames shown below the site ("via")
    GroupBy groupBy = GroupBy::Site;
    core::ByteUnits bytes = core::ByteUnits::Iec;  // how sizes are written
};

// Parses "site" | "function" | "module" | "op"; throws core::Error (exit 2) otherwise.
GroupBy parseGroupBy(const std::string& text);

// Parses "peak" | "allocated" | "count" | "leaked" | "held-at-exit" | "active" | "reserved"; throws
// core::Error (exit 2) otherwise.
SortKey parseSortKey(const std::string& text);
const char* sortKeyName(SortKey key);
// The figure a hotspot is ordered by (its pool's peak for Active and Reserved).
uint64_t sortValue(const core::Hotspot& h, SortKey key);

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

// A demangled C++ name without its parameter list and return type, for a table:
// "at::Tensor ns::f<std::function<void (int)> >(long) const" ->
// "ns::f<std::function<void (int)> >". Never cut inside template arguments,
// "(anonymous namespace)", a lambda's "{lambda(int)#1}" or an operator's symbol
// ("operator<", "operator()"); a name without parameters is left whole. Template
// argument lists of more than 40 characters show as "<...>":
// "c10::impl::wrap_kernel_functor_unboxed_<...>::call".
std::string shortFunctionName(const std::string& function);

// A frame for a table: path cut to the file name, C++ parameters dropped
// (shortFunctionName): "f (/a/b/x.py:3)" -> "f (x.py:3)", "ns::g(long) (lib.so)"
// -> "ns::g (lib.so)".
std::string shortFrame(const core::Frame& frame);

// A site as the tables show it: shortFrame() of its frame (an id into p.frames),
// or `text` when it has none ("(no stack)", "(3 other sites)"). For sites kept
// beside hotspots, such as an out-of-memory event's.
std::string shownSite(const core::ProcessTrace& p, const std::optional<uint32_t>& frame,
                      const std::string& text);

// Where an out-of-memory request was made, as shownSite() names it; empty for
// an event of an older trace, which kept only its time, device and size.
std::string oomSite(const core::ProcessTrace& p, const core::OomEvent& e);

// The frame a hotspot is named after, or null when it came with no stack.
const core::Frame* siteFrame(const core::ProcessTrace& p, const core::Hotspot& h);

}  // namespace memtool::reporters
