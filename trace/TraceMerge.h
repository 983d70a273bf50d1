#pragma once
// Several trace.json read as one (`memtool report a.json b.json`, `memtool check`):
// a multi-node job writes a trace per node or per rank (`memtool run -o rank%r.json`
// on a shared file system), and the job is read whole.

#include <string>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::reporters {

// Each trace's processes, in one trace: with one path, that trace as it is; with
// several, ordered by host, then rank (ranked first), keeping each file's order
// otherwise. Their machine readings (--poll) and event logs stay with their own
// files: the merged trace has none. The same process (host, pid and start) in two
// files, or the same file twice, is bad input (core::Error, exit 2), as is a file
// loadTrace refuses.
core::Trace loadTraces(const std::vector<std::string>& paths);

// `traces` (named by `paths` in messages) as loadTraces merges them.
core::Trace mergeTraces(std::vector<core::Trace> traces, const std::vector<std::string>& paths);

}  // namespace memtool::reporters
