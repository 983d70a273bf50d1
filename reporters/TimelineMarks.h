#pragma once
// What happened on a process's timeline besides allocations: every pause, resume,
// yield and restore (`control`) and every OOM (`oom`), on the allocations' clock, in
// time order. The HTML and Perfetto reporters draw the same marks.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::reporters {

struct TimelineMark {
    double timeS = 0;
    std::string kind;     // "pause", "resume", "yield", "restore", "oom", "policy"
    std::string device;   // the device it concerned: "cpu", "cuda:0"
    std::string label;    // one line: "pause kv_cache (ctl) 1.00 GiB", "OOM 2.00 GiB requested"
    uint64_t bytes = 0;   // released or restored; requested for an OOM
    bool failed = false;  // a control action that failed and changed nothing
};

// With `trace`: its policy's actions on this process too (kind "policy").
std::vector<TimelineMark> timelineMarks(const core::ProcessTrace& p,
                                        const core::Trace* trace = nullptr);

// memtool run's polled series (Trace::polls) on the process's clock, by name
// ("cuda:0.used"): empty where the trace has none or the process no start time.
std::map<std::string, core::TimelineSeries> polledSeries(const core::Trace& trace,
                                                         const core::ProcessTrace& p);

}  // namespace memtool::reporters
