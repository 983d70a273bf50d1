#pragma once
// Which processes of a trace `report`, `check` and `diff` look at: all of them, or
// those `--pid` or `--rank` names. check and diff compare one process, the first
// selected (processes[0], the launched program, when nothing is named; with
// --rank, the rank's own process, which connected before the workers it forked).

#include <cstdint>
#include <optional>
#include <string>

#include "core/TraceModel.h"

namespace memtool::reporters {

struct ProcessFilter {
    std::optional<int64_t> pid;
    std::optional<int64_t> rank;
    bool any() const { return pid || rank; }
};

// The trace with only the processes the filter names, in their order. Throws
// core::Error (exit 2) when it names none of them; `what` names the trace in the
// message ("the trace", "the baseline").
core::Trace selectProcesses(const core::Trace& trace, const ProcessFilter& filter,
                            const std::string& what = "the trace");

// "-" or the rank, as the reports show it.
std::string rankText(const core::ProcessTrace& p);

}  // namespace memtool::reporters
