#pragma once
// `memtool run -o` names one trace file, or with %p (pid) or %r (rank) in it one
// file per process: each process goes to the file its name expands to, so
// `-o rank%r.json` puts a rank and the workers it forked (same rank) in one file.

#include <string>
#include <utility>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::cli {

// %p: the pid; %r: the rank, or "none" without one; %%: a %.
std::string expandOutputPattern(const std::string& pattern, const core::ProcessTrace& p);
// Any other % (%q, a % at the end) is refused, core::Error(`exitCode`): a name
// written as it stands would hide a typo of %p.
void checkOutputPattern(const std::string& pattern, int exitCode);
bool isPerProcessPattern(const std::string& pattern);

// (file, the trace it gets), in the order of each file's first process; without
// %p or %r, the whole trace to `pattern`, moved there (a trace moved in is not
// copied).
std::vector<std::pair<std::string, core::Trace>> splitByOutputPattern(core::Trace trace,
                                                                      const std::string& pattern);

}  // namespace memtool::cli
