#pragma once
// The event log's part of the HTML report (memtool run --events): what was live
// at moments across each process's log, which the page's moment view draws as a
// flame graph (a click on the timeline or the slider picks one), and the events
// before its out-of-memory error or peak, as a table with their stacks.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>

#include "trace/EventLog.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// {"names": [[label, text, kind]...], "stacks": [[device, [name ids, outermost
// first]]...], "moments": [[time_s, [[stack, bytes]...]]...]}: up to `count`
// moments evenly over the time the log reaches back to, and right after each
// device's peak; each exact (EventViews.h, liveAt). Stack -1: the rest of the
// stacks of a moment past the 200 largest of each device.
nlohmann::json momentsData(const core::ProcessTrace& t, const core::ProcessEvents& p,
                           size_t count = 80);

// The section: a moment view per device, then the events before the focus.
void momentsSection(const core::ProcessTrace& t, const core::ProcessEvents& p, size_t index,
                    std::ostream& out);

}  // namespace memtool::reporters
