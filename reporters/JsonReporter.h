#pragma once
// `memtool report --format json`: the same selection as the table, as JSON for jq.

#include <nlohmann/json.hpp>

#include "core/TraceModel.h"
#include "reporters/HotspotSelection.h"

namespace memtool::reporters {

nlohmann::json renderJson(const core::Trace& trace, const ReportOptions& options);

}  // namespace memtool::reporters
