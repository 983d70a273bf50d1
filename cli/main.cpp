// memtool: the command line. Subcommands are wired here; their work lives in
// cli/ (run) and reporters/ (report). Errors surface as core::Error, printed as
// one line; exit codes are listed in README.md.

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string_view>

#include "cli/CommandGuard.h"
#include "cli/ctl/CtlCommand.h"
#include "cli/run/OutputPattern.h"
#include "cli/run/RunCommand.h"
#include "core/Error.h"
#include "core/SiteChoice.h"
#include "core/Units.h"
#include "reporters/Check.h"
#include "reporters/CollapsedReporter.h"
#include "reporters/Diff.h"
#include "reporters/HtmlReporter.h"
#include "reporters/JsonReporter.h"
#include "reporters/LineReporter.h"
#include "reporters/PerfettoReporter.h"
#include "reporters/ProcessSelection.h"
#include "reporters/TableReporter.h"
#include "trace/SourceFiles.h"
#include "trace/TraceReader.h"

namespace {

using namespace memtool;

// Writes to the file, or stdout when the path is empty.
void emit(const std::string& path, const std::string& text) {
    if (path.empty()) {
        std::cout << text;
        return;
    }
    std::ofstream out(path, std::ios::trunc);
    if (out) out << text << std::flush;
    // errno from the open or the write that failed: "Is a directory", "Permission denied".
    if (!out)
        throw core::Error(core::kExitBadInput,
                          "cannot write " + path + ": " + std::strerror(errno));
}

struct ReportArgs {
    std::string path;
    std::string format = "text";
    std::string output;  // stdout when empty
    std::string metric;  // collapsed only; empty: peak
    bool lines = false;
    bool topGiven = false;
    reporters::ProcessFilter processes;
    reporters::ReportOptions options;
    reporters::LineReportOptions lineOptions;
};

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
                          "count or leaked");
}

// One report of `trace` into `output` (stdout when empty).
void renderReport(const core::Trace& trace, const ReportArgs& a, const std::string& output) {
    std::ostringstream out;
    if (a.format == "collapsed") {
        reporters::renderCollapsed(
            trace, reporters::parseMetric(a.metric.empty() ? "peak" : a.metric), out);
    } else if (a.lines && a.format == "text") {
        reporters::renderLines(trace, a.lineOptions, out);
    } else if (a.format == "json") {
        out << reporters::renderJson(trace, a.options, a.lines ? &a.lineOptions : nullptr).dump(2)
            << '\n';
    } else if (a.format == "html") {
        reporters::HtmlOptions html;
        html.hotspots = a.options;
        // A page has room for more rows than a terminal, and sorts them itself.
        if (!a.topGiven) html.hotspots.top = 100;
        html.lines = a.lineOptions;
        html.source = a.path;
        reporters::renderHtml(trace, html, out);
    } else if (a.format == "perfetto") {
        out << reporters::renderPerfetto(trace).dump(1) << '\n';
    } else {
        reporters::renderTable(trace, a.options, out);
    }
    emit(output, out.str());
}

int reportCommand(const ReportArgs& a) {
    if (!a.metric.empty() && a.format != "collapsed")
        throw core::Error(core::kExitBadInput, "--metric goes with --format collapsed");
    if ((!a.lineOptions.file.empty() || !a.lineOptions.function.empty()) && !a.lines &&
        a.format != "html")
        throw core::Error(core::kExitBadInput,
                          std::string(a.lineOptions.file.empty() ? "--function" : "--file") +
                              " selects rows of the line table: add --lines");
    core::Trace trace = reporters::selectProcesses(reporters::loadTrace(a.path), a.processes);
    checkSortKey(trace, a.options.sort);
    // -o with %p or %r: a report per process (or per rank), as `memtool run -o` writes traces.
    for (const auto& [path, part] : cli::splitByOutputPattern(std::move(trace), a.output))
        renderReport(part, a, path);
    return 0;
}

struct CheckArgs {
    std::string trace, baseline, maxIncrease, metric = "peak", format = "text", output, command;
    std::string bytes = "iec";
    std::vector<std::string> limits;
    reporters::ProcessFilter processes;
    bool allowIncomplete = false, allowOom = false, allowEmpty = false;
};

