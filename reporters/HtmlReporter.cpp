#include "reporters/HtmlReporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/FrameClassifier.h"
#include "core/Units.h"
#include "reporters/Check.h"
#include "reporters/EventViews.h"
#include "reporters/HotspotRows.h"
#include "reporters/HtmlAssets.h"
#include "reporters/HtmlMoments.h"
#include "reporters/Markup.h"
#include "reporters/ProcessSelection.h"
#include "reporters/RankSummary.h"
#include "reporters/StackTree.h"
#include "reporters/TimelineMarks.h"
#include "trace/RecordedSources.h"

namespace memtool::reporters {

namespace {

using nlohmann::json;

// Text from the trace (commands, paths, function names, source code) is input.
std::string esc(const std::string& text) { return escapeMarkup(text); }

// A table cell sorted by its number, shown as bytes.
std::string bytesCell(uint64_t bytes) {
    return fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", bytes, core::formatBytes(bytes));
}

std::string countCell(uint64_t n) {
    return fmt::format("<td class=\"num\" data-v=\"{0}\">{0}</td>", n);
}

// Column headers; "num" columns sort as numbers, the others as text.
std::string headerRow(const std::vector<std::pair<std::string, bool>>& columns) {
    std::string row = "<tr>";
    for (const auto& [name, numeric] : columns)
        row += fmt::format("<th{}>{}</th>", numeric ? " class=\"num\"" : "", esc(name));
    return row + "</tr>";
}

// ---- the charts' data ------------------------------------------------------------

// Frames the flame graphs name, once each: [label, text, kind]; kind: "py" the
// user's Python, "pylib" library Python, "c" the user's native code, "clib"
// library native code, "none" no stack.
class FrameNames {
public:
    size_t id(const StackNode& n) {
        auto [it, fresh] = ids_.try_emplace(n.text, names_.size());
        if (fresh) names_.push_back(json::array({n.label, n.text, kind(n.frame)}));
        return it->second;
    }
    json release() && { return std::move(names_); }

private:
    static const char* kind(const core::Frame* f) {
        if (!f) return "none";
        if (f->isPython()) return f->user ? "py" : "pylib";
        return f->user ? "c" : "clib";
    }
    std::map<std::string, size_t> ids_;
    json names_ = json::array();
};

// [name id, bytes, [children...]]; the root's name id is -1.
json treeToJson(const StackNode& n, FrameNames& names, bool root) {
    json children = json::array();
    for (const StackNode& c : n.children) children.push_back(treeToJson(c, names, false));
    return json::array({root ? -1 : static_cast<int64_t>(names.id(n)), n.bytes, children});
}

json peakToJson(const core::PoolTotals& d) {
    return {
        {"bytes", d.peakBytes}, {"time_s", d.peakTimeS}, {"text", core::formatBytes(d.peakBytes)}};
}

json processData(const core::Trace& trace, const core::ProcessTrace& p,
                 const core::ProcessEvents* events) {
    json devices = json::object();
    for (const auto& [name, d] : p.devices) {
        devices[name] = peakToJson(d);
        for (const auto& [pool, totals] : d.pools) devices[name + "." + pool] = peakToJson(totals);
    }
    json timeline = json::object();
    for (const auto& [name, series] : p.timeline) {
        json points = json::array();
        for (const auto& point : series.points)
            points.push_back(json::array({point.timeS, point.bytes}));
        timeline[name] = std::move(points);
    }
    json marks = json::array();
    // The device as memtool run polled it, beside the process's own bytes.
    json polled = json::object();
    for (const auto& [name, series] : polledSeries(trace, p)) {
        if (name.size() < 5 || name.compare(name.size() - 5, 5, ".used") != 0) continue;
        json points = json::array();
        for (const auto& point : series.points)
            points.push_back(json::array({point.timeS, point.bytes}));
        polled[name.substr(0, name.size() - 5)] = std::move(points);
    }
    for (const TimelineMark& m : timelineMarks(p, &trace))
        marks.push_back({{"time_s", m.timeS},
                         {"kind", m.kind},
                         {"device", m.device},
                         {"label", m.label},
                         {"failed", m.failed}});
    FrameNames names;
    json flames = json::object();
    // Each with native frames and with Python frames alone ("python:" before the
    // metric): the page's switch picks one without re-recording.
    for (const auto& [name, d] : p.devices)
        for (Metric metric : {Metric::Peak, Metric::Allocated}) {
            flames[name][metricName(metric)] = treeToJson(stackTree(p, name, metric), names, true);
            flames[name][std::string("python:") + metricName(metric)] =
                treeToJson(stackTree(p, name, metric, StackView::PythonOnly), names, true);
        }
    json data = {{"devices", devices}, {"timeline", timeline},
                 {"marks", marks},     {"polled", polled},
                 {"flames", flames},   {"names", std::move(names).release()}};
    if (events) data["moments"] = momentsData(p, *events);
    return data;
}

// JSON inside a <script> element: "</script>" would end it early and "<!--" change
// how the browser reads it, so no '<' is left as it is (JSON reads \u003c the same).
std::string scriptSafe(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '<')
            out += "\\u003c";
        else
            out += c;
    }
    return out;
}

