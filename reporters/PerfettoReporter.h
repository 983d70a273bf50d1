#pragma once
// `memtool report --format perfetto`: the timeline as Chrome trace-event JSON,
// which ui.perfetto.dev and chrome://tracing open. Per process (its pid, named by
// its command): a counter per device and pool named as trace.json's timeline
// names them ("cpu", "cuda:0", "cuda:0.active"), with one series, "bytes"; an
// instant event at each device's peak; an instant event per control action and
// OOM. Times are microseconds on each process's own clock (from its collector's
// connection), as in trace.json.

#include <nlohmann/json.hpp>

#include "trace/TraceModel.h"

namespace memtool::reporters {

nlohmann::json renderPerfetto(const core::Trace& trace);

}  // namespace memtool::reporters