int checkCommand(const CheckArgs& a) {
    reporters::CheckOptions o;
    o.named = a.processes.any();
    o.command = a.command;
    o.allowEmpty = a.allowEmpty;
    o.metric = reporters::parseMetric(a.metric);
    o.bytes = *core::parseByteUnits(a.bytes);
    for (const auto& l : a.limits) o.limits.push_back(reporters::parsePeakLimit(l));
    if (!a.maxIncrease.empty()) o.maxIncrease = reporters::parseIncrease(a.maxIncrease);
    if (!a.baseline.empty() && !o.maxIncrease)
        throw core::Error(core::kExitBadInput,
                          "--baseline needs --max-increase (e.g. --max-increase 5%)");
    if (a.baseline.empty() && o.maxIncrease)
        throw core::Error(core::kExitBadInput, "--max-increase needs --baseline");
    // Without limits or a baseline, check still asks that the trace be complete and
    // that no process ran out of memory.
    o.allowIncomplete = a.allowIncomplete;
    o.allowOom = a.allowOom;
    core::Trace trace = reporters::selectProcesses(reporters::loadTrace(a.trace), a.processes);
    if (!a.baseline.empty()) {
        // A rank is compared with the same rank; a pid names a process of TRACE only.
        o.baseline = reporters::selectProcesses(
            reporters::loadTrace(a.baseline),
            reporters::ProcessFilter{std::nullopt, a.processes.rank}, "the baseline");
        o.baselinePath = a.baseline;
    }
    std::vector<reporters::CheckResult> results = reporters::runChecks(trace, o);
    std::ostringstream text;
    if (a.format == "json")
        reporters::renderCheckJson(results, text);
    else if (a.format == "junit")
        reporters::renderCheckJunit(results, a.trace, text);
    else
        reporters::renderCheckText(results, text);
    emit(a.output, text.str());
    for (const auto& r : results)
        if (!r.passed) return core::kExitCheckFailed;
    return 0;
}

int diffCommand(const std::string& basePath, const std::string& newPath, const std::string& format,
                const reporters::ProcessFilter& processes, reporters::DiffOptions options,
                core::ByteUnits bytes) {
    // A rank is compared with the same rank; a pid (runs have their own) names a
    // process of either trace, compared with its counterpart (reporters/Diff.h).
    const reporters::ProcessFilter rank{std::nullopt, processes.rank};
    core::Trace base =
        reporters::selectProcesses(reporters::loadTrace(basePath), rank, "the base trace");
    core::Trace current =
        reporters::selectProcesses(reporters::loadTrace(newPath), rank, "the new trace");
    options.pid = processes.pid;
    reporters::TraceDiff d = reporters::diffTraces(base, current, options);
    if (format == "json")
        reporters::renderDiffJson(d, std::cout);
    else
        reporters::renderDiffText(d, std::cout, bytes);
    return 0;
}

// memtool run's command: the words CLI11 left from the first that is not an
// option of memtool's on, then what followed the first "--" (`tail`, with that
// "--"). CLI11 is not shown the "--" and what follows it: it would take those
// words as its own. An unknown option before the command is a usage error, not
// the command's name.
std::vector<std::string> runCommandWords(std::vector<std::string> words,
                                         const std::vector<std::string>& tail) {
    if (words.empty()) return tail.empty() ? tail : std::vector(tail.begin() + 1, tail.end());
    if (words[0].size() > 1 && words[0][0] == '-')
        throw core::Error(core::kExitBadInput,
                          "run: unknown option " + words[0] +
                              " (memtool's options go before the command; see memtool run --help)");
    words.insert(words.end(), tail.begin(), tail.end());
    return words;
}

// --pid and --rank of report, check and diff; `what`: "shown (...)" and the like.
void addProcessOptions(CLI::App* command, reporters::ProcessFilter& filter, const char* what) {
    command->add_option_function<int64_t>(
        "--pid", [&filter](const int64_t& pid) { filter.pid = pid; },
        std::string("Only the process with this pid is ") + what);
    command->add_option_function<int64_t>(
        "--rank", [&filter](const int64_t& rank) { filter.rank = rank; },
        std::string("Only the processes of this rank (RANK, SLURM_PROCID, ...) are ") + what);
}

// The most rows or frames a report is asked for: more than any trace holds.
constexpr uint64_t kMostShown = 1000000000;

// A count in decimal digits. CLI11 (2.1, Debian's) reads an unsigned option with
// strtoull in base 0: "-1" became the largest count, "010" eight, "0x3" three.
CLI::Validator decimalCount(uint64_t most) {
    return CLI::Validator(
        [most](std::string& text) -> std::string {
            const bool digits =
                !text.empty() && text.size() <= 20 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (!digits || std::strtoull(text.c_str(), nullptr, 10) > most)
                return fmt::format("'{}' is not a whole number from 0 to {}", text, most);
            // What CLI11 then converts (a transform may change it): no leading zeros.
            text.erase(0, std::min(text.find_first_not_of('0'), text.size() - 1));
            return {};
        },
        "COUNT");
}

