#include "reporters/TableReporter.h"

#include <fmt/format.h>

#include <map>

#include "core/SiteChoice.h"
#include "core/Units.h"
#include "reporters/ByteText.h"
#include "reporters/ProcessSelection.h"

namespace memtool::reporters {

namespace {

std::string joinCommand(const std::vector<std::string>& cmd) {
    std::string s;
    for (const auto& a : cmd) s += (s.empty() ? "" : " ") + a;
    return s;
}

// When "Leaked" was counted, as a legend says it.
const char* leakWhen(const core::ProcessTrace& p) {
    if (p.leakMoment == core::kLeakAtPython) return "when the interpreter began to finalize";
    if (p.leakMoment == core::kLeakAtExit) return "when main returned or exit was called";
    return "at the end of the run";
}

std::string exitText(const core::ProcessTrace& p) {
    if (p.exec) return "exec'd another program";
    if (p.exitCode) return fmt::format("exit code {}", *p.exitCode);
    if (p.exitSignal) return fmt::format("killed by signal {}", *p.exitSignal);
    if (p.snapshot) return "running (a snapshot)";
    return "exit status unknown";
}

// The hotspot's frames, innermost first.
std::vector<core::Frame> framesOf(const core::ProcessTrace& p, const core::Hotspot& h) {
    std::vector<core::Frame> stack;
    stack.reserve(h.frames.size());
    for (uint32_t id : h.frames) stack.push_back(p.frames.at(id));
    return stack;
}

// Position of the site in the stack: as recorded, or chosen again (--site).
std::optional<size_t> sitePosition(const core::Hotspot& h, const std::vector<core::Frame>& stack,
                                   const ReportOptions& options) {
    if (options.site) return core::chooseSite(stack, *options.site);
    if (!h.siteFrame) return std::nullopt;
    for (size_t i = 0; i < h.frames.size(); ++i)
        if (h.frames[i] == h.siteFrame) return i;
    return std::nullopt;
}

// "Conv2d.forward (conv.py)": a frame's function and file, without the line.
std::string functionOf(const core::Frame& f) {
    const std::string shown = shortFrame(f);  // "f (x.py:3)", "ns::g (lib.so)"
    const size_t colon = shown.rfind(':');
    const size_t open = shown.rfind(" (");
    if (f.line == 0 || colon == std::string::npos || open == std::string::npos || colon < open)
        return shown;
    return shown.substr(0, colon) + ")";
}

// The innermost nn.Module forward on the stack ("Linear.forward (linear.py)").
std::string moduleOf(const std::vector<core::Frame>& stack) {
    for (const core::Frame& f : stack) {
        const std::string& q = f.function;
        if (f.isPython() && q.size() > 8 && q.compare(q.size() - 8, 8, ".forward") == 0)
            return functionOf(f);
    }
    return "(no module's forward)";
}

// The torch operator the stack's caller asked for: the outermost one.
std::string operatorOf(const std::vector<core::Frame>& stack) {
    for (size_t i = stack.size(); i > 0; --i)
        if (std::string op = core::torchOperator(stack[i - 1]); !op.empty()) return op;
    return "(no torch operator)";
}

// What the table shows of a hotspot: its site, the frames below it that say what
// happened there (--depth of them), and up to three callers, wrappers and unnamed
// frames skipped; or, grouped, the one name its group goes by.
std::vector<std::string> shownLines(const core::ProcessTrace& p, const core::Hotspot& h,
                                    const ReportOptions& options) {
    const std::vector<core::Frame> stack = framesOf(p, h);
    const std::optional<size_t> at = sitePosition(h, stack, options);
    switch (options.groupBy) {
        case GroupBy::Site:
            break;
        case GroupBy::Function:
            return {at ? functionOf(stack[*at]) : core::kNoStackSite};
        case GroupBy::Module:
            return {moduleOf(stack)};
        case GroupBy::Op:
            return {operatorOf(stack)};
    }
    if (!at) return {core::kNoStackSite};
    std::vector<std::string> lines{shortFrame(stack[*at])};
    for (size_t i : core::framesBelow(stack, *at, options.depth))
        lines.push_back("via " + shortFrame(stack[i]));
    // Up to three callers, wrappers skipped as below.
    size_t callers = 0;
    for (size_t i = *at + 1; i < stack.size() && callers < 3; ++i) {
        if (core::isPassThroughFrame(stack[i])) continue;
        lines.push_back("from " + shortFrame(stack[i]));
        ++callers;
    }
    return lines;
}

// How the table names its rows, and their column: "hotspots"/"Site", ...
struct GroupNames {
    const char* rows;
    const char* column;
    const char* one;  // a row, in the legend
};
GroupNames namesOf(GroupBy g) {
    switch (g) {
        case GroupBy::Site:
            break;
        case GroupBy::Function:
            return {"functions", "Function", "function"};
        case GroupBy::Module:
            return {"modules", "Module", "module"};
        case GroupBy::Op:
            return {"torch operators", "Operator", "operator"};
    }
    return {"hotspots", "Site", "site"};
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
        auto lines = shownLines(p, h, options);
        auto [it, fresh] = index.try_emplace(lines, rows.size());
        if (fresh) {
            rows.push_back(DisplayRow{h, lines});
            // A group's ties are broken by its name.
            if (options.groupBy != GroupBy::Site) rows.back().h.site = lines[0];
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
void renderRegions(const core::ProcessTrace& p, const ByteText& b, std::ostream& out) {
    if (!p.regions.empty()) {
        out << fmt::format("\n{:<24} {:<10} {:<7} {} {}\n", "Region", "Device", "Backup",
                           b.column("Live"), b.column("Paused"));
        for (const auto& r : p.regions)
            out << fmt::format("{:<24} {:<10} {:<7} {} {}\n", r.tag, r.device, r.backup,
                               b.column(r.bytes), b.column(r.pausedBytes));
    }
    if (!p.control.empty()) {
        out << fmt::format("\nMemory control ({} event{})\n", p.control.size(),
                           p.control.size() == 1 ? "" : "s");
        out << fmt::format("{:>10} {:<8} {:<4} {:<16} {:<8} {} {:<6} {:>9}  {}\n", "At", "Action",
                           "By", "Region", "Device", b.column("Bytes"), "Backup", "Took", "Result");
        for (const auto& e : p.control)
            out << fmt::format("{:>8.3f} s {:<8} {:<4} {:<16} {:<8} {} {:<6} {:>7.3f} s  {}\n",
                               e.timeS, e.action, e.origin, e.tag, e.device, b.column(e.bytes),
                               e.backup, e.durationS, e.ok ? "ok" : "FAILED: " + e.message);
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
void renderOutOfMemory(const core::ProcessTrace& p, const ByteText& b, std::ostream& out) {
    if (p.oom.empty()) return;
    const core::OomEvent& e = p.oom.front();
    std::string held = fmt::format("{} were held", b(e.liveBytes));
    if (!e.heldOn.empty() && e.heldOn != e.device) held += " on " + e.heldOn;
    if (e.deviceTotalBytes > 0 || e.deviceFreeBytes > 0)
        held += fmt::format(" ({} free on the device{})", b(e.deviceFreeBytes),
                            e.deviceTotalBytes ? " of " + b(e.deviceTotalBytes) : "");
    // An older trace names only time, device and size.
    const std::string where = e.site.empty() && e.file.empty() ? "" : " at " + oomWhere(e);
    if (e.heldOn.empty()) held.clear();
    out << fmt::format("Out of memory on {}: {} requested{}{}{}\n", e.device, b(e.requestedBytes),
                       where, held.empty() ? "" : " while " + held,
                       e.bySite.empty() ? "" : "; held by:");
    for (const auto& s : e.bySite)
        out << fmt::format("  {}  {}\n", b.column(s.bytes), shortSite(s.site));
    if (p.oomCount > 1)
        out << fmt::format("  ({} out-of-memory events in all: trace.json's oom lists them)\n",
                           p.oomCount);
    out << '\n';
}

// Which moment "Leaked" counts at, and what the teardown after it freed.
void renderLeakMoment(const core::ProcessTrace& p, const ByteText& b, std::ostream& out) {
    if (p.leakMoment == core::kLeakAtEnd) return;  // what is live at the end: no more to say
    std::string freed;
    for (const auto& [name, d] : p.devices)
        if (d.teardownFreeCount > 0)
            freed += fmt::format("{}{} {} in {} free{}", freed.empty() ? "" : ", ", name,
                                 b(d.teardownFreedBytes), d.teardownFreeCount,
                                 d.teardownFreeCount == 1 ? "" : "s");
    out << fmt::format("Leaks:    live {}, at {:.3f} s{}\n", leakWhen(p), p.leakTimeS,
                       freed.empty() ? "" : "; teardown then freed " + freed);
}

// Which sizes the table's unit words stand for, for its legend.
const char* unitsLegend(core::ByteUnits units) {
    switch (units) {
        case core::ByteUnits::Iec:
            return " · 1 KiB = 1,024 B (--bytes exact for bytes)";
        case core::ByteUnits::Si:
            return " · 1 kB = 1,000 B";
        case core::ByteUnits::Exact:
            break;
    }
    return "";
}

void renderDevices(const core::ProcessTrace& p, const ReportOptions& options, const ByteText& b,
                   std::ostream& out) {
    // Device rows, then the caching allocator's pools of a CUDA device beneath it
    // (PyTorch's active and reserved bytes, where the torch bridge was attached).
    out << fmt::format("\n{:<24} {} {:>10} {} {} {} {:>10} {:>10}\n", "Device", b.column("Peak"),
                       "Peak at", b.column("Leaked"), b.column("Allocated"), b.column("Freed"),
                       "Allocs", "Frees");
    auto row = [&](const std::string& name, const auto& d) {
        out << fmt::format("{:<24} {} {:>8.3f} s {} {} {} {:>10} {:>10}\n", name,
                           b.column(d.peakBytes), d.peakTimeS, b.column(d.leakedBytes),
                           b.column(d.allocatedBytes), b.column(d.freedBytes), d.allocCount,
                           d.freeCount);
    };
    for (const auto& [name, d] : p.devices) {
        row(d.source.empty() || name == "cpu" ? name : name + " (" + d.source + ")", d);
        for (const char* pool : {core::kPoolActive, core::kPoolReserved})
            if (auto it = d.pools.find(pool); it != d.pools.end())
                row("  " + std::string(pool), it->second);
    }
    out << fmt::format(
        "Peak: the most held at once, and when (seconds after tracking began) · Leaked: still "
        "held {}{}\n",
        leakWhen(p), unitsLegend(options.bytes));
}

void renderHotspots(const core::ProcessTrace& p, const std::string& name,
                    const core::DeviceTotals& d, const ReportOptions& options, const ByteText& b,
                    std::ostream& out) {
    const ReportOptions deviceOptions = optionsFor(p, name, options);
    auto rows = displayRows(p, name, deviceOptions);
    if (rows.empty()) return;
    const bool pools = !d.pools.empty();
    auto poolPeak = [&](const core::Hotspot& h, const char* pool) {
        auto it = h.pools.find(pool);
        return b.column(it == h.pools.end() ? 0 : it->second.peakBytes);
    };
    const GroupNames names = namesOf(options.groupBy);
    // An active or reserved sort on a device without those figures: by peak, said so.
    const std::string fallback =
        deviceOptions.sort != options.sort
            ? fmt::format(" ({} has no {} figures)", name,
                          options.sort == SortKey::Active ? "active" : "reserved")
            : "";
    out << fmt::format("\nTop {} {} on {} by {}{}\n", rows.size(), names.rows, name,
                       sortKeyName(deviceOptions.sort), fallback);
    out << fmt::format("{:>3} {} {} {:>8} {}", "#", b.column("Peak"), b.column("Allocated"),
                       "Count", b.column("Leaked"));
    if (pools) out << fmt::format(" {} {}", b.column("Active peak"), b.column("Reserv. peak"));
    out << "  " << names.column << '\n';
    // Below the row's figures, two columns left of its site.
    const size_t indent = 3 + 1 + b.width() + 1 + b.width() + 1 + 8 + 1 + b.width() +
                          (pools ? 2 * (b.width() + 1) : 0);
    size_t rank = 0;
    for (const DisplayRow& r : rows) {
        out << fmt::format("{:>3} {} {} {:>8} {}", ++rank, b.column(r.h.peakBytes),
                           b.column(r.h.allocatedBytes), r.h.count, b.column(r.h.leakedBytes));
        if (pools)
            out << fmt::format(" {} {}", poolPeak(r.h, core::kPoolActive),
                               poolPeak(r.h, core::kPoolReserved));
        out << "  " << r.lines[0] << '\n';
        for (size_t i = 1; i < r.lines.size(); ++i)
            out << std::string(indent, ' ') << r.lines[i] << '\n';
    }
    out << fmt::format(
        "Peak: what each {} held at {}'s peak (they add up to it) · Leaked: still "
        "held {}\n",
        names.one, name, leakWhen(p));
}

void renderProcess(const core::ProcessTrace& p, const ReportOptions& options, std::ostream& out) {
    const ByteText b(options.bytes);
    renderOutOfMemory(p, b, out);
    out << fmt::format("Command:  {}\n", joinCommand(p.command));
    std::string who = fmt::format("pid {}", p.pid);
    if (p.rank) who += fmt::format(" · rank {}", *p.rank);
    if (p.forked) who += fmt::format(" · forked from {}", p.ppid);
    out << fmt::format("Process:  {} · {} · {:.3f} s · {}\n", who, exitText(p), p.durationS,
                       p.complete ? "trace complete" : "trace INCOMPLETE: " + p.incompleteReason);
    renderLeakMoment(p, b, out);
    for (const auto& w : p.warnings) out << "Warning:  " << w << '\n';
    if (p.devices.empty()) {
        out << "\nNo tracked allocations (the program loaded no allocator memtool tracks).\n";
        return;
    }
    renderDevices(p, options, b, out);
    renderRegions(p, b, out);
    for (const auto& [name, d] : p.devices) renderHotspots(p, name, d, options, b, out);
}

// One line per process of a run: what each one was and the most it held.
void renderProcessList(const core::Trace& trace, std::ostream& out) {
    out << fmt::format("{} processes\n{:>8} {:>5}  {:<44} {}\n", trace.processes.size(), "pid",
                       "rank", "peak per device", "command");
    for (const core::ProcessTrace& p : trace.processes) {
        std::string peaks;
        for (const auto& [name, d] : p.devices)
            peaks += fmt::format("{}{} {}", peaks.empty() ? "" : ", ", name,
                                 core::formatBytes(d.peakBytes));
        std::string how = p.forked ? fmt::format("  (forked from {})", p.ppid) : "";
        if (p.exec) how += "  (exec'd)";
        out << fmt::format("{:>8} {:>5}  {:<44} {}{}\n", p.pid, rankText(p),
                           peaks.empty() ? "-" : peaks, joinCommand(p.command), how);
    }
    out << '\n';
}

}  // namespace

void renderTable(const core::Trace& trace, const ReportOptions& options, std::ostream& out) {
    if (trace.processes.size() > 1) renderProcessList(trace, out);
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        if (i > 0)
            out << "\n"
                << std::string(78, '-')
                << fmt::format("\nProcess {} of {}\n", i + 1, trace.processes.size());
        renderProcess(trace.processes[i], options, out);
    }
    if (trace.processes.empty()) out << "The trace holds no process.\n";
}

}  // namespace memtool::reporters
