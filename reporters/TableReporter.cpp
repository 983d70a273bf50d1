#include "reporters/TableReporter.h"

#include <fmt/format.h>

#include <map>

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
    if (p.snapshot) return "running (a snapshot)";
    return "exit status unknown";
}

// Position of the site in the stack (the frame the hotspot is named after).
size_t sitePosition(const core::Hotspot& h) {
    for (size_t i = 0; i < h.frames.size(); ++i)
        if (h.frames[i] == h.siteFrame) return i;
    return 0;
}

// What the table shows of a hotspot: its site, the nearest named frame the site
// called (stripped static functions show as ??), and up to three callers.
std::vector<std::string> shownLines(const core::ProcessTrace& p, const core::Hotspot& h) {
    const core::Frame* site = siteFrame(p, h);
    std::vector<std::string> lines{site ? shortFrame(*site) : core::kNoStackSite};
    const size_t at = sitePosition(h);
    auto frame = [&](size_t i) -> const core::Frame& { return p.frames.at(h.frames[i]); };
    size_t via = at;
    while (via > 0 && (via == at || frame(via).isUnnamed())) --via;
    if (via < at) lines.push_back("via " + shortFrame(frame(via)));
    for (size_t i = at + 1; i < h.frames.size() && i <= at + 3; ++i)
        lines.push_back("from " + shortFrame(frame(i)));
    return lines;
}

struct DisplayRow {
    core::Hotspot h;  // sums over the stacks shown alike
    std::vector<std::string> lines;
};

// Stacks that differ only in frames the table does not show read as one row.
std::vector<DisplayRow> displayRows(const core::ProcessTrace& p, const std::string& device,
                                    const ReportOptions& options) {
    std::map<std::vector<std::string>, size_t> index;
    std::vector<DisplayRow> rows;
    core::ProcessTrace merged;
    for (const auto& h : p.hotspots) {
        if (h.device != device) continue;
        auto lines = shownLines(p, h);
        auto [it, fresh] = index.try_emplace(lines, rows.size());
        if (fresh) {
            rows.push_back(DisplayRow{h, lines});
            continue;
        }
        core::Hotspot& m = rows[it->second].h;
        auto add = [](core::HotspotFigures& into, const core::HotspotFigures& f) {
            into.allocatedBytes += f.allocatedBytes;
            into.count += f.count;
            into.peakBytes += f.peakBytes;
            into.leakedBytes += f.leakedBytes;
        };
        add(m, h);
        for (const auto& [pool, f] : h.pools) add(m.pools[pool], f);
    }
    for (const auto& r : rows) merged.hotspots.push_back(r.h);
    std::vector<DisplayRow> out;
    for (const core::Hotspot* h : selectHotspots(merged, device, options))
        out.push_back(rows[static_cast<size_t>(h - merged.hotspots.data())]);
    return out;
}

// Pausable regions and every pause and resume, when the program had any.
void renderRegions(const core::ProcessTrace& p, std::ostream& out) {
    if (!p.regions.empty()) {
        out << fmt::format("\n{:<24} {:<10} {:<7} {:>12} {:>12}\n", "Region", "Device", "Backup",
                           "Live", "Paused");
        for (const auto& r : p.regions)
            out << fmt::format("{:<24} {:<10} {:<7} {:>12} {:>12}\n", r.tag, r.device, r.backup,
                               core::formatBytes(r.bytes), core::formatBytes(r.pausedBytes));
    }
    if (!p.control.empty()) {
        out << fmt::format("\nMemory control ({} event{})\n", p.control.size(),
                           p.control.size() == 1 ? "" : "s");
        out << fmt::format("{:>10} {:<8} {:<4} {:<16} {:<8} {:>12} {:<6} {:>9}  {}\n", "At",
                           "Action", "By", "Region", "Device", "Bytes", "Backup", "Took", "Result");
        for (const auto& e : p.control)
            out << fmt::format("{:>8.3f} s {:<8} {:<4} {:<16} {:<8} {:>12} {:<6} {:>7.3f} s  {}\n",
                               e.timeS, e.action, e.origin, e.tag, e.device,
                               core::formatBytes(e.bytes), e.backup, e.durationS,
                               e.ok ? "ok" : "FAILED: " + e.message);
    }
}

// "grow (oom.py:16)": the request's line with the file's name, or its site.
std::string oomWhere(const core::OomEvent& e) {
    if (e.file.empty()) return e.site.empty() ? core::kNoStackSite : e.site;
    const size_t slash = e.file.rfind('/');
    return fmt::format("{} ({}:{})", e.function,
                       slash == std::string::npos ? e.file : e.file.substr(slash + 1), e.line);
}

// "grow (/home/u/oom.py:16)" -> "grow (oom.py:16)", as the hotspot tables show sites.
std::string shortSite(const std::string& site) {
    const size_t open = site.rfind(" (");
    if (open == std::string::npos || site.back() != ')') return site;
    const std::string inside = site.substr(open + 2, site.size() - open - 3);
    const size_t slash = inside.rfind('/', inside.find(':'));
    if (slash == std::string::npos) return site;
    return site.substr(0, open + 2) + inside.substr(slash + 1) + ")";
}