// ---- the page, section by section ----------------------------------------------

void header(const core::ProcessTrace& p, size_t index, std::ostream& out) {
    const std::string command = commandLine(p);
    if (index == 0)
        out << "<h1>" << esc(command) << "</h1>\n";
    else
        out << fmt::format("<h1 class=\"child\">Child process {}: {}</h1>\n", p.pid, esc(command));
    out << "<p class=\"facts\">"
        << esc(fmt::format("pid {} · {} · {:.3f} s", p.pid, exitText(p), p.durationS)) << " · "
        << (p.complete
                ? "<span class=\"ok\">trace complete</span>"
                : "<span class=\"bad\">trace INCOMPLETE: " + esc(p.incompleteReason) + "</span>")
        << "</p>\n";
    for (const auto& w : p.warnings) out << "<p class=\"warning\">Warning: " << esc(w) << "</p>\n";
}

// Below the device table: the globals that held memory at the end, per device.
void heldByList(const core::ProcessTrace& p, std::ostream& out) {
    for (const auto& [name, d] : p.devices) {
        if (d.heldBy.empty()) continue;
        out << "<p class=\"held-by\">Held at exit on " << esc(name) << " by ";
        for (size_t i = 0; i < d.heldBy.size(); ++i)
            out << (i ? ", " : "") << "<code>"
                << esc(d.heldBy[i].name.empty() ? "(unnamed)" : d.heldBy[i].name) << "</code> "
                << esc(core::formatBytes(d.heldBy[i].bytes));
        out << "</p>\n";
    }
}

void deviceTable(const core::ProcessTrace& p, std::ostream& out) {
    std::vector<std::pair<std::string, bool>> columns{
        {"Device", false}, {"Peak", true}, {"At", true}, {"Leaked", true}};
    // Held at exit: a column where the program's globals were listed (else unknown).
    const bool held = p.heldAtExitKnown;
    if (held) columns.push_back({"Held at exit", true});
    for (const char* c : {"Allocated", "Freed", "Allocs", "Frees"}) columns.push_back({c, true});
    out << "<h2>Devices</h2>\n<table class=\"devices\">\n<thead>" << headerRow(columns)
        << "</thead>\n<tbody>\n";
    auto row = [&](const std::string& name, const std::string& cls, const core::PoolTotals& d) {
        out << fmt::format(
            "<tr class=\"{}\"><td>{}</td>{}<td class=\"num\">{:.3f} s</td>{}{}{}{}{}{}</tr>\n", cls,
            esc(name), bytesCell(d.peakBytes), d.peakTimeS, bytesCell(d.leakedBytes),
            held ? bytesCell(d.heldAtExitBytes) : "", bytesCell(d.allocatedBytes),
            bytesCell(d.freedBytes), countCell(d.allocCount), countCell(d.freeCount));
    };
    for (const auto& [name, d] : p.devices) {
        row(d.source.empty() || name == "cpu" ? name : name + " (" + d.source + ")", "device", d);
        for (const auto& [pool, totals] : d.pools) row(pool, "pool", totals);
    }
    out << "</tbody></table>\n";
    heldByList(p, out);
}

