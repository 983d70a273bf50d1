// memtool: the command line. Subcommands are wired here; their work lives in
// cli/ (run) and reporters/ (report). Errors surface as core::Error, printed as
// one line; exit codes are listed in README.md.

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "cli/CommandGuard.h"
#include "cli/CtlCommand.h"
#include "cli/RunCommand.h"
#include "core/Error.h"
#include "reporters/Check.h"
#include "reporters/CollapsedReporter.h"
#include "reporters/Diff.h"
#include "reporters/HtmlReporter.h"
#include "reporters/JsonReporter.h"
#include "reporters/LineReporter.h"
#include "reporters/PerfettoReporter.h"
#include "reporters/SourceFiles.h"
#include "reporters/TableReporter.h"
#include "reporters/TraceJson.h"

namespace {

using namespace memtool;

// Writes to the file, or stdout when the path is empty.
void emit(const std::string& path, const std::string& text) {
    if (path.empty()) {
        std::cout << text;
        return;
    }
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) throw core::Error(core::kExitBadInput, "cannot write " + path);
}

// The code the HTML report's line table shows beside its numbers, read by the rule
// of `--lines` (reporters/SourceFiles.h): regular files inside the trace's
// directory and this one, unless --all-files.
std::function<std::vector<std::string>(const std::string&, const std::string&)> sourceReader(
    bool allFiles) {
    return [allFiles](const std::string& file, const std::string& traceCwd) {
        return reporters::SourceFiles(traceCwd, allFiles).read(file).lines;
    };
}

struct ReportArgs {
    std::string path;
    std::string format = "text";
    std::string output;  // stdout when empty
    std::string metric;  // collapsed only; empty: peak
    bool lines = false;
    bool topGiven = false;
    reporters::ReportOptions options;
    reporters::LineReportOptions lineOptions;
};

int reportCommand(const ReportArgs& a) {
    if (!a.metric.empty() && a.format != "collapsed")
        throw core::Error(core::kExitBadInput, "--metric goes with --format collapsed");
    core::Trace trace = reporters::loadTrace(a.path);
    std::ostringstream out;
    if (a.format == "collapsed") {
        reporters::renderCollapsed(
            trace, reporters::parseMetric(a.metric.empty() ? "peak" : a.metric), out);
    } else if (a.lines && a.format == "text") {
        reporters::renderLines(trace, a.lineOptions, out);
    } else if (a.format == "json") {
        out << reporters::renderJson(trace, a.options).dump(2) << '\n';
    } else if (a.format == "html") {
        reporters::HtmlOptions html;
        html.hotspots = a.options;
        // A page has room for more rows than a terminal, and sorts them itself.
        if (!a.topGiven) html.hotspots.top = 100;
        html.lines = a.lineOptions;
        html.source = a.path;
        html.readSource = sourceReader(a.lineOptions.allFiles);
        reporters::renderHtml(trace, html, out);
    } else if (a.format == "perfetto") {
        out << reporters::renderPerfetto(trace).dump(1) << '\n';
    } else {
        reporters::renderTable(trace, a.options, out);
    }
    emit(a.output, out.str());
    return 0;
}

int checkCommand(const std::string& tracePath, const std::vector<std::string>& limits,
                 const std::string& baseline, const std::string& maxIncrease,
                 const std::string& metric, const std::string& format, bool allowIncomplete,
                 bool allowOom, const std::string& output) {
    reporters::CheckOptions o;
    o.metric = reporters::parseMetric(metric);
    for (const auto& l : limits) o.limits.push_back(reporters::parsePeakLimit(l));
    if (!maxIncrease.empty()) o.maxIncrease = reporters::parseIncrease(maxIncrease);
    if (!baseline.empty() && !o.maxIncrease)
        throw core::Error(core::kExitBadInput,
                          "--baseline needs --max-increase (e.g. --max-increase 5%)");
    if (baseline.empty() && o.maxIncrease)
        throw core::Error(core::kExitBadInput, "--max-increase needs --baseline");
    // Without limits or a baseline, check still asks that the trace be complete and
    // that no process ran out of memory.
    o.allowIncomplete = allowIncomplete;
    o.allowOom = allowOom;
    core::Trace trace = reporters::loadTrace(tracePath);
    if (!baseline.empty()) {
        o.baseline = reporters::loadTrace(baseline);
        o.baselinePath = baseline;
    }
    std::vector<reporters::CheckResult> results = reporters::runChecks(trace, o);
    std::ostringstream text;
    if (format == "json")
        reporters::renderCheckJson(results, text);
    else if (format == "junit")
        reporters::renderCheckJunit(results, tracePath, text);
    else
        reporters::renderCheckText(results, text);
    emit(output, text.str());
    for (const auto& r : results)
        if (!r.passed) return core::kExitCheckFailed;
    return 0;
}

