#include "reporters/ProcessSelection.h"

#include <fmt/format.h>

#include "core/Error.h"

namespace memtool::reporters {

core::Trace selectProcesses(const core::Trace& trace, const ProcessFilter& filter,
                            const std::string& what) {
    if (!filter.any()) return trace;
    core::Trace selected = trace;
    selected.processes.clear();
    for (const core::ProcessTrace& p : trace.processes)
        if ((!filter.pid || p.pid == *filter.pid) && (!filter.rank || p.rank == filter.rank))
            selected.processes.push_back(p);
    if (selected.processes.empty()) {
        std::string named;
        if (filter.pid) named += fmt::format("pid {}", *filter.pid);
        if (filter.rank)
            named += fmt::format("{}rank {}", named.empty() ? "" : " and ", *filter.rank);
        std::string present;
        for (const core::ProcessTrace& p : trace.processes)
            present += fmt::format("{}{}{}", present.empty() ? "" : ", ", p.pid,
                                   p.rank ? fmt::format(" (rank {})", *p.rank) : "");
        throw core::Error(core::kExitBadInput,
                          fmt::format("{} has no process with {} (it has: {})", what, named,
                                      present.empty() ? "none" : present));
    }
    return selected;
}

std::string rankText(const core::ProcessTrace& p) { return p.rank ? std::to_string(*p.rank) : "-"; }

}  // namespace memtool::reporters