void timelineSection(const core::ProcessTrace& p, size_t index, std::ostream& out) {
    out << "<h2>Timeline</h2>\n";
    if (p.timeline.empty()) {
        out << "<p class=\"none\">This trace has no timeline (it was written by an older "
               "memtool).</p>\n";
        return;
    }
    out << "<p class=\"hint\">Live bytes over time, seconds since the process's collector "
           "connected. "
           "Hover for the figures at a moment.</p>\n";
    for (const auto& [name, d] : p.devices)
        if (p.timeline.count(name))
            out << fmt::format(
                "<figure class=\"timeline\" data-process=\"{}\" data-device=\"{}\">"
                "<figcaption>{}</figcaption></figure>\n",
                index, esc(name), esc(name));
}

void flameSection(const core::ProcessTrace& p, size_t index, std::ostream& out) {
    out << "<h2>Flame graphs</h2>\n<p class=\"hint\">Outermost frame at the top. Click a frame "
           "to zoom in, the top row to zoom out; hover for its bytes.</p>\n";
    out << fmt::format(
        "<p class=\"flame-view\"><label><input type=\"checkbox\" class=\"python-only\" "
        "data-process=\"{}\"> Python frames only</label> (unchecked: with native frames; runs of "
        "unnamed native frames are one frame naming their library)</p>\n",
        index);
    for (const auto& [name, d] : p.devices) {
        out << fmt::format(
            "<figure class=\"flame\" data-process=\"{0}\" data-device=\"{1}\" data-metric=\"peak\">"
            "<figcaption>{1}: held at the peak ({2})</figcaption></figure>\n"
            "<figure class=\"flame\" data-process=\"{0}\" data-device=\"{1}\" "
            "data-metric=\"allocated\"><figcaption>{1}: allocated over the run ({3})</figcaption>"
            "</figure>\n",
            index, esc(name), core::formatBytes(d.peakBytes), core::formatBytes(d.allocatedBytes));
    }
}

// A row's site as the table shows it: the site, then every frame of its
// (largest) stack in a <details> that opens on click, and below it the frames
// --depth shows ("via ..."); a grouped row names its group.
std::string siteCell(const core::ProcessTrace& p, const HotspotRow& row) {
    const std::vector<std::string> lines = rowLines(p, row);
    const std::string siteText = esc(lines[0]);
    std::string cell = fmt::format("<td class=\"site\" data-v=\"{}\">", siteText);
    if (!row.site) return cell + siteText + "</td>";
    cell += "<details><summary>" + siteText + "</summary><ol>";
    for (uint32_t id : row.largest->frames)
        cell += fmt::format("<li{}>{}</li>", id == *row.site ? " class=\"at\"" : "",
                            esc(core::formatFrame(p.frames.at(id))));
    cell += "</ol></details>";
    for (size_t i = 1; i <= row.below.size(); ++i)
        cell += "<div class=\"via\">" + esc(lines[i]) + "</div>";
    return cell + "</td>";
}

// A row's active and reserved peaks.
std::string poolCells(const std::map<std::string, core::HotspotFigures>& pools) {
    std::string cells;
    for (const char* pool : {core::kPoolActive, core::kPoolReserved}) {
        auto it = pools.find(pool);
        cells += bytesCell(it == pools.end() ? 0 : it->second.peakBytes);
    }
    return cells;
}

