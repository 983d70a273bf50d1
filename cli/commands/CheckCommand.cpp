// `memtool check TRACE`: fail (exit 1) when memory passes a limit or grows past
// a baseline (reporters/Check.h), as text, JSON or JUnit.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/Commands.h"
#include "cli/commands/SharedOptions.h"
#include "core/Error.h"
#include "core/Units.h"
#include "reporters/Check.h"
#include "reporters/ProcessSelection.h"
#include "trace/TraceMerge.h"
#include "trace/TraceReader.h"

namespace memtool::cli {
namespace {

struct CheckArgs {
    std::vector<std::string> traces;
    std::string baseline, maxIncrease, maxRankSpread, metric = "peak", format = "text", output,
                                                      command;
    std::string bytes = "iec";
    std::vector<std::string> limits, maxLeaked, maxHeld;
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
    for (const auto& [texts, metric] : {std::pair{&a.maxLeaked, reporters::Metric::Leaked},
                                        std::pair{&a.maxHeld, reporters::Metric::HeldAtExit}})
        for (const auto& l : *texts) {
            o.limits.push_back(reporters::parsePeakLimit(l));
            o.limits.back().metric = metric;
        }
    if (!a.maxIncrease.empty()) o.maxIncrease = reporters::parseIncrease(a.maxIncrease);
    if (!a.maxRankSpread.empty()) o.maxRankSpread = reporters::parseRankSpread(a.maxRankSpread);
    if (!a.baseline.empty() && !o.maxIncrease)
        throw core::Error(core::kExitBadInput,
                          "--baseline needs --max-increase (e.g. --max-increase 5%)");
    if (a.baseline.empty() && o.maxIncrease)
        throw core::Error(core::kExitBadInput, "--max-increase needs --baseline");
    // Without limits or a baseline, check still asks that the trace be complete and
    // that no process ran out of memory.
    o.allowIncomplete = a.allowIncomplete;
    o.allowOom = a.allowOom;
    core::Trace trace = reporters::selectProcesses(reporters::loadTraces(a.traces), a.processes);
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
        reporters::renderCheckJunit(results, fmt::format("{}", fmt::join(a.traces, " ")), text);
    else
        reporters::renderCheckText(results, text);
    writeText(a.output, text.str());
    for (const auto& r : results)
        if (!r.passed) return core::kExitCheckFailed;
    return 0;
}

}  // namespace

Command addCheckCommand(CLI::App& app) {
    auto check = std::make_shared<CheckArgs>();
    CLI::App* cmd = app.add_subcommand(
        "check", "Fail (exit 1) when memory passes a limit or grows past a baseline");
    cmd->add_option("trace", check->traces,
                    "trace.json written by memtool run; several: read as one (a job's ranks)")
        ->required();
    cmd->add_option("--max-peak", check->limits,
                    "DEVICE=SIZE, e.g. cpu=512MiB, cuda=2GB, cuda:0=1.5GiB (repeatable)");
    cmd->add_option("--max-leaked", check->maxLeaked,
                    "DEVICE=SIZE: live at the leak moment, reachable from nothing the program's "
                    "globals hold (repeatable)");
    cmd->add_option("--max-held-at-exit", check->maxHeld,
                    "DEVICE=SIZE: live at the leak moment and still reachable from the "
                    "program's globals (a model, its optimizer state; repeatable)");
    cmd->add_option("--baseline", check->baseline, "a trace.json to compare against");
    cmd->add_option("--max-increase", check->maxIncrease,
                    "growth allowed over the baseline: PCT% or SIZE");
    cmd->add_option("--max-rank-spread", check->maxRankSpread,
                    "PCT%: how much more the rank holding most may hold than the one holding "
                    "least, per kind of device (75%: 1.75x)");
    cmd->add_option("--metric", check->metric, "peak, allocated, leaked or held-at-exit")
        ->capture_default_str();
    cmd->add_option("--command", check->command,
                    "check only processes whose command line contains this");
    cmd->add_option("--format", check->format, "text, json or junit")
        ->check(CLI::IsMember({"text", "json", "junit"}))
        ->capture_default_str();
    cmd->add_option("-o,--output", check->output, "write the result here instead of stdout");
    cmd->add_flag("--allow-incomplete", check->allowIncomplete,
                  "do not fail on a trace whose target was killed");
    cmd->add_flag("--allow-oom", check->allowOom,
                  "do not fail on a trace in which a process ran out of memory");
    cmd->add_flag("--allow-empty", check->allowEmpty,
                  "do not fail limits and baselines when no process allocated memory memtool "
                  "tracks (the program never loaded torch)");
    addBytesOption(cmd, check->bytes)
        ->description(
            "How sizes read in the messages: iec (1 KiB = 1,024 B), si (1 kB = 1,000 B) or exact "
            "(40,000 B); JSON's byte fields stay whole bytes");
    addProcessOptions(cmd, check->processes,
                      "checked (default: every process that allocated; --rank: that rank in "
                      "the baseline too)");
    return {cmd, [check] { return checkCommand(*check); }, core::kExitInternal};
}

}  // namespace memtool::cli