// What users most need from a profiler comes first: the out-of-memory moment.
void renderOutOfMemory(const core::ProcessTrace& p, std::ostream& out) {
    if (p.oom.empty()) return;
    const core::OomEvent& e = p.oom.front();
    std::string held = fmt::format("{} were held", core::formatBytes(e.liveBytes));
    if (!e.heldOn.empty() && e.heldOn != e.device) held += " on " + e.heldOn;
    if (e.deviceTotalBytes > 0 || e.deviceFreeBytes > 0)
        held +=
            fmt::format(" ({} free on the device{})", core::formatBytes(e.deviceFreeBytes),
                        e.deviceTotalBytes ? " of " + core::formatBytes(e.deviceTotalBytes) : "");
    // An older trace names only time, device and size.
    const std::string where = e.site.empty() && e.file.empty() ? "" : " at " + oomWhere(e);
    if (e.heldOn.empty()) held.clear();
    out << fmt::format("Out of memory on {}: {} requested{}{}{}\n", e.device,
                       core::formatBytes(e.requestedBytes), where,
                       held.empty() ? "" : " while " + held, e.bySite.empty() ? "" : "; held by:");
    for (const auto& s : e.bySite)
        out << fmt::format("  {:>12}  {}\n", core::formatBytes(s.bytes), shortSite(s.site));
    if (p.oomCount > 1)
        out << fmt::format("  ({} out-of-memory events in all: trace.json's oom lists them)\n",
                           p.oomCount);
    out << '\n';
}

void renderProcess(const core::ProcessTrace& p, const ReportOptions& options, std::ostream& out) {
    renderOutOfMemory(p, out);
    out << fmt::format("Command:  {}\n", joinCommand(p.command));
    out << fmt::format("Process:  pid {} · {} · {:.3f} s · {}\n", p.pid, exitText(p), p.durationS,
                       p.complete ? "trace complete" : "trace INCOMPLETE: " + p.incompleteReason);
    for (const auto& w : p.warnings) out << "Warning:  " << w << '\n';
    if (p.devices.empty()) {
        out << "\nNo tracked allocations (the program loaded no allocator memtool tracks).\n";
        return;
    }
    // Device rows, then the caching allocator's pools of a CUDA device beneath it
    // (PyTorch's active and reserved bytes, where the torch bridge was attached).
    out << fmt::format("\n{:<24} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "Device", "Peak",
                       "Leaked", "Allocated", "Freed", "Allocs", "Frees");
    auto row = [&](const std::string& name, const auto& d) {
        out << fmt::format("{:<24} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", name,
                           core::formatBytes(d.peakBytes), core::formatBytes(d.currentBytes),
                           core::formatBytes(d.allocatedBytes), core::formatBytes(d.freedBytes),
                           d.allocCount, d.freeCount);
    };
    for (const auto& [name, d] : p.devices) {
        row(d.source.empty() || name == "cpu" ? name : name + " (" + d.source + ")", d);
        for (const char* pool : {core::kPoolActive, core::kPoolReserved})
            if (auto it = d.pools.find(pool); it != d.pools.end())
                row("  " + std::string(pool), it->second);
    }
    renderRegions(p, out);
    for (const auto& [name, d] : p.devices) {
        const ReportOptions deviceOptions = optionsFor(p, name, options);
        auto rows = displayRows(p, name, deviceOptions);
        if (rows.empty()) continue;
        const bool pools = !d.pools.empty();
        auto poolPeak = [](const core::Hotspot& h, const char* pool) {
            auto it = h.pools.find(pool);
            return core::formatBytes(it == h.pools.end() ? 0 : it->second.peakBytes);
        };
        out << fmt::format("\nTop {} hotspots on {} by {}\n", rows.size(), name,
                           sortKeyName(deviceOptions.sort));
        out << fmt::format("{:>3} {:>12} {:>12} {:>8} {:>12}", "#", "Peak", "Allocated", "Count",
                           "Leaked");
        if (pools) out << fmt::format(" {:>12} {:>12}", "Active peak", "Reserv. peak");
        out << "  Site\n";
        const size_t indent = pools ? 77 : 51;
        size_t rank = 0;
        for (const DisplayRow& r : rows) {
            out << fmt::format("{:>3} {:>12} {:>12} {:>8} {:>12}", ++rank,
                               core::formatBytes(r.h.peakBytes),
                               core::formatBytes(r.h.allocatedBytes), r.h.count,
                               core::formatBytes(r.h.leakedBytes));
            if (pools)
                out << fmt::format(" {:>12} {:>12}", poolPeak(r.h, core::kPoolActive),
                                   poolPeak(r.h, core::kPoolReserved));
            out << "  " << r.lines[0] << '\n';
            for (size_t i = 1; i < r.lines.size(); ++i)
                out << std::string(indent, ' ') << r.lines[i] << '\n';
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
