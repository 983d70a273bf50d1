#pragma once
// The rows of a hotspot table, one choice for every report (text, JSON, HTML):
// a device's stacks read again with --site, --depth and --group-by; stacks that
// differ only in frames a row does not show summed into one row; then ordered
// and cut to --top (selectHotspots).

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/HotspotSelection.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// How a table names its rows, and their column: "hotspots"/"Site", ...
struct GroupNames {
    const char* rows;
    const char* row;  // one of them: "Top 1 hotspot"
    const char* column;
    const char* one;  // a row, in a legend
};
GroupNames groupNames(GroupBy g);
// "Top 3 hotspots", "Top 1 hotspot".
const char* rowsNamed(const GroupNames& names, size_t count);
const char* groupByName(GroupBy g);  // "site", "function", "module", "op"
// --group-by module's row for stacks on which no module worked.
inline constexpr const char* kNoModuleGroup = "(no module's forward)";
// Whether a process's stacks name module instances (memtool run --modules).
bool namesModuleInstances(const core::ProcessTrace& p);

struct HotspotRow {
    // Figures and pools summed over the stacks the row stands for; `site` is
    // the first stack's recorded site, or the group's name (ties sort by it).
    core::Hotspot figures;
    const core::Hotspot* largest = nullptr;  // the largest of those stacks, by the sort key
    size_t stacks = 0;                       // how many stacks it sums
    // GroupBy::Site: ids into ProcessTrace::frames. `site` is none when the
    // stacks came with no frame.
    std::optional<uint32_t> site;
    std::vector<uint32_t> below;    // up to --depth frames below the site, outermost first
    std::vector<uint32_t> callers;  // up to three callers, innermost first
    // Grouped rows: the group's name, "Linear.forward (linear.py)", "aten::linear".
    std::string group;
};

// What the rows --top left out hold together, so that a table adds up.
struct HotspotRest {
    size_t rows = 0;
    core::HotspotFigures figures;
    std::map<std::string, core::HotspotFigures> pools;
};

// The rows of `device`, largest first; callers pass optionsFor(...). `rest`,
// where given, gets what the rows left out hold.
std::vector<HotspotRow> hotspotRows(const core::ProcessTrace& p, const std::string& device,
                                    const ReportOptions& options, HotspotRest* rest = nullptr);

// What the text table shows of a row, a line each: the site, "via ..." below it
// and "from ..." callers; or the group's name.
std::vector<std::string> rowLines(const core::ProcessTrace& p, const HotspotRow& row);

}  // namespace memtool::reporters
