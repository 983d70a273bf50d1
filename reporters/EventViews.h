#pragma once
// What the event log (trace/EventLog.h) says beyond the folded trace: the events
// that led up to a moment (the out-of-memory error, the peak), and what was live
// at any moment the log covers. The log's last event leaves the blocks it lists
// as live at the end, so any earlier moment is those blocks with the later
// events undone: exact for a ring of the last N too, back to its first event.

#include <cstdint>
#include <string>
#include <vector>

#include "core/SiteChoice.h"
#include "trace/EventLog.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// An event's stack, innermost first (empty for stack 0).
std::vector<core::Frame> eventStack(const core::ProcessEvents& p, uint32_t stack);
// Its site as the tables show one ("grow (oom.py:17)"), or "(no stack)".
std::string eventSite(const core::ProcessEvents& p, uint32_t stack, core::SiteMode mode);
// "alloc", "free", "oom".
const char* eventAction(core::EventKind kind);

// The moment a process's events are read up to: its first refused request in
// the log, else the peak of its device with the largest peak.
struct Focus {
    std::string what;     // "the out-of-memory error on cpu", "the peak of cuda:0"
    std::string device;   // the device it is on
    size_t end = 0;       // events [0, end) lead up to it, the last being the moment's
    uint64_t bytes = 0;   // the request's size, or the peak's bytes (live, paused or not)
    std::string missing;  // when the log does not reach it: why (end is 0 then)
};
Focus focusOf(const core::ProcessTrace& t, const core::ProcessEvents& p);

// What one stack held live at a moment.
struct LiveStack {
    uint8_t device = core::kDeviceCpu;
    uint32_t stack = 0;
    uint64_t bytes = 0;
    uint64_t blocks = 0;
};
// What was live right after the last event at or before `timeNs`, largest first
// (ties: by device, then stack). Throws core::Error (2) when the log does not
// reach back to it: a ring's first event came later, or events were folded.
std::vector<LiveStack> liveAt(const core::ProcessEvents& p, uint64_t timeNs);

// The entry of process `t` in `log` (its trace names it), or null when it kept none.
// Throws core::Error (2) when the entry named is not there or is another process's.
const core::ProcessEvents* eventsOf(const core::EventLog& log, const core::ProcessTrace& t);

}  // namespace memtool::reporters