void hotspotTables(const core::ProcessTrace& p, const HtmlOptions& options, std::ostream& out) {
    const GroupNames names = groupNames(options.hotspots.groupBy);
    out << "<h2>Hotspots</h2>\n<p class=\"hint\">Per " << names.one
        << ": what it held at the device's peak, allocated over the run, and still held when the "
           "program's own code finished. Click a heading to sort"
        << (options.hotspots.groupBy == GroupBy::Site ? ", a site for its stack" : "") << ".</p>\n";
    for (const auto& [name, d] : p.devices) {
        const ReportOptions deviceOptions = optionsFor(p, name, options.hotspots);
        HotspotRest rest;
        const std::vector<HotspotRow> rows = hotspotRows(p, name, deviceOptions, &rest);
        if (rows.empty()) continue;
        const bool pools = !d.pools.empty();
        out << fmt::format("<h3>{} <span class=\"sub\">top {} {} by {}</span></h3>\n", esc(name),
                           rows.size(), rowsNamed(names, rows.size()),
                           sortKeyName(deviceOptions.sort));
        std::vector<std::pair<std::string, bool>> columns{{"#", true},     {names.column, false},
                                                          {"Peak", true},  {"Allocated", true},
                                                          {"Count", true}, {"Leaked", true}};
        if (p.heldAtExitKnown) columns.push_back({"Held at exit", true});
        if (pools) {
            columns.push_back({"Active peak", true});
            columns.push_back({"Reserved peak", true});
        }
        out << "<table class=\"hotspots sortable\" data-device=\"" << esc(name) << "\">\n<thead>"
            << headerRow(columns) << "</thead>\n<tbody>\n";
        size_t rank = 0;
        for (const HotspotRow& row : rows) {
            const core::Hotspot& h = row.figures;
            out << "<tr>" << countCell(++rank) << siteCell(p, row) << bytesCell(h.peakBytes)
                << bytesCell(h.allocatedBytes) << countCell(h.count) << bytesCell(h.leakedBytes);
            if (p.heldAtExitKnown) out << bytesCell(h.heldAtExitBytes);
            if (pools) out << poolCells(h.pools);
            out << "</tr>\n";
        }
        out << "</tbody>";
        if (rest.rows > 0) {
            // The rows --top left out, summed (outside the sorted body): the table adds up.
            const core::HotspotFigures& f = rest.figures;
            out << "\n<tfoot><tr class=\"rest\"><td></td><td>"
                << esc(fmt::format("({} other {})", rest.rows, rowsNamed(names, rest.rows)))
                << "</td>" << bytesCell(f.peakBytes) << bytesCell(f.allocatedBytes)
                << countCell(f.count) << bytesCell(f.leakedBytes);
            if (p.heldAtExitKnown) out << bytesCell(f.heldAtExitBytes);
            if (pools) out << poolCells(rest.pools);
            out << "</tr></tfoot>";
        }
        out << "</table>\n";
    }
}

