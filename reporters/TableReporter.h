#pragma once
// The human report: header, per-device totals, top hotspots with short stacks.

#include <ostream>

#include "core/TraceModel.h"
#include "reporters/HotspotSelection.h"

namespace memtool::reporters {

void renderTable(const core::Trace& trace, const ReportOptions& options, std::ostream& out);

}  // namespace memtool::reporters
