#pragma once
// `memtool report --format json`: the same selection as the table, as JSON for jq.
// The trace (schema memtool.trace/1, docs/TRACE.md) with each process's
// `hotspots` replaced by `top_hotspots` (per device, the rows the text table
// shows: --top, --sort, --site, --depth, --group-by; README.md has their
// fields) and how they were chosen (`sort`, `site_mode`, `depth`, `group_by`);
// with --lines, also `line_table`: the rows the line table shows (--file,
// --function and the library-file rule applied).

#include <nlohmann/json.hpp>

#include "reporters/LineReporter.h"
#include "trace/HotspotSelection.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

nlohmann::json renderJson(const core::Trace& trace, const ReportOptions& options,
                          const LineReportOptions* lines = nullptr);

}  // namespace memtool::reporters