// The rows `memtool report --lines` shows, with their code, in file and line order.
void lineTable(const core::ProcessTrace& p, const HtmlOptions& options, std::ostream& out) {
    const LineReportOptions& filter = options.lines;
    std::vector<const core::LineStat*> rows;
    for (const core::LineStat& l : p.lines) {
        if (!filter.file.empty() && !l.file.ends_with(filter.file)) continue;
        if (filter.file.empty() && !filter.allFiles && core::isLibraryPythonFile(l.file)) continue;
        if (!filter.function.empty() && l.function != filter.function) continue;
        rows.push_back(&l);
    }
    if (rows.empty()) return;
    out << "<h2>Lines</h2>\n<p class=\"hint\">Per source line: the most the device held while it "
           "ran, and what was allocated while it was on the stack (inclusive) or as its innermost "
           "line (self).</p>\n<table class=\"lines sortable\">\n<thead>"
        << headerRow({{"Device", false},
                      {"File", false},
                      {"Line", true},
                      {"Function", false},
                      {"Peak", true},
                      {"Allocated", true},
                      {"Self", true},
                      {"Count", true},
                      {"Code", false}})
        << "</thead>\n<tbody>\n";
    std::map<std::string, SourceText> sources;
    for (const core::LineStat* l : rows) {
        auto [it, fresh] = sources.try_emplace(l->file);
        if (fresh) it->second = lineSource(filter, p, l->file);
        const auto line = it->second.lines.find(l->line);
        const std::string code = line == it->second.lines.end() ? "" : line->second;
        out << "<tr><td>" << esc(l->device) << "</td><td title=\"" << esc(l->file) << "\">"
            << esc(l->file.substr(l->file.rfind('/') == std::string::npos ? 0
                                                                          : l->file.rfind('/') + 1))
            << "</td>" << countCell(l->line) << "<td>" << esc(l->function) << "</td>"
            << bytesCell(l->peakBytes) << bytesCell(l->allocatedBytes)
            << bytesCell(l->selfAllocatedBytes) << countCell(l->count) << "<td class=\"code\">"
            << esc(code) << "</td></tr>\n";
    }
    out << "</tbody></table>\n";
    for (const auto& [file, source] : sources)
        if (source.changed) out << "<p class=\"hint\">" << esc(changedSourceNote(file)) << "</p>\n";
}

void regionSections(const core::ProcessTrace& p, std::ostream& out) {
    if (!p.regions.empty()) {
        out << "<h2>Regions</h2>\n<table class=\"regions sortable\">\n<thead>"
            << headerRow({{"Region", false},
                          {"Device", false},
                          {"Backup", false},
                          {"Live", true},
                          {"Paused", true}})
            << "</thead>\n<tbody>\n";
        for (const auto& r : p.regions)
            out << "<tr><td>" << esc(r.tag) << "</td><td>" << esc(r.device) << "</td><td>"
                << esc(r.backup) << "</td>" << bytesCell(r.bytes) << bytesCell(r.pausedBytes)
                << "</tr>\n";
        out << "</tbody></table>\n";
    }
    if (!p.control.empty()) {
        out << "<h2>Memory control</h2>\n<table class=\"control sortable\">\n<thead>"
            << headerRow({{"At", true},
                          {"Action", false},
                          {"By", false},
                          {"Region", false},
                          {"Device", false},
                          {"Bytes", true},
                          {"Backup", false},
                          {"Took", true},
                          {"Result", false}})
            << "</thead>\n<tbody>\n";
        for (const auto& e : p.control)
            out << fmt::format(
                "<tr><td class=\"num\" data-v=\"{0}\">{0:.3f} "
                "s</td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td>{5}<td>{6}</td><td "
                "class=\"num\" data-v=\"{7}\">{7:.3f} s</td><td class=\"{8}\">{9}</td></tr>\n",
                e.timeS, esc(e.action), esc(e.origin), esc(e.tag), esc(e.device),
                bytesCell(e.bytes), esc(e.backup), e.durationS, e.ok ? "ok" : "bad",
                e.ok ? "ok" : "FAILED: " + esc(e.message));
        out << "</tbody></table>\n";
    }
}

