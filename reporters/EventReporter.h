#pragma once
// The event log's reports (memtool report with a trace that names one): the
// events that led up to the out-of-memory error or the peak, and with --at what
// was live at a moment, by stack. Text and JSON.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>

#include "trace/EventLog.h"
#include "trace/HotspotSelection.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// The last `count` events before each process's focus (EventViews.h: its first
// out-of-memory error in the log, else its largest peak); processes without a
// log are left out.
void renderEventsBefore(const core::Trace& trace, const core::EventLog& log, size_t count,
                        const ReportOptions& options, std::ostream& out);
nlohmann::json eventsBeforeJson(const core::Trace& trace, const core::EventLog& log, size_t count,
                                const ReportOptions& options);

// What was live `atS` seconds into each process's clock, by stack (options.top
// rows per device). Throws core::Error (2) where a process's log does not reach it.
void renderLiveAt(const core::Trace& trace, const core::EventLog& log, double atS,
                  const ReportOptions& options, std::ostream& out);
nlohmann::json liveAtJson(const core::Trace& trace, const core::EventLog& log, double atS,
                          const ReportOptions& options);

}  // namespace memtool::reporters
