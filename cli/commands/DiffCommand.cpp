// `memtool diff BASE NEW`: per-device deltas between two traces and the sites
// that grew (reporters/Diff.h), as text or JSON.

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "cli/Commands.h"
#include "cli/commands/SharedOptions.h"
#include "core/Error.h"
#include "core/Units.h"
#include "reporters/Diff.h"
#include "reporters/Markup.h"
#include "reporters/ProcessSelection.h"
#include "trace/TraceReader.h"

namespace memtool::cli {
namespace {

struct DiffArgs {
    std::string basePath, newPath, format = "text";
    reporters::DiffOptions options;
    std::string bytes = "iec";
    CLI::Option* bytesOption = nullptr;  // whether --bytes was given at all
    reporters::ProcessFilter processes;
};

int diffCommand(const DiffArgs& a) {
    if (a.bytesOption->count() > 0 && a.format != "text")
        throw core::Error(core::kExitBadInput,
                          "--bytes is for the text diff; --format json writes exact bytes");
    const core::ByteUnits bytes = *core::parseByteUnits(a.bytes);
    // A rank is compared with the same rank; a pid (runs have their own) names a
    // process of either trace, compared with its counterpart (reporters/Diff.h).
    const reporters::ProcessFilter rank{std::nullopt, a.processes.rank};
    core::Trace base =
        reporters::selectProcesses(reporters::loadTrace(a.basePath), rank, "the base trace");
    core::Trace current =
        reporters::selectProcesses(reporters::loadTrace(a.newPath), rank, "the new trace");
    reporters::DiffOptions options = a.options;
    options.pid = a.processes.pid;
    reporters::TraceDiff d = reporters::diffTraces(base, current, options);
    if (a.format == "json")
        reporters::renderDiffJson(d, std::cout);
    else {
        // Names from the traces cannot drive the terminal.
        std::ostringstream text;
        reporters::renderDiffText(d, text, bytes);
        std::cout << reporters::escapeTerminal(text.str(), /*keepNewlines=*/true);
    }
    return 0;
}

}  // namespace

Command addDiffCommand(CLI::App& app) {
    auto diff = std::make_shared<DiffArgs>();
    CLI::App* cmd =
        app.add_subcommand("diff", "Compare two traces: per-device deltas and the sites that grew");
    cmd->add_option("base", diff->basePath, "the baseline trace.json")->required();
    cmd->add_option("new", diff->newPath, "the trace.json to compare")->required();
    cmd->add_option("--top", diff->options.top, "how many sites")
        ->transform(decimalCount(kMostShown))
        ->capture_default_str();
    cmd->add_option("--command", diff->options.command,
                    "compare only processes whose command line contains this");
    cmd->add_option("--format", diff->format, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    diff->bytesOption = addBytesOption(cmd, diff->bytes);
    addProcessOptions(cmd, diff->processes,
                      "compared (--pid: of either trace, with its counterpart; default: every "
                      "process that allocated, matched by rank, command line, order of start)");
    return {cmd, [diff] { return diffCommand(*diff); }, core::kExitInternal};
}

}  // namespace memtool::cli