// Out-of-memory events, right after the devices: what a reader of such a run came
// for (they used to come last, under the regions).
void oomSection(const core::ProcessTrace& p, std::ostream& out) {
    if (!p.oom.empty()) {
        out << "<h2>Out of memory</h2>\n<table class=\"oom sortable\">\n<thead>"
            << headerRow({{"At", true},
                          {"Device", false},
                          {"Requested", true},
                          {"At site", false},
                          {"Held", true},
                          {"Held by", false}})
            << "</thead>\n<tbody>\n";
        // An older trace's event has no site and no held bytes: empty cells.
        for (const auto& e : p.oom) {
            std::string heldBy;
            for (const auto& s : e.bySite)
                heldBy += fmt::format("<div>{} {}</div>", core::formatBytes(s.bytes),
                                      esc(shownSite(p, s.siteFrame, s.site)));
            // Held on a pool of the device (PyTorch's active blocks): said so.
            const std::string held =
                e.heldOn.empty() ? "<td></td>"
                                 : fmt::format("<td class=\"num\" data-v=\"{}\">{}{}</td>",
                                               e.liveBytes, core::formatBytes(e.liveBytes),
                                               e.heldOn == e.device ? "" : " on " + esc(e.heldOn));
            out << fmt::format(
                "<tr><td class=\"num\" data-v=\"{0}\">{0:.3f} s</td><td>{1}</td>{2}"
                "<td class=\"site\">{3}</td>{4}<td class=\"site\">{5}</td></tr>\n",
                e.timeS, esc(e.device), bytesCell(e.requestedBytes), esc(oomSite(p, e)), held,
                heldBy);
        }
        out << "</tbody></table>\n";
    }
}

// A trace of several processes opens with one row each, linked to its section: a
// page of ranks or workers otherwise reads as one long scroll. Peak times stand on
// one clock, the first process's start its zero.
void processOverview(const core::Trace& trace, const RankSummary& s, std::ostream& out) {
    if (trace.processes.size() < 2) return;
    out << "<h2>Processes</h2>\n<table class=\"processes sortable\">\n<thead>"
        << headerRow({{"Process", false},
                      {"Rank", true},
                      {"Host", false},
                      {"Command", false},
                      {"Ended", false},
                      {"Peaks (s from the first start)", false},
                      {"OOMs", true}})
        << "</thead>\n<tbody>\n";
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const core::ProcessTrace& p = trace.processes[i];
        std::string peaks;
        for (const auto& [name, d] : p.devices)
            peaks += fmt::format("{}{} {} at {:.3f} s", peaks.empty() ? "" : ", ", name,
                                 core::formatBytes(d.peakBytes), sharedTimeS(s, p, d.peakTimeS));
        // The first is the program memtool ran, unless its parent is here too (several
        // traces read together stand in rank order).
        const bool launched =
            i == 0 && std::none_of(trace.processes.begin(), trace.processes.end(),
                                   [&](const core::ProcessTrace& q) { return q.pid == p.ppid; });
        const char* role = launched ? " (launched)" : p.forked ? " (fork)" : "";
        out << fmt::format(
            "<tr><td><a href=\"#process-{}\">pid {}</a>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td><td>{}</td>{}</tr>\n",
            i, p.pid, role, esc(rankText(p)), esc(p.host), esc(commandLine(p)), esc(exitText(p)),
            esc(peaks), countCell(p.oom.size()));
    }
    out << "</tbody></table>\n";
}

// The ranks' figures, and each device two processes used as one chart on one clock.
void ranksSection(const core::Trace& trace, const RankSummary& s, std::ostream& out) {
    if (trace.processes.size() < 2) return;
    std::map<std::string, size_t> users;
    for (const core::ProcessTrace& p : trace.processes)
        for (const auto& [name, series] : p.timeline)
            if (p.devices.count(name)) ++users[name];
    out << "<h2>All processes on one clock</h2>\n<ul class=\"ranks\">\n";
    const auto bytes = [](uint64_t n) { return core::formatBytes(n); };
    for (const RankSpread& r : s.spreads)
        out << fmt::format(
            "<li class=\"rank-spread\" data-kind=\"{}\" data-spread=\"{}\">{}</li>\n", r.kind,
            r.spread ? fmt::format("{:.4f}", *r.spread) : "",
            esc(rankSpreadText(r, bytes, "", "×")));
    for (const HostPeak& h : s.hostPeaks)
        out << fmt::format("<li class=\"host-peak\" data-device=\"{}\" data-bytes=\"{}\">{}</li>\n",
                           esc(h.device), h.combinedBytes, esc(hostPeakText(h, bytes)));
    out << "</ul>\n";
    for (const auto& [device, count] : users)
        if (count >= 2)
            out << fmt::format(
                "<figure class=\"ranks-timeline\" data-device=\"{0}\"><figcaption>{0}, each "
                "process's live bytes</figcaption></figure>\n",
                esc(device));
}

