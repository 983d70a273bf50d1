#include "reporters/TableReporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/SiteChoice.h"
#include "core/Units.h"
#include "reporters/ByteText.h"
#include "reporters/HotspotRows.h"
#include "reporters/ProcessSelection.h"
#include "reporters/RankSummary.h"

namespace memtool::reporters {

namespace {

// memtool attach: what Python could see from before the attach, listed apart.
void renderBeforeAttach(const core::ProcessTrace& p, std::ostream& out) {
    if (!p.attached) return;
    if (!p.liveAtAttachTimeS) {
        if (!p.liveAtAttachUnlisted.empty())
            out << fmt::format(
                "Before:   the storages from before the attach were not listed ({})\n",
                p.liveAtAttachUnlisted);
        return;
    }
    std::map<std::string, std::pair<uint64_t, size_t>> byDevice;  // bytes, storages
    for (const auto& s : p.liveAtAttach) {
        byDevice[s.device].first += s.bytes;
        ++byDevice[s.device].second;
    }
    std::string what;
    for (const auto& [device, figures] : byDevice)
        what += fmt::format("{}{} B in {} storage{} on {}", what.empty() ? "" : ", ",
                            core::groupDigits(figures.first), figures.second,
                            figures.second == 1 ? "" : "s", device);
    out << fmt::format(
        "Before:   {} from before the attach, as Python saw them {:.3f} s in (the trace's "
        "live_at_attach; not counted)\n",
        what.empty() ? "no storage" : what, *p.liveAtAttachTimeS);
}

// When "Leaked" was counted, as a legend says it.
const char* leakWhen(const core::ProcessTrace& p) {
    if (p.leakMoment == core::kLeakAtPython) return "when the interpreter began to finalize";
    if (p.leakMoment == core::kLeakAtExit) return "when main returned or exit was called";
    if (p.detached && p.attached) return "when memtool attach detached";
    if (p.detached) return "when the memtool.track block ended";
    return "at the end of the run";
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
        // "By" as wide as its longest ("policy"), 4 at least.
        size_t by = 4;
        for (const auto& e : p.control) by = std::max(by, e.origin.size());
        out << fmt::format("{:>10} {:<8} {:<{}} {:<16} {:<8} {} {:<6} {:>9}  {}\n", "At", "Action",
                           "By", by, "Region", "Device", b.column("Bytes"), "Backup", "Took",
                           "Result");
        for (const auto& e : p.control)
            out << fmt::format("{:>8.3f} s {:<8} {:<{}} {:<16} {:<8} {} {:<6} {:>7.3f} s  {}\n",
                               e.timeS, e.action, e.origin, by, e.tag, e.device, b.column(e.bytes),
                               e.backup, e.durationS, e.ok ? "ok" : "FAILED: " + e.message);
    }
}

// What the run's memory policy did to this process: when, which rule, the reading
// that crossed its threshold, and what came of it.
void renderPolicyActions(const core::Trace& trace, const core::ProcessTrace& p, const ByteText& b,
                         std::ostream& out) {
    std::vector<const core::PolicyAction*> mine;
    for (const core::PolicyAction& a : trace.policyActions)
        if (a.pid == p.pid) mine.push_back(&a);
    if (mine.empty()) return;
    out << fmt::format("\nPolicy actions ({})\n", mine.size());
    out << fmt::format("{:>10} {:<4} {:<8} {:<9} {} {} {:<28} {} {:>9}  {}\n", "At", "Rule",
                       "Device", "Metric", b.column("Reading"), b.column("Threshold"), "Do",
                       b.column("Moved"), "Took", "Result");
    for (const core::PolicyAction* a : mine)
        out << fmt::format("{:>8.3f} s {:<4} {:<8} {:<9} {} {} {:<28} {} {:>7.3f} s  {}\n",
                           a->timeS, a->rule, a->device, a->metric, b.column(a->readingBytes),
                           b.column(a->thresholdBytes), a->action, b.column(a->bytes), a->seconds,
                           a->ok ? "ok" : "FAILED: " + a->message);
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
    // The site reads as in the hotspot tables: from its frame.
    const std::string site = oomSite(p, e);
    const std::string where = site.empty() ? "" : " at " + site;
    if (e.heldOn.empty()) held.clear();
    out << fmt::format("Out of memory on {}: {} requested{}{}{}\n", e.device, b(e.requestedBytes),
                       where, held.empty() ? "" : " while " + held,
                       e.bySite.empty() ? "" : "; held by:");
    for (const auto& s : e.bySite)
        out << fmt::format("  {}  {}\n", b.column(s.bytes), shownSite(p, s.siteFrame, s.site));
    if (p.oomCount > 1)
        out << fmt::format("  ({} out-of-memory events in all: trace.json's oom lists them)\n",
                           p.oomCount);
    out << '\n';
}

// Which moment "Leaked" counts at, and what the teardown after it freed.
// "Held by:  cpu kept 1.43 MiB, model 512 B": the globals that held memory at the
// end, the largest three per device.
void renderHeldBy(const core::ProcessTrace& p, const ByteText& b, std::ostream& out) {
    constexpr size_t kShown = 3;
    std::string text;
    for (const auto& [name, d] : p.devices) {
        if (d.heldBy.empty()) continue;
        std::string device;
        for (size_t i = 0; i < d.heldBy.size() && i < kShown; ++i)
            device += fmt::format("{}{} {}", i ? ", " : "",
                                  d.heldBy[i].name.empty() ? "(unnamed)" : d.heldBy[i].name,
                                  b(d.heldBy[i].bytes));
        if (d.heldBy.size() > kShown)
            device += fmt::format(" and {} more", d.heldBy.size() - kShown);
        text += fmt::format("{}{}: {}", text.empty() ? "" : " · ", name, device);
    }
    if (!text.empty()) out << "Held by:  " << text << '\n';
}

void renderLeakMoment(const core::ProcessTrace& p, const ByteText& b, std::ostream& out) {
    if (p.leakMoment == core::kLeakAtEnd) return;  // what is live at the end: no more to say
    if (p.devices.empty()) return;                 // nothing was ever live
    std::string freed;
    for (const auto& [name, d] : p.devices)
        if (d.teardownFreeCount > 0)
            freed += fmt::format("{}{} {} in {} free{}", freed.empty() ? "" : ", ", name,
                                 b(d.teardownFreedBytes), d.teardownFreeCount,
                                 d.teardownFreeCount == 1 ? "" : "s");
    out << fmt::format("Leaks:    live {}, at {:.3f} s{}\n", leakWhen(p), p.leakTimeS,
                       freed.empty() ? "" : "; teardown then freed " + freed);
    if (p.leakMoment == core::kLeakAtPython && !p.heldAtExitKnown)
        out << "          (the program's globals were not listed: Leaked is all that was live)\n";
    renderHeldBy(p, b, out);
}

// "Held", a column of its own where the program's globals were listed; `cell` is
// already sized to the column.
std::string heldColumn(const core::ProcessTrace& p, const std::string& cell) {
    return p.heldAtExitKnown ? " " + cell : "";
}

// What Leaked (and Held at exit) mean, for a table's legend.
std::string leakLegend(const core::ProcessTrace& p) {
    if (!p.heldAtExitKnown) return fmt::format("Leaked: still held {}", leakWhen(p));
    return fmt::format(
        "Leaked: still held {} by nothing the program's globals reach · Held: by "
        "what they reach",
        leakWhen(p));
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
    out << fmt::format("\n{:<24} {} {:>10} {}{} {} {} {:>10} {:>10}\n", "Device", b.column("Peak"),
                       "Peak at", b.column("Leaked"), heldColumn(p, b.column("Held")),
                       b.column("Allocated"), b.column("Freed"), "Allocs", "Frees");
    auto row = [&](const std::string& name, const auto& d) {
        out << fmt::format("{:<24} {} {:>8.3f} s {}{} {} {} {:>10} {:>10}\n", name,
                           b.column(d.peakBytes), d.peakTimeS, b.column(d.leakedBytes),
                           heldColumn(p, b.column(d.heldAtExitBytes)), b.column(d.allocatedBytes),
                           b.column(d.freedBytes), d.allocCount, d.freeCount);
    };
    for (const auto& [name, d] : p.devices) {
        row(d.source.empty() || name == "cpu" ? name : name + " (" + d.source + ")", d);
        for (const char* pool :
             {core::kPoolActive, core::kPoolReserved, core::kPoolGraphs, core::kPoolGraphsActive})
            if (auto it = d.pools.find(pool); it != d.pools.end())
                row("  " + std::string(pool), it->second);
    }
    out << fmt::format(
        "Peak: the most held at once, and when (seconds after tracking began) · {}{}\n",
        leakLegend(p), unitsLegend(options.bytes));
}

// The caching allocator's private pools, per device: what each held at its
// most, and what one pool shared by all of them would have needed at most (the
// most their blocks held at once, cuda:N.graphs_active's peak).
void renderGraphPools(const core::ProcessTrace& p, const ByteText& b, std::ostream& out) {
    std::map<std::string, std::vector<const core::GraphPool*>> byDevice;
    for (const core::GraphPool& g : p.graphPools) byDevice[g.device].push_back(&g);
    for (const auto& [device, pools] : byDevice) {
        out << fmt::format("\nGraph pools on {} ({} private pool{} of the caching allocator)\n",
                           device, pools.size(), pools.size() == 1 ? "" : "s");
        out << fmt::format("{:<6} {:<24} {} {} {} {}\n", "Pool", "PyTorch id",
                           b.column("Reserv. peak"), b.column("Active peak"),
                           b.column("Reserv. end"), b.column("Active end"));
        uint64_t sum = 0;
        for (const core::GraphPool* g : pools) {
            out << fmt::format("#{:<5} {:<24} {} {} {} {}\n", g->number,
                               fmt::format("({}, {})", g->idFirst, g->idSecond),
                               b.column(g->reservedPeakBytes), b.column(g->activePeakBytes),
                               b.column(g->reservedEndBytes), b.column(g->activeEndBytes));
            for (const core::GraphPool::Site& site : g->sites)
                out << fmt::format("       {} allocated at {}\n", b(site.allocatedBytes),
                                   site.site);
            sum += g->reservedPeakBytes;
        }
        const auto d = p.devices.find(device);
        if (pools.size() < 2 || d == p.devices.end()) continue;
        const auto union_ = d->second.pools.find(core::kPoolGraphsActive);
        if (union_ == d->second.pools.end()) continue;
        const uint64_t together = union_->second.peakBytes;
        out << fmt::format(
            "Sharing one pool: the {} pools held {} at their peaks; their blocks held at most {} "
            "at once, so one shared pool would need {} less\n",
            pools.size(), b(sum), b(together), b(sum > together ? sum - together : 0));
    }
}

void renderHotspots(const core::ProcessTrace& p, const std::string& name,
                    const core::DeviceTotals& d, const ReportOptions& options, const ByteText& b,
                    std::ostream& out) {
    const ReportOptions deviceOptions = optionsFor(p, name, options);
    HotspotRest rest;
    const std::vector<HotspotRow> rows = hotspotRows(p, name, deviceOptions, &rest);
    if (rows.empty()) return;
    const bool pools = !d.pools.empty();
    auto poolPeak = [&](const std::map<std::string, core::HotspotFigures>& of, const char* pool) {
        auto it = of.find(pool);
        return b.column(it == of.end() ? 0 : it->second.peakBytes);
    };
    const GroupNames names = groupNames(options.groupBy);
    // An active or reserved sort on a device without those figures: by peak, said so.
    const std::string fallback =
        deviceOptions.sort != options.sort
            ? fmt::format(" ({} has no {} figures)", name,
                          options.sort == SortKey::Active ? "active" : "reserved")
            : "";
    out << fmt::format("\nTop {} {} on {} by {}{}\n", rows.size(), rowsNamed(names, rows.size()),
                       name, sortKeyName(deviceOptions.sort), fallback);
    out << fmt::format("{:>3} {} {} {:>8} {}{}", "#", b.column("Peak"), b.column("Allocated"),
                       "Count", b.column("Leaked"), heldColumn(p, b.column("Held")));
    if (pools) out << fmt::format(" {} {}", b.column("Active peak"), b.column("Reserv. peak"));
    out << "  " << names.column << '\n';
    // Below the row's figures, two columns left of its site.
    const size_t indent = 3 + 1 + b.width() + 1 + b.width() + 1 + 8 + 1 + b.width() +
                          (pools ? 2 * (b.width() + 1) : 0) +
                          (p.heldAtExitKnown ? b.width() + 1 : 0);
    size_t rank = 0;
    for (const HotspotRow& r : rows) {
        const core::Hotspot& h = r.figures;
        out << fmt::format("{:>3} {} {} {:>8} {}{}", ++rank, b.column(h.peakBytes),
                           b.column(h.allocatedBytes), h.count, b.column(h.leakedBytes),
                           heldColumn(p, b.column(h.heldAtExitBytes)));
        if (pools)
            out << fmt::format(" {} {}", poolPeak(h.pools, core::kPoolActive),
                               poolPeak(h.pools, core::kPoolReserved));
        const std::vector<std::string> lines = rowLines(p, r);
        out << "  " << lines[0] << '\n';
        for (size_t i = 1; i < lines.size(); ++i)
            out << std::string(indent, ' ') << lines[i] << '\n';
    }
    if (rest.rows > 0) {
        // The rows --top left out, in one line: the table adds up to the device's figures.
        const core::HotspotFigures& f = rest.figures;
        out << fmt::format("{:>3} {} {} {:>8} {}{}", "", b.column(f.peakBytes),
                           b.column(f.allocatedBytes), f.count, b.column(f.leakedBytes),
                           heldColumn(p, b.column(f.heldAtExitBytes)));
        if (pools)
            out << fmt::format(" {} {}", poolPeak(rest.pools, core::kPoolActive),
                               poolPeak(rest.pools, core::kPoolReserved));
        out << fmt::format("  ({} other {})\n", rest.rows, rowsNamed(names, rest.rows));
    }
    out << fmt::format("Peak: what each {} held at {}'s peak (they add up to it) · {}\n", names.one,
                       name, leakLegend(p));
    const bool unnamed = std::any_of(rows.begin(), rows.end(),
                                     [](const HotspotRow& r) { return r.group == kNoModuleGroup; });
    if (options.groupBy == GroupBy::Module && unnamed && !namesModuleInstances(p))
        out << kNoModuleGroup
            << " holds the backward pass too: `memtool run --modules` (or "
               "memtool.track(modules=True)) names the module instance each backward "
               "allocation came from\n";
}

void renderProcess(const core::Trace& trace, const core::ProcessTrace& p,
                   const ReportOptions& options, std::ostream& out) {
    const ByteText b(options.bytes);
    renderOutOfMemory(p, b, out);
    out << fmt::format("Command:  {}\n", commandLine(p));
    std::string who = fmt::format("pid {}", p.pid);
    if (p.rank) who += fmt::format(" · rank {}", *p.rank);
    if (const std::string parent = parentText(trace, p); !parent.empty()) who += " · " + parent;
    out << fmt::format("Process:  {} · {} · {:.3f} s · {}\n", who, exitText(p), p.durationS,
                       p.complete ? "trace complete" : "trace INCOMPLETE: " + p.incompleteReason);
    renderLeakMoment(p, b, out);
    if (p.earlierFrees)
        out << fmt::format("Earlier:  {} free{} of blocks allocated before {} (not counted)\n",
                           p.earlierFrees, p.earlierFrees == 1 ? "" : "s",
                           p.attached ? "memtool attached" : "memtool.track began");
    renderBeforeAttach(p, out);
    for (const auto& w : p.warnings) out << "Warning:  " << w << '\n';
    if (p.devices.empty()) {
        out << '\n' << noAllocationsText(p) << '\n';
        return;
    }
    renderDevices(p, options, b, out);
    renderGraphPools(p, b, out);
    renderRegions(p, b, out);
    renderPolicyActions(trace, p, b, out);
    for (const auto& [name, d] : p.devices) renderHotspots(p, name, d, options, b, out);
}

// Its peak per device, each with its time on the shared clock.
std::string peaksText(const RankSummary& s, const core::ProcessTrace& p, const ByteText& b) {
    std::string peaks;
    for (const auto& [name, d] : p.devices)
        peaks += fmt::format("{}{} {} @{:.3f}s", peaks.empty() ? "" : ", ", name, b(d.peakBytes),
                             sharedTimeS(s, p, d.peakTimeS));
    return peaks.empty() ? "-" : peaks;
}

uint64_t leakedBytes(const core::ProcessTrace& p) {
    uint64_t leaked = 0;
    for (const auto& [name, d] : p.devices) leaked += d.leakedBytes;
    return leaked;
}

// Where it came from, and that its trace is incomplete.
std::string howText(const core::Trace& trace, const core::ProcessTrace& p) {
    const std::string parent = parentText(trace, p);
    std::string how = parent.empty() ? "" : "  (" + parent + ")";
    if (p.exec) how += "  (exec'd)";
    // A worker the OOM killer took shows in the list (its exit), not only in its section.
    if (!p.exitSignal && !p.complete) how += "  (trace incomplete)";
    return how;
}

// The rank holding most per kind of device, the spread, and each host's combined peak.
void renderRankLines(const core::Trace& trace, const RankSummary& s, const ByteText& b,
                     std::ostream& out) {
    for (const RankSpread& r : s.spreads)
        out << "Largest:  "
            << rankSpreadText(r, b,
                              fmt::format(" (pid {})", trace.processes[r.largest.process].pid), "x")
            << (r.spread ? "" : " (it held nothing)") << '\n';
    for (const HostPeak& h : s.hostPeaks) out << "Host:     " << hostPeakText(h, b) << '\n';
}

// One line per process of a run (or of several traces): what each one was, the
// most it held and when, on one clock; then the ranks' figures.
void renderProcessList(const core::Trace& trace, const ReportOptions& options, std::ostream& out) {
    const RankSummary s = summarizeRanks(trace);
    const ByteText b(options.bytes);
    const bool hosts = s.hosts > 1;
    out << fmt::format("{} processes{}{} · peak times in seconds from {}\n", trace.processes.size(),
                       s.ranks ? fmt::format(", {} rank{}", s.ranks, s.ranks == 1 ? "" : "s") : "",
                       hosts ? fmt::format(" on {} hosts", s.hosts) : "",
                       s.zeroUnixS ? "the first start" : "each one's start");
    out << fmt::format("{:>8} {:>5}  {}{:<44} {:>10}  {:<18} {}\n", "pid", "rank",
                       hosts ? fmt::format("{:<16} ", "host") : "", "peak per device @time",
                       "leaked", "exit", "command");
    for (const core::ProcessTrace& p : trace.processes) {
        // Its section shows the whole command; here a forkserver's worker's
        // (a line of Python and its sys.path) would push the rest off the screen.
        out << fmt::format("{:>8} {:>5}  {}{:<44} {:>10}  {:<18} {}{}\n", p.pid, rankText(p),
                           hosts ? fmt::format("{:<16} ", shortText(p.host, 16)) : "",
                           peaksText(s, p, b), b(leakedBytes(p)), exitText(p), shortCommand(p, 60),
                           howText(trace, p));
    }
    renderRankLines(trace, s, b, out);
    out << '\n';
}

}  // namespace

void renderTable(const core::Trace& trace, const ReportOptions& options, std::ostream& out) {
    if (trace.processes.size() > 1) renderProcessList(trace, options, out);
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        if (i > 0)
            out << "\n"
                << std::string(78, '-')
                << fmt::format("\nProcess {} of {}\n", i + 1, trace.processes.size());
        renderProcess(trace, trace.processes[i], options, out);
    }
    if (trace.processes.empty()) out << "The trace holds no process.\n";
}

}  // namespace memtool::reporters
