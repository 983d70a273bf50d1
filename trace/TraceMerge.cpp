#include "trace/TraceMerge.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "core/Error.h"
#include "trace/TraceReader.h"

namespace memtool::reporters {
namespace {

// Who a process is across files: a pid is reused, a pid and its start are not.
using ProcessKey = std::tuple<std::string, int64_t, std::optional<double>>;

std::string hostText(const std::string& host) { return host.empty() ? "an unnamed host" : host; }

// Ranked processes first, by rank; then the rest, in the order they came.
int64_t rankOrder(const core::ProcessTrace& p) {
    return p.rank ? *p.rank : std::numeric_limits<int64_t>::max();
}

}  // namespace

core::Trace mergeTraces(std::vector<core::Trace> traces, const std::vector<std::string>& paths) {
    if (traces.size() == 1) return std::move(traces.front());
    core::Trace merged;
    merged.memtoolVersion = traces.empty() ? "" : traces.front().memtoolVersion;
    std::map<ProcessKey, size_t> seen;  // -> the file it came from
    double cliCpuS = 0;
    bool cpuKnown = true;
    for (size_t f = 0; f < traces.size(); ++f) {
        core::Trace& t = traces[f];
        merged.cliMaxRssBytes = std::max(merged.cliMaxRssBytes, t.cliMaxRssBytes);
        cpuKnown = cpuKnown && t.cliCpuS;
        cliCpuS += t.cliCpuS.value_or(0);
        for (auto& a : t.policyActions) merged.policyActions.push_back(std::move(a));
        for (auto& p : t.processes) {
            const ProcessKey key{p.host, p.pid, p.startUnixS};
            if (auto [it, fresh] = seen.try_emplace(key, f); !fresh)
                throw core::Error(
                    core::kExitBadInput,
                    fmt::format("{} and {} hold the same process (pid {} on {}): "
                                "give each trace once",
                                paths[it->second], paths[f], p.pid, hostText(p.host)));
            merged.processes.push_back(std::move(p));
        }
    }
    if (cpuKnown) merged.cliCpuS = cliCpuS;
    std::stable_sort(merged.processes.begin(), merged.processes.end(),
                     [](const core::ProcessTrace& a, const core::ProcessTrace& b) {
                         return std::pair(a.host, rankOrder(a)) < std::pair(b.host, rankOrder(b));
                     });
    return merged;
}

core::Trace loadTraces(const std::vector<std::string>& paths) {
    std::vector<core::Trace> traces;
    traces.reserve(paths.size());
    for (const std::string& path : paths) traces.push_back(loadTrace(path));
    return mergeTraces(std::move(traces), paths);
}

}  // namespace memtool::reporters