// Where each process's clock starts on the shared one, and how the page names it.
json ranksData(const core::Trace& trace, const RankSummary& s) {
    json processes = json::array();
    for (const core::ProcessTrace& p : trace.processes)
        processes.push_back(
            {{"shift_s", sharedTimeS(s, p, 0)},
             {"label", (p.rank ? fmt::format("rank {} · ", *p.rank) : std::string()) +
                           fmt::format("pid {}", p.pid) +
                           (s.hosts > 1 ? " on " + hostText(p.host) : std::string())}});
    return processes;
}

void processSection(const core::ProcessTrace& p, size_t index, const HtmlOptions& options,
                    const core::ProcessEvents* events, std::ostream& out) {
    out << fmt::format("<section class=\"process\" id=\"process-{}\">\n", index);
    header(p, index, out);
    if (p.devices.empty()) {
        out << "<p class=\"none\">" << esc(noAllocationsText(p)) << "</p>\n</section>\n";
        return;
    }
    deviceTable(p, out);
    oomSection(p, out);
    timelineSection(p, index, out);
    flameSection(p, index, out);
    if (events) momentsSection(p, *events, index, out);
    hotspotTables(p, options, out);
    lineTable(p, options, out);
    regionSections(p, out);
    out << "</section>\n";
}

}  // namespace

void renderHtml(const core::Trace& trace, const HtmlOptions& options, std::ostream& out) {
    json data = {{"processes", json::array()}};
    const RankSummary ranks = summarizeRanks(trace);
    if (trace.processes.size() > 1) data["ranks"] = ranksData(trace, ranks);
    std::vector<const core::ProcessEvents*> events;
    for (const auto& p : trace.processes)
        events.push_back(options.events ? eventsOf(*options.events, p) : nullptr);
    for (size_t i = 0; i < trace.processes.size(); ++i)
        data["processes"].push_back(processData(trace, trace.processes[i], events[i]));
    const std::string title =
        trace.processes.empty() ? "empty trace" : commandLine(trace.processes[0]);

    out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        // Nothing leaves the page: no request of any kind is allowed.
        << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
           "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n"
        << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        << "<title>memtool: " << esc(title) << "</title>\n"
        << "<style>\n"
        << kHtmlStyle
        << "</style>\n"
        // First of all scripts: a script error or a refused fetch anywhere after this is
        // written on the page's root element, where a test (or a reader) finds it.
        << "<script>" << kHtmlErrorCatcher << "</script>\n"
        << "</head>\n<body>\n<header class=\"top\"><span class=\"brand\">memtool</span> memory "
           "report</header>\n<main>\n";
    processOverview(trace, ranks, out);
    ranksSection(trace, ranks, out);
    for (size_t i = 0; i < trace.processes.size(); ++i)
        processSection(trace.processes[i], i, options, events[i], out);
    if (trace.processes.empty()) out << "<p class=\"none\">The trace holds no process.</p>\n";
    out << "</main>\n<footer>"
        << esc(fmt::format("memtool {} · {} · {}", trace.memtoolVersion, trace.schema,
                           options.source))
        << "</footer>\n<div id=\"tip\" role=\"tooltip\"></div>\n"
        << "<script type=\"application/json\" id=\"memtool-data\">" << scriptSafe(data.dump())
        << "</script>\n<script>\n"
        << kHtmlScript << "</script>\n</body>\n</html>\n";
}

}  // namespace memtool::reporters