// --bytes of report, check and diff: how sizes are written in text.
CLI::Option* addBytesOption(CLI::App* command, std::string& units) {
    return command
        ->add_option("--bytes", units,
                     "How sizes are written: iec (1 KiB = 1,024 B), si (1 kB = 1,000 B) or "
                     "exact (40,000 B)")
        ->check(CLI::IsMember({"iec", "si", "exact"}))
        ->capture_default_str();
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

// A one-line error when argv names no command memtool has (none when it does,
// or asks for help or the version, which CLI11 answers).
std::optional<std::string> commandProblem(const CLI::App& app, int argc, char** argv) {
    const std::string_view first = argc > 1 ? argv[1] : "";
    if (first.starts_with('-')) return std::nullopt;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == first) return std::nullopt;
        names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (first.empty()) return "no command given (" + names + "; memtool --help)";
    return "unknown command '" + std::string(first) + "' (" + names + "; memtool --help)";
}

// CLI11 says "The following arguments were not expected: trace.json -f" for
// `memtool report -f html trace.json`, naming what follows the unknown option
// first, and "new is required" for `memtool diff base.json`: name the command,
// the option (or argument) it did not expect, and where its usage is.
// Other parse errors (a value out of its set, a bad number) already name their
// option, and read as CLI11 words them.
std::string usageProblem(const CLI::App& app, const CLI::ParseError& e) {
    const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
    if (!extras && !dynamic_cast<const CLI::RequiredError*>(&e)) return e.what();
    for (const CLI::App* sub : app.get_subcommands({})) {
        if (!sub->parsed()) continue;
        const std::string where = sub->get_name();
        std::string what = e.what();
        const std::vector<std::string> left = sub->remaining();
        if (extras && !left.empty()) {
            auto option = std::find_if(left.begin(), left.end(),
                                       [](const std::string& a) { return a.starts_with('-'); });
            what = option != left.end() ? fmt::format("unknown option '{}'", *option)
                                        : fmt::format("unexpected argument '{}'", left.front());
        }
        return fmt::format("{}: {} (memtool {} --help)", where, what, where);
    }
    return e.what();
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
                     "Hotspot site: innermost frame of user code, innermost of all, or the library "
                     "call the user's code made (wrappers skipped)")
        ->check(CLI::IsMember({"user", "all", "library"}))
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
    runCmd
        ->add_option("--wait-children", run.waitChildrenS,
                     "After the program exits, how many seconds the processes it left running "
                     "get to finish; those still running then are traced as incomplete")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
                char* end = nullptr;
                const double s = std::strtod(text.c_str(), &end);
                if (text.empty() || *end != '\0' || !(s >= 0 && s <= 1e7))
                    return "'" + text + "' is not a number of seconds from 0 to 10000000";
                return {};
            },
            "SECONDS"))
        ->capture_default_str();
    std::string hostPool = "all";
    runCmd
        ->add_option("--host-pool", hostPool,
                     "The most pinned host memory (host backups of paused CUDA regions) a resume "
                     "keeps for the next pause, as pinning is slow: a size (0: none) or all")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
                if (text == "all" || core::parseSize(text)) return {};
                return "'" + text + "' is not a size (e.g. 0, 8GiB, 500MB) or all";
            },
            "SIZE|all"))
        ->capture_default_str();
    runCmd->add_option("--backup-dir", run.backupDir,
                       "Where paused regions' disk backups go, as files no name points to ("
                       "default $TMPDIR or /tmp)");
    // No positional: with prefix_command, CLI11 hands the command and everything after
    // it to remaining() untouched, so options after the command are the command's
    // (memtool run python train.py -o out.pt), with or without "--", as in time and nice.
    runCmd->prefix_command();
    runCmd->footer(
        "COMMAND [ARGS...]: the program to profile, with its own options; "
        "memtool's options go before it (a \"--\" before it is optional)");

    cli::CtlOptions ctl;
    CLI::App* ctlCmd = app.add_subcommand("ctl",
                                          "Command a process under memtool: list | PID status | "
                                          "PID pause [TAG...] | PID resume [TAG...] | PID tensors "
                                          "| PID snapshot");
    ctlCmd->add_option("--format", ctl.format, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    ctlCmd->add_option("--timeout", ctl.timeoutS, "Seconds to wait for the answer")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
                return cli::ctlTimeoutSeconds(text)
                           ? std::string()
                           : std::string(cli::kCtlTimeoutRule) + ", not '" + text + "'";
            },
            "SECONDS"))
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
            ->transform(decimalCount(kMostShown))
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
    reportCmd->add_option("-o,--output", report.output,
                          "Write the report here instead of stdout (%p, %r: a file per process, "
                          "per rank)");
    reportCmd
        ->add_option("--metric", report.metric,
                     "With --format collapsed: the bytes each stack counts, peak (default), "
                     "allocated or leaked")
        ->check(CLI::IsMember({"peak", "allocated", "leaked"}));

    std::string reportSite, groupBy = "site";
    reportCmd
        ->add_option("--site", reportSite,
                     "Choose hotspot sites again: user (innermost user frame), all (innermost "
                     "frame) or library (what the user's code called, wrappers skipped); default: "
                     "as recorded")
        ->check(CLI::IsMember({"user", "all", "library"}));
    CLI::Option* depthOption =
        reportCmd
            ->add_option("--depth", report.options.depth,
                         "How many frames below each site to show (wrappers skipped)")
            ->transform(decimalCount(kMostShown))
            ->capture_default_str();
    CLI::Option* groupOption =
        reportCmd
            ->add_option("--group-by", groupBy,
                         "Rows of the hotspot table: site, function (the site's function), module "
                         "(the innermost nn.Module forward) or op (the torch operator)")
            ->check(CLI::IsMember({"site", "function", "module", "op"}))
            ->capture_default_str();
    std::string bytesUnits = "iec";
    CLI::Option* bytesOption = addBytesOption(reportCmd, bytesUnits);
    addProcessOptions(reportCmd, report.processes, "shown (a multi-process trace: all by default)");
    reportCmd->add_flag("--lines", report.lines,
                        "Line table: peak and allocated bytes per source line");
    reportCmd->add_option("--file", report.lineOptions.file,
                          "With --lines: only files whose path ends with this");
    reportCmd->add_option("--function", report.lineOptions.function,
                          "With --lines: only this function");
    reportCmd->add_flag("--all-files", report.lineOptions.allFiles,
                        "With --lines or --format html: include library files (standard "
                        "library, site-packages) and read source files anywhere");

    CheckArgs check;
    CLI::App* checkCmd = app.add_subcommand(
        "check", "Fail (exit 1) when memory passes a limit or grows past a baseline");
    checkCmd->add_option("trace", check.trace, "trace.json written by memtool run")->required();
    checkCmd->add_option("--max-peak", check.limits,
                         "DEVICE=SIZE, e.g. cpu=512MiB, cuda=2GB, cuda:0=1.5GiB (repeatable)");
    checkCmd->add_option("--baseline", check.baseline, "a trace.json to compare against");
    checkCmd->add_option("--max-increase", check.maxIncrease,
                         "growth allowed over the baseline: PCT% or SIZE");
    checkCmd->add_option("--metric", check.metric, "peak, allocated or leaked")
        ->capture_default_str();
    checkCmd->add_option("--command", check.command,
                         "check only processes whose command line contains this");
    checkCmd->add_option("--format", check.format, "text, json or junit")
        ->check(CLI::IsMember({"text", "json", "junit"}))
        ->capture_default_str();
    checkCmd->add_option("-o,--output", check.output, "write the result here instead of stdout");
    checkCmd->add_flag("--allow-incomplete", check.allowIncomplete,
                       "do not fail on a trace whose target was killed");
    checkCmd->add_flag("--allow-oom", check.allowOom,
                       "do not fail on a trace in which a process ran out of memory");
    checkCmd->add_flag("--allow-empty", check.allowEmpty,
                       "do not fail limits and baselines when no process allocated memory memtool "
                       "tracks (the program never loaded torch)");
    addBytesOption(checkCmd, check.bytes)
        ->description(
            "How sizes read in the messages: iec (1 KiB = 1,024 B), si (1 kB = 1,000 B) or exact "
            "(40,000 B); JSON's byte fields stay whole bytes");
    addProcessOptions(checkCmd, check.processes,
                      "checked (default: every process that allocated; --rank: that rank in "
                      "the baseline too)");

    std::string diffBase, diffNew, diffFormat = "text";
    reporters::DiffOptions diff;
    CLI::App* diffCmd =
        app.add_subcommand("diff", "Compare two traces: per-device deltas and the sites that grew");
    diffCmd->add_option("base", diffBase, "the baseline trace.json")->required();
    diffCmd->add_option("new", diffNew, "the trace.json to compare")->required();
    diffCmd->add_option("--top", diff.top, "how many sites")
        ->transform(decimalCount(kMostShown))
        ->capture_default_str();
    diffCmd->add_option("--command", diff.command,
                        "compare only processes whose command line contains this");
    diffCmd->add_option("--format", diffFormat, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    std::string diffBytes = "iec";
    CLI::Option* diffBytesOption = addBytesOption(diffCmd, diffBytes);
    reporters::ProcessFilter diffProcesses;
    addProcessOptions(diffCmd, diffProcesses,
                      "compared (--pid: of either trace, with its counterpart; default: every "
                      "process that allocated, matched by rank, command line, order of start)");

    // `memtool run [options] [--] COMMAND...`: from the first "--" on, every word is
    // the command's (runCommandWords).
    int parsedArgc = argc;
    std::vector<std::string> runTail;
    if (argc > 1 && std::string_view(argv[1]) == "run") {
        for (int i = 2; i < argc; ++i) {
            if (std::string_view(argv[i]) != "--") continue;
            parsedArgc = i;
            runTail.assign(argv + i, argv + argc);
            break;
        }
    }
    // CLI11 says "A subcommand is required" both for no command and for a
    // misspelt one: name what was given, and what there is.
    if (const auto why = commandProblem(app, argc, argv)) {
        std::cerr << "memtool: " << *why << '\n';
        return core::kExitBadInput;
    }
    try {
        app.parse(parsedArgc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "memtool: " << usageProblem(app, e) << '\n';
        return core::kExitBadInput;
    }

    // A fault of memtool's own in `run` keeps the code that says the program was not
    // profiled (125); report, check and diff say it is a bug (70), not bad input.
    if (runCmd->parsed()) {
        return cli::runGuarded(
            [&] {
                run.pausableAll = pausable == "all";
                if (hostPool != "all") run.hostPoolBytes = core::parseSize(hostPool);
                run.nativeStacks = !noNative;
                run.pythonStacks = !noPython;
                run.siteMode = *core::parseSiteMode(siteMode);
                run.command = runCommandWords(runCmd->remaining(), runTail);
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
        return cli::runGuarded([&] { return checkCommand(check); }, core::kExitInternal, std::cerr);
    }
    if (diffCmd->parsed())
        return cli::runGuarded(
            [&] {
                if (diffBytesOption->count() > 0 && diffFormat != "text")
                    throw core::Error(core::kExitBadInput,
                                      "--bytes is for the text diff; --format json writes exact "
                                      "bytes");
                return diffCommand(diffBase, diffNew, diffFormat, diffProcesses, diff,
                                   *core::parseByteUnits(diffBytes));
            },
            core::kExitInternal, std::cerr);
    if (reportCmd->parsed()) {
        return cli::runGuarded(
            [&] {
                report.options.sort = reporters::parseSortKey(sort);
                if (!reportSite.empty()) report.options.site = core::parseSiteMode(reportSite);
                report.options.groupBy = reporters::parseGroupBy(groupBy);
                report.options.bytes = *core::parseByteUnits(bytesUnits);
                report.lineOptions.bytes = report.options.bytes;
                if (bytesOption->count() > 0 && report.format != "text")
                    throw core::Error(core::kExitBadInput,
                                      "--bytes is for the text report and --lines; --format " +
                                          report.format + " writes exact bytes");
                // The text, JSON and HTML reports' hotspot rows; the text line table,
                // folded stacks and the Perfetto timeline have none.
                const bool hotspots = (report.format == "text" && !report.lines) ||
                                      report.format == "json" || report.format == "html";
                for (const auto& [given, flag] :
                     {std::pair{!reportSite.empty(), "--site"},
                      std::pair{depthOption->count() > 0, "--depth"},
                      std::pair{groupOption->count() > 0, "--group-by"}})
                    if (given && !hotspots)
                        throw core::Error(core::kExitBadInput,
                                          std::string(flag) +
                                              " shapes hotspot rows (the text report's table, "
                                              "--format json or html), not " +
                                              (report.lines ? std::string("the --lines table")
                                                            : "--format " + report.format));
                report.topGiven = topOption->count() > 0;
                return reportCommand(report);
            },
            core::kExitInternal, std::cerr);
    }
    return 0;
}