int diffCommand(const std::string& basePath, const std::string& newPath, size_t top,
                const std::string& format) {
    core::Trace base = reporters::loadTrace(basePath);
    core::Trace current = reporters::loadTrace(newPath);
    reporters::TraceDiff d = reporters::diffTraces(base, current, top);
    if (format == "json")
        reporters::renderDiffJson(d, std::cout);
    else
        reporters::renderDiffText(d, std::cout);
    return 0;
}

[[noreturn]] void dieLike(int sig) {
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    kill(getpid(), sig);
    _exit(128 + sig);  // the signal was ignored or caught elsewhere
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"memtool: memory profiler and controller for PyTorch and CUDA programs"};
    app.set_version_flag("--version", std::string("memtool ") + MEMTOOL_VERSION);
    app.require_subcommand(1);

    cli::RunOptions run;
    std::string siteMode = "user";
    bool noNative = false, noPython = false;
    CLI::App* runCmd =
        app.add_subcommand("run", "Run a command under the profiler and write trace.json");
    runCmd->add_option("-o,--output", run.output, "Where to write the trace")
        ->capture_default_str();
    runCmd->add_flag("--no-native", noNative, "Do not record native (C/C++) call stacks");
    runCmd->add_flag("--no-python", noPython, "Do not record Python call stacks");
    runCmd
        ->add_option("--site", siteMode,
                     "Hotspot site: innermost frame of user code, or innermost of all")
        ->check(CLI::IsMember({"user", "all"}))
        ->capture_default_str();
    CLI::Option* quietFlag =
        runCmd->add_flag("-q,--quiet", run.quiet, "Print nothing of memtool's own");
    runCmd
        ->add_flag("--live", run.live,
                   "Show memory on the terminal while the program runs (q leaves the view)")
        ->excludes(quietFlag);
    std::string pausable = "none";
    runCmd
        ->add_option(
            "--pausable", pausable,
            "all: every CUDA allocation and every CPU storage of 64 KiB or more belongs to a "
            "region from the "
            "start (memtool ctl PID yield takes it all); none: only the program's own regions")
        ->check(CLI::IsMember({"all", "none"}))
        ->capture_default_str();
    runCmd
        ->add_option("--cuda", run.cuda,
                     "How CUDA memory is recorded: auto (CUPTI, else runtime hooks), cupti, "
                     "runtime-hooks, off")
        ->check(CLI::IsMember({"auto", "cupti", "runtime-hooks", "off"}))
        ->capture_default_str();
    runCmd->add_option("--backup-dir", run.backupDir,
                       "Where paused regions' disk backups go (a private directory is made inside; "
                       "default $TMPDIR or /tmp)");
    runCmd->add_option("command", run.command, "The command to profile (after --)")->required();
    runCmd->prefix_command();

    cli::CtlOptions ctl;
    CLI::App* ctlCmd = app.add_subcommand("ctl",
                                          "Command a process under memtool: list | PID status | "
                                          "PID pause [TAG...] | PID resume [TAG...] | PID tensors "
                                          "| PID snapshot");
    ctlCmd->add_option("--format", ctl.format, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    ctlCmd->add_option("--timeout", ctl.timeoutS, "Seconds to wait for the answer")
        ->capture_default_str();
    // No positional: with prefix_command, CLI11 hands every word from the first positional on
    // (list, or the PID and its command with the command's own options, yield --to disk) to
    // remaining() untouched. A declared positional would let CLI11 drop unknown options.
    ctlCmd->prefix_command();
    ctlCmd->footer(
        "Words: list | PID status | PID pause [TAG...] | PID resume [TAG...] | "
        "PID yield [--to host|disk] [--wait S] | PID restore | "
        "PID tensors [--device D] [--verbose] [--wait S] | PID snapshot [-o FILE]");

    ReportArgs report;
    std::string sort = "peak";
    CLI::App* reportCmd = app.add_subcommand("report", "Print a report of a trace.json");
    reportCmd->add_option("trace", report.path, "trace.json written by memtool run")->required();
    CLI::Option* topOption =
        reportCmd
            ->add_option("--top", report.options.top,
                         "How many hotspots per device (html: 100 unless given)")
            ->capture_default_str();
    reportCmd
        ->add_option("--sort", sort,
                     "Order hotspots by peak, allocated, count, leaked, or (CUDA with the torch "
                     "bridge) active or reserved peak")
        ->capture_default_str();
    reportCmd
        ->add_option("--format", report.format,
                     "text, json, html (one self-contained page with charts), collapsed "
                     "(folded stacks for flame graph tools) or perfetto (Chrome trace-event "
                     "JSON for ui.perfetto.dev)")
        ->check(CLI::IsMember({"text", "json", "html", "collapsed", "perfetto"}))
        ->capture_default_str();
    reportCmd->add_option("-o,--output", report.output, "Write the report here instead of stdout");
    reportCmd
        ->add_option("--metric", report.metric,
                     "With --format collapsed: the bytes each stack counts, peak (default), "
                     "allocated or leaked")
        ->check(CLI::IsMember({"peak", "allocated", "leaked"}));

    reportCmd->add_flag("--lines", report.lines,
                        "Line table: peak and allocated bytes per source line");
    reportCmd->add_option("--file", report.lineOptions.file,
                          "With --lines: only files whose path ends with this");
    reportCmd->add_option("--function", report.lineOptions.function,
                          "With --lines: only this function");
    reportCmd->add_flag("--all-files", report.lineOptions.allFiles,
                        "With --lines or --format html: include library files (standard "
                        "library, site-packages) and read source files anywhere");

    std::string checkTrace, baseline, maxIncrease, metric = "peak", checkFormat = "text",
                                                   checkOutput;
    std::vector<std::string> limits;
    bool allowIncomplete = false, allowOom = false;
    CLI::App* checkCmd = app.add_subcommand(
        "check", "Fail (exit 1) when memory passes a limit or grows past a baseline");
    checkCmd->add_option("trace", checkTrace, "trace.json written by memtool run")->required();
    checkCmd->add_option("--max-peak", limits,
                         "DEVICE=SIZE, e.g. cpu=512MiB, cuda=2GB, cuda:0=1.5GiB (repeatable)");
    checkCmd->add_option("--baseline", baseline, "a trace.json to compare against");
    checkCmd->add_option("--max-increase", maxIncrease,
                         "growth allowed over the baseline: PCT% or SIZE");
    checkCmd->add_option("--metric", metric, "peak, allocated or leaked")->capture_default_str();
    checkCmd->add_option("--format", checkFormat, "text, json or junit")
        ->check(CLI::IsMember({"text", "json", "junit"}))
        ->capture_default_str();
    checkCmd->add_option("-o,--output", checkOutput, "write the result here instead of stdout");
    checkCmd->add_flag("--allow-incomplete", allowIncomplete,
                       "do not fail on a trace whose target was killed");
    checkCmd->add_flag("--allow-oom", allowOom,
                       "do not fail on a trace in which a process ran out of memory");

    std::string diffBase, diffNew, diffFormat = "text";
    size_t diffTop = 10;
    CLI::App* diffCmd =
        app.add_subcommand("diff", "Compare two traces: per-device deltas and the sites that grew");
    diffCmd->add_option("base", diffBase, "the baseline trace.json")->required();
    diffCmd->add_option("new", diffNew, "the trace.json to compare")->required();
    diffCmd->add_option("--top", diffTop, "how many sites")->capture_default_str();
    diffCmd->add_option("--format", diffFormat, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "memtool: " << e.what() << '\n';
        return core::kExitBadInput;
    }

    // A fault of memtool's own in `run` keeps the code that says the program was not
    // profiled (125); report, check and diff say it is a bug (70), not bad input.
    if (runCmd->parsed()) {
        return cli::runGuarded(
            [&] {
                run.pausableAll = pausable == "all";
                run.nativeStacks = !noNative;
                run.pythonStacks = !noPython;
                run.siteMode = siteMode == "all" ? cli::SiteMode::All : cli::SiteMode::User;
                if (!run.command.empty() && run.command[0] == "--")
                    run.command.erase(run.command.begin());
                cli::RunResult r = cli::runCommand(run);
                if (r.signal) dieLike(r.signal);
                return r.exitCode;
            },
            core::kExitRunFailed, std::cerr);
    }
    // CLI11 marks where a prefix command's own options begin with a "--" of its own.
    if (ctlCmd->parsed()) {
        ctl.words = ctlCmd->remaining();
        std::erase(ctl.words, std::string("--"));
    }
    if (ctlCmd->parsed())
        return cli::runGuarded([&] { return cli::ctlCommand(ctl); }, core::kExitInternal,
                               std::cerr);
    if (checkCmd->parsed()) {
        return cli::runGuarded(
            [&] {
                return checkCommand(checkTrace, limits, baseline, maxIncrease, metric, checkFormat,
                                    allowIncomplete, allowOom, checkOutput);
            },
            core::kExitInternal, std::cerr);
    }
    if (diffCmd->parsed())
        return cli::runGuarded([&] { return diffCommand(diffBase, diffNew, diffTop, diffFormat); },
                               core::kExitInternal, std::cerr);
    if (reportCmd->parsed()) {
        return cli::runGuarded(
            [&] {
                report.options.sort = reporters::parseSortKey(sort);
                report.topGiven = topOption->count() > 0;
                return reportCommand(report);
            },
            core::kExitInternal, std::cerr);
    }
    return 0;
}
