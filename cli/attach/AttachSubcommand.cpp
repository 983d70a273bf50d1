// `memtool attach PID`'s command line: its options, and the RunOptions they make
// for runCommand (RunCommand.h), which runs memtool attach as the loop of a
// memtool run whose target runs already (cli/attach/AttachSession.h).

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/Commands.h"
#include "cli/run/RunCommand.h"
#include "core/CtlArgs.h"
#include "core/Error.h"
#include "core/SiteChoice.h"

namespace memtool::cli {
namespace {

struct AttachArgs {
    RunOptions run;
    std::string siteMode = "user";
    bool noNative = false, noPython = false;
    std::string pausable = "none";
};

int attachAction(AttachArgs& a) {
    RunOptions& run = a.run;
    run.attach = true;
    run.pausableAll = a.pausable == "all";
    run.nativeStacks = !a.noNative;
    run.pythonStacks = !a.noPython;
    run.siteMode = *core::parseSiteMode(a.siteMode);
    runCommand(run);
    return 0;  // the program runs on: its exit code is not memtool's
}

}  // namespace

Command addAttachCommand(CLI::App& app) {
    auto args = std::make_shared<AttachArgs>();
    CLI::App* cmd = app.add_subcommand(
        "attach",
        "Profile a process that is already running (ptrace, no debugger) and write trace.json");
    cmd->add_option("PID", args->run.trackPid,
                    "The process (yours, running a program that uses torch or CUDA)")
        ->required()
        ->check(CLI::Range(1, 1 << 30));
    cmd->add_option("-o,--output", args->run.output, "Where to write the trace")
        ->capture_default_str();
    cmd->add_option("--duration", args->run.durationS,
                    "Detach after this many seconds (default: at Ctrl-C, or when the program ends)")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
                double seconds = 0;
                if (!core::parseWaitSeconds(text.c_str(), &seconds))
                    return "'" + text + "' is not a number of seconds above 0 (at most 10000000)";
                return {};
            },
            "SECONDS"));
    cmd->add_flag("--no-native", args->noNative, "Do not record native (C/C++) call stacks");
    cmd->add_flag("--no-python", args->noPython, "Do not record Python call stacks");
    cmd->add_option("--site", args->siteMode, "Hotspot site, as memtool run's")
        ->check(CLI::IsMember({"user", "all", "library"}))
        ->capture_default_str();
    cmd->add_option("--pausable", args->pausable,
                    "all: every CPU storage of 64 KiB or more allocated from the attach on belongs "
                    "to a region (memtool ctl PID yield takes it); none: only the program's own")
        ->check(CLI::IsMember({"all", "none"}))
        ->capture_default_str();
    cmd->add_option("--backup-dir", args->run.backupDir,
                    "Where paused regions' disk backups go (default $TMPDIR or /tmp)");
    cmd->add_flag("-q,--quiet", args->run.quiet, "Print nothing of memtool's own on stderr");
    cmd->footer(
        "stdout gets one line, \"attached PID\", once recording began. Exit codes: 0 the trace was "
        "written; 2 the process cannot be attached to (the reason on stderr); 125 the attach "
        "failed "
        "on the way. The program is never left stopped or changed: after the detach it runs as "
        "before.");
    return {cmd, [args] { return attachAction(*args); }, core::kExitRunFailed};
}

}  // namespace memtool::cli
