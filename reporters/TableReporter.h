#pragma once
// The human report: header, per-device totals, top hotspots with short stacks.

#include <ostream>

#include "trace/HotspotSelection.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

void renderTable(const core::Trace& trace, const ReportOptions& options, std::ostream& out);

}  // namespace memtool::reporters
