#include "reporters/TableReporter.h"

#include <fmt/format.h>

#include "core/Units.h"

namespace memtool::reporters {

namespace {

std::string joinCommand(const std::vector<std::string>& cmd) {
    std::string s;
    for (const auto& a : cmd) s += (s.empty() ? "" : " ") + a;
    return s;
}

std::string exitText(const core::ProcessTrace& p) {
    if (p.exitCode) return fmt::format("exit code {}", *p.exitCode);
    if (p.exitSignal) return fmt::format("killed by signal {}", *p.exitSignal);
    return "exit status unknown";
}

// Index of the site in the stack (the frame the hotspot is named after).
size_t siteIndex(const core::Hotspot& h) {
    for (size_t i = 0; i < h.stack.size(); ++i)
        if (h.stack[i] == h.site) return i;
    return 0;
}

void renderProcess(const core::ProcessTrace& p, const ReportOptions& options, std::ostream& out) {
    out << fmt::format("Command:  {}\n", joinCommand(p.command));
    out << fmt::format("Process:  pid {} · {} · {:.3f} s · {}\n", p.pid, exitText(p), p.durationS,
                       p.complete ? "trace complete" : "trace INCOMPLETE: " + p.incompleteReason);
    for (const auto& w : p.warnings) out << "Warning:  " << w << '\n';
    if (p.devices.empty()) {
        out << "\nNo tracked allocations (the program loaded no allocator memtool tracks).\n";
        return;
    }
    out << fmt::format("\n{:<8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "Device", "Peak", "Leaked",
                       "Allocated", "Freed", "Allocs", "Frees");
    for (const auto& [name, d] : p.devices) {
        out << fmt::format("{:<8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", name,
                           core::formatBytes(d.peakBytes), core::formatBytes(d.currentBytes),
                           core::formatBytes(d.allocatedBytes), core::formatBytes(d.freedBytes),
                           d.allocCount, d.freeCount);
    }
    for (const auto& [name, d] : p.devices) {
        auto top = selectHotspots(p, name, options);
        if (top.empty()) continue;
        out << fmt::format("\nTop {} hotspots on {} by {}\n", top.size(), name, sortKeyName(options.sort));
        out << fmt::format("{:>3} {:>12} {:>12} {:>8} {:>12}  {}\n", "#", "Peak", "Allocated", "Count",
                           "Leaked", "Site");
        size_t rank = 0;
        for (const core::Hotspot* h : top) {
            out << fmt::format("{:>3} {:>12} {:>12} {:>8} {:>12}  {}\n", ++rank,
                               core::formatBytes(h->peakBytes), core::formatBytes(h->allocatedBytes), h->count,
                               core::formatBytes(h->leakedBytes), shortFrame(h->site));
            // The nearest named frame the site called (stripped static functions
            // show as ??), then up to three callers of the site.
            size_t at = siteIndex(*h);
            size_t via = at;
            while (via > 0 && (via == at || h->stack[via].rfind("??", 0) == 0)) --via;
            if (via < at) out << fmt::format("{:>51}via {}\n", "", shortFrame(h->stack[via]));
            for (size_t i = at + 1; i < h->stack.size() && i <= at + 3; ++i)
                out << fmt::format("{:>51}from {}\n", "", shortFrame(h->stack[i]));
        }
    }
}

}  // namespace

void renderTable(const core::Trace& trace, const ReportOptions& options, std::ostream& out) {
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        if (i > 0) out << "\n" << std::string(78, '-') << "\nChild process\n";
        renderProcess(trace.processes[i], options, out);
    }
    if (trace.processes.empty()) out << "The trace holds no process.\n";
}

}  // namespace memtool::reporters
