// `memtool ctl`'s command line: --format and --timeout, then the words that
// name the process (a pid, or a selection: --all, --rank N, --run ID) and the
// command (CtlCommand.h), which CLI11 does not read.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/Commands.h"
#include "cli/ctl/CtlCommand.h"
#include "core/Error.h"

namespace memtool::cli {

Command addCtlCommand(CLI::App& app) {
    auto ctl = std::make_shared<CtlOptions>();
    CLI::App* cmd = app.add_subcommand("ctl",
                                       "Command a process under memtool: list | PID status | "
                                       "PID pause [TAG...] | PID resume [TAG...] | PID yield | "
                                       "PID restore | PID tensors | PID snapshot; for PID, "
                                       "--all, --rank N or --run ID commands several at once");
    cmd->add_option("--format", ctl->format, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    cmd->add_option("--timeout", ctl->timeoutS, "Seconds to wait for the answer")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
                return ctlTimeoutSeconds(text)
                           ? std::string()
                           : std::string(kCtlTimeoutRule) + ", not '" + text + "'";
            },
            "SECONDS"))
        ->capture_default_str();
    // No positional: with prefix_command, CLI11 hands every word from the first positional on
    // (list, or the PID and its command with the command's own options, yield --to disk) to
    // remaining() untouched. A declared positional would let CLI11 drop unknown options.
    cmd->prefix_command();
    cmd->footer(
        "Words: list | PID status | PID pause [TAG...] | PID resume [TAG...] | "
        "PID yield [--to host|disk] [--wait S] | PID restore | "
        "PID tensors [--device D] [--verbose] [--wait S] | PID snapshot [-o FILE]\n\n"
        "In place of PID, a selection of the processes `ctl list` shows, each sent the command "
        "at once:\n"
        "  --all       every one of them\n"
        "  --rank N    those whose launcher set their rank to N (RANK, SLURM_PROCID, "
        "OMPI_COMM_WORLD_RANK, PMI_RANK)\n"
        "  --run ID    those of one memtool run (ctl list's RUN: its pid)\n"
        "Each line of a process's answer begins \"[pid P rank R] \"; --format json gives "
        "{\"processes\": [one object each]}. snapshot -o FILE: %p in FILE is each process's "
        "pid, needed when several are selected.\n"
        "Exit: 0 all succeeded; 1 some did not (named on stderr); 2 usage error; 3 none "
        "selected (or the PID is not under memtool); 4 another user's process.\n"
        "On a Slurm job: srun --overlap memtool ctl --all yield (see docs/pausable-memory.md)");
    auto action = [ctl, cmd] {
        // CLI11 marks where a prefix command's own options begin with a "--" of its own.
        ctl->words = cmd->remaining();
        std::erase(ctl->words, std::string("--"));
        return ctlCommand(*ctl);
    };
    return {cmd, action, core::kExitInternal};
}

}  // namespace memtool::cli
