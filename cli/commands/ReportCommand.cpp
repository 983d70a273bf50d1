// `memtool report TRACE`: a report of a trace.json (reporters/), as a table,
// line table, JSON, HTML, folded stacks or a Perfetto timeline.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "cli/Commands.h"
#include "cli/commands/SharedOptions.h"
#include "cli/run/OutputPattern.h"
#include "core/CtlArgs.h"
#include "core/Error.h"
#include "core/SiteChoice.h"
#include "core/Units.h"
#include "reporters/Check.h"  // parseMetric
#include "reporters/CollapsedReporter.h"
#include "reporters/EventReporter.h"
#include "reporters/EventViews.h"
#include "reporters/HtmlReporter.h"
#include "reporters/JsonReporter.h"
#include "reporters/LineReporter.h"
#include "reporters/Markup.h"
#include "reporters/PerfettoReporter.h"
#include "reporters/ProcessSelection.h"
#include "reporters/TableReporter.h"
#include "reporters/TorchSnapshot.h"
#include "trace/EventLogFile.h"
#include "trace/TraceMerge.h"
#include "trace/TraceReader.h"

namespace memtool::cli {
namespace {

struct ReportArgs {
    std::vector<std::string> paths;  // several: read as one trace (trace/TraceMerge.h)
    std::string format = "text";
    std::string output;       // stdout when empty
    std::string metric;       // collapsed only; empty: peak
    bool pythonOnly = false;  // collapsed only
    bool lines = false;
    bool topGiven = false;
    reporters::ProcessFilter processes;
    reporters::ReportOptions options;
    reporters::LineReportOptions lineOptions;
    // As given, read into `options` when the command runs; site empty: as recorded.
    std::string sort = "peak", site, groupBy = "site", bytes = "iec";
    // Whether they were given at all.
    CLI::Option* topOption = nullptr;
    CLI::Option* depthOption = nullptr;
    CLI::Option* groupOption = nullptr;
    CLI::Option* bytesOption = nullptr;
    // The event log's reports (--events): how many events before the focus, and --at.
    size_t eventsBefore = 10;
    std::string at;
    CLI::Option* eventsBeforeOption = nullptr;
};

// A trace's event log, when the report reads it: the text and JSON reports
// (the events before the focus), the HTML report (its moments too), --at and
// --format torch-snapshot.
std::optional<core::EventLog> eventLogFor(const core::Trace& trace, const ReportArgs& a) {
    const bool reads =
        a.format == "torch-snapshot" || !a.at.empty() || a.format == "html" ||
        ((a.format == "text" || a.format == "json") && !a.lines && a.eventsBefore > 0);
    const std::string needs = a.at.empty() ? "--format torch-snapshot" : "--at";
    if ((a.format == "torch-snapshot" || !a.at.empty()) && a.paths.size() > 1)
        throw core::Error(core::kExitBadInput,
                          needs + " reads one trace's event log: give one trace");
    if (trace.eventsFile.empty()) {
        if (a.format == "torch-snapshot" || !a.at.empty())
            throw core::Error(core::kExitBadInput,
                              needs + ": the trace has no event log (memtool run --events N|all)");
        return std::nullopt;
    }
    if (!reads) return std::nullopt;
    return reporters::loadEventLog(reporters::eventLogPath(a.paths.front(), trace.eventsFile));
}

// --format torch-snapshot: the one process of `trace` with an event log.
std::string torchSnapshot(const core::Trace& trace, const core::EventLog& log) {
    const core::ProcessEvents* only = nullptr;
    for (const core::ProcessTrace& p : trace.processes) {
        const core::ProcessEvents* e = reporters::eventsOf(log, p);
        if (e && only)
            throw core::Error(core::kExitBadInput,
                              "--format torch-snapshot: several processes have event logs: "
                              "choose one with --pid, or write one file each with -o %p");
        if (e) only = e;
    }
    if (!only)
        throw core::Error(core::kExitBadInput,
                          "--format torch-snapshot: no process shown has an event log");
    return reporters::renderTorchSnapshot(*only);
}

double atSeconds(const std::string& text) {
    char* end = nullptr;
    const double s = std::strtod(text.c_str(), &end);
    if (!core::isDecimalText(text.c_str()) || *end != '\0' || !(s >= 0 && s <= 1e9))
        throw core::Error(core::kExitBadInput,
                          "--at '" + text + "': give seconds from the process's start (e.g. 1.5)");
    return s;
}

// --sort active or reserved needs PyTorch's caching-allocator figures somewhere in
// the trace; a device without them is sorted by its peak, and the table says so.
void checkSortKey(const core::Trace& trace, reporters::SortKey sort) {
    if (sort != reporters::SortKey::Active && sort != reporters::SortKey::Reserved) return;
    for (const core::ProcessTrace& p : trace.processes)
        for (const auto& [name, d] : p.devices)
            if (!d.pools.empty()) return;
    throw core::Error(core::kExitBadInput,
                      std::string("--sort ") +
                          (sort == reporters::SortKey::Active ? "active" : "reserved") +
                          ": the trace has no active or reserved figures (PyTorch's CUDA caching "
                          "allocator, seen through the torch bridge); sort by peak, allocated, "
                          "count, leaked or held-at-exit");
}

// One report of `trace` into `output` (stdout when empty); `log`: its event log, when read.
void renderReport(const core::Trace& trace, const ReportArgs& a, const std::string& output,
                  const core::EventLog* log) {
    std::ostringstream out;
    if (a.format == "torch-snapshot") {
        writeText(output, torchSnapshot(trace, *log));
        return;
    } else if (!a.at.empty() && a.format == "json") {
        out << reporters::liveAtJson(trace, *log, atSeconds(a.at), a.options).dump(2) << '\n';
    } else if (!a.at.empty()) {
        reporters::renderLiveAt(trace, *log, atSeconds(a.at), a.options, out);
    } else if (a.format == "collapsed") {
        reporters::renderCollapsed(
            trace, reporters::parseMetric(a.metric.empty() ? "peak" : a.metric), out,
            a.pythonOnly ? reporters::StackView::PythonOnly : reporters::StackView::WithNative);
    } else if (a.lines && a.format == "text") {
        reporters::renderLines(trace, a.lineOptions, out);
    } else if (a.format == "json") {
        nlohmann::json j =
            reporters::renderJson(trace, a.options, a.lines ? &a.lineOptions : nullptr);
        if (log)
            j["events_before"] =
                reporters::eventsBeforeJson(trace, *log, a.eventsBefore, a.options);
        out << j.dump(2) << '\n';
    } else if (a.format == "html") {
        reporters::HtmlOptions html;
        html.hotspots = a.options;
        // A page has room for more rows than a terminal, and sorts them itself.
        if (!a.topGiven) html.hotspots.top = 100;
        html.lines = a.lineOptions;
        html.source = fmt::format("{}", fmt::join(a.paths, " "));
        html.events = log;
        reporters::renderHtml(trace, html, out);
    } else if (a.format == "perfetto") {
        out << reporters::renderPerfetto(trace).dump(1) << '\n';
    } else {
        reporters::renderTable(trace, a.options, out);
        if (log) reporters::renderEventsBefore(trace, *log, a.eventsBefore, a.options, out);
    }
    // The text a terminal shows (the table, the lines, folded stacks): names from
    // the trace cannot drive it. JSON escapes them itself; HTML and Perfetto are files
    // for a browser.
    const bool forTerminal = a.format == "text" || a.format == "collapsed";
    writeText(output, forTerminal ? reporters::escapeTerminal(out.str(), /*keepNewlines=*/true)
                                  : out.str());
}

int reportCommand(const ReportArgs& a) {
    if (!a.metric.empty() && a.format != "collapsed")
        throw core::Error(core::kExitBadInput, "--metric goes with --format collapsed");
    if (a.pythonOnly && a.format != "collapsed")
        throw core::Error(core::kExitBadInput,
                          "--python-only goes with --format collapsed (the HTML report's flame "
                          "graphs have a switch of their own)");
    if ((!a.lineOptions.file.empty() || !a.lineOptions.function.empty()) && !a.lines &&
        a.format != "html")
        throw core::Error(core::kExitBadInput,
                          std::string(a.lineOptions.file.empty() ? "--function" : "--file") +
                              " selects rows of the line table: add --lines");
    if (!a.output.empty() && a.output != "-") checkOutputPattern(a.output, core::kExitBadInput);
    if (a.format == "torch-snapshot" && (a.output.empty() || a.output == "-"))
        throw core::Error(core::kExitBadInput,
                          "--format torch-snapshot writes a pickle: give -o FILE (snap.pickle)");
    if (!a.at.empty() && a.format != "text" && a.format != "json")
        throw core::Error(core::kExitBadInput, "--at goes with the text report or --format json");
    core::Trace trace = reporters::selectProcesses(reporters::loadTraces(a.paths), a.processes);
    checkSortKey(trace, a.options.sort);
    const std::optional<core::EventLog> log = eventLogFor(trace, a);
    // -o with %p or %r: a report per process (or per rank), as `memtool run -o` writes traces.
    for (const auto& [path, part] : splitByOutputPattern(std::move(trace), a.output))
        renderReport(part, a, path, log ? &*log : nullptr);
    return 0;
}

// Reads what was given as words into the report's options, refuses options the
// chosen report has no use for, and reports.
int reportAction(ReportArgs& a) {
    a.options.sort = reporters::parseSortKey(a.sort);
    if (!a.site.empty()) a.options.site = core::parseSiteMode(a.site);
    a.options.groupBy = reporters::parseGroupBy(a.groupBy);
    a.options.bytes = *core::parseByteUnits(a.bytes);
    a.lineOptions.bytes = a.options.bytes;
    if (a.lineOptions.readAnyFile)
        std::cerr << "memtool: --read-any-file: reading every file this trace names, wherever "
                     "it is\n";
    if (a.bytesOption->count() > 0 && a.format != "text")
        throw core::Error(core::kExitBadInput,
                          "--bytes is for the text report and --lines; --format " + a.format +
                              " writes exact bytes");
    // The text, JSON and HTML reports' hotspot rows; the text line table,
    // folded stacks and the Perfetto timeline have none.
    const bool hotspots =
        (a.format == "text" && !a.lines) || a.format == "json" || a.format == "html";
    for (const auto& [given, flag] :
         {std::pair{!a.site.empty(), "--site"}, std::pair{a.depthOption->count() > 0, "--depth"},
          std::pair{a.groupOption->count() > 0, "--group-by"}})
        if (given && !hotspots)
            throw core::Error(
                core::kExitBadInput,
                std::string(flag) +
                    " shapes hotspot rows (the text report's table, "
                    "--format json or html), not " +
                    (a.lines ? std::string("the --lines table") : "--format " + a.format));
    a.topGiven = a.topOption->count() > 0;
    return reportCommand(a);
}

// The trace, and which report of it goes where.
void addOutputOptions(CLI::App* cmd, ReportArgs& a) {
    cmd->add_option("trace", a.paths,
                    "trace.json written by memtool run; several (a job's ranks, a trace per "
                    "node): read as one")
        ->required();
    a.topOption = cmd->add_option("--top", a.options.top,
                                  "How many hotspots per device (html: 100 unless given)")
                      ->transform(decimalCount(kMostShown))
                      ->capture_default_str();
    cmd->add_option("--sort", a.sort,
                    "Order hotspots by peak, allocated, count, leaked, held-at-exit, or (CUDA "
                    "with the torch bridge) active or reserved peak")
        ->capture_default_str();
    cmd->add_option("--format", a.format,
                    "text, json, html (one self-contained page with charts), collapsed "
                    "(folded stacks for flame graph tools) or perfetto (Chrome trace-event "
                    "JSON for ui.perfetto.dev) or torch-snapshot (PyTorch's memory snapshot "
                    "pickle, for memory_viz; needs the trace's event log)")
        ->check(CLI::IsMember({"text", "json", "html", "collapsed", "perfetto", "torch-snapshot"}))
        ->capture_default_str();
    cmd->add_option("-o,--output", a.output,
                    "Write the report here instead of stdout (%p, %r: a file per process, "
                    "per rank)");
    cmd->add_option("--metric", a.metric,
                    "With --format collapsed: the bytes each stack counts, peak (default), "
                    "allocated, leaked or held-at-exit")
        ->check(CLI::IsMember({"peak", "allocated", "leaked", "held-at-exit"}));
    cmd->add_flag("--python-only", a.pythonOnly,
                  "With --format collapsed: only the Python frames of each stack");
    a.eventsBeforeOption =
        cmd->add_option("--events-before", a.eventsBefore,
                        "With an event log (memtool run --events): how many events before the "
                        "out-of-memory error, else the peak, the report lists (0: none)")
            ->transform(decimalCount(kMostShown))
            ->capture_default_str();
    cmd->add_option("--at", a.at,
                    "With an event log: what was live SECONDS into each process, by stack, "
                    "instead of the report");
}

// What a hotspot row is, how sizes read, and which processes count.
void addHotspotOptions(CLI::App* cmd, ReportArgs& a) {
    cmd->add_option("--site", a.site,
                    "Choose hotspot sites again: user (innermost user frame), all (innermost "
                    "frame) or library (what the user's code called, wrappers skipped); default: "
                    "as recorded")
        ->check(CLI::IsMember({"user", "all", "library"}));
    a.depthOption = cmd->add_option("--depth", a.options.depth,
                                    "How many frames below each site to show (wrappers skipped)")
                        ->transform(decimalCount(kMostShown))
                        ->capture_default_str();
    a.groupOption =
        cmd->add_option("--group-by", a.groupBy,
                        "Rows of the hotspot table: site, function (the site's function), module "
                        "(the innermost nn.Module forward) or op (the torch operator)")
            ->check(CLI::IsMember({"site", "function", "module", "op"}))
            ->capture_default_str();
    a.bytesOption = addBytesOption(cmd, a.bytes);
    addProcessOptions(cmd, a.processes, "shown (a multi-process trace: all by default)");
}

// The line table and the rows it shows.
void addLineOptions(CLI::App* cmd, ReportArgs& a) {
    cmd->add_flag("--lines", a.lines, "Line table: peak and allocated bytes per source line");
    cmd->add_option("--file", a.lineOptions.file,
                    "With --lines: only files whose path ends with this");
    cmd->add_option("--function", a.lineOptions.function, "With --lines: only this function");
    cmd->add_flag("--all-files", a.lineOptions.allFiles,
                  "With --lines or --format html: include library files (standard "
                  "library, site-packages)");
    cmd->add_flag("--read-any-file", a.lineOptions.readAnyFile,
                  "Read the code of any file the trace names, wherever it is (a trace from "
                  "someone else can name any file you can read)");
}

}  // namespace

Command addReportCommand(CLI::App& app) {
    auto args = std::make_shared<ReportArgs>();
    CLI::App* cmd = app.add_subcommand("report", "Print a report of a trace.json");
    addOutputOptions(cmd, *args);
    addHotspotOptions(cmd, *args);
    addLineOptions(cmd, *args);
    return {cmd, [args] { return reportAction(*args); }, core::kExitInternal};
}

}  // namespace memtool::cli
