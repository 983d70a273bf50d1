#pragma once
// memtool's subcommands as main sees them: each add*Command declares its options
// on the CLI11 app (in the order --help lists them) and returns what runs once
// CLI11 has parsed it. Each lives in a file of its own: report, check and diff in
// cli/commands/, run and ctl beside their work (cli/run/, cli/ctl/).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace memtool::cli {

struct Command {
    CLI::App* app = nullptr;      // the subcommand: its action runs when CLI11 parsed it
    std::function<int()> action;  // its work, from the values its options were given
    // What runGuarded returns when the action throws anything but a core::Error. A
    // fault of memtool's own in `run` keeps the code that says the program was not
    // profiled (125); report, check and diff say it is a bug (70), not bad input.
    int unexpectedExitCode = 0;
};

// `tail`: memtool's words from the first "--" after `run` on (that "--" first),
// which CLI11 is not shown; empty when there is none.
Command addRunCommand(CLI::App& app, std::vector<std::string> tail);
Command addCtlCommand(CLI::App& app);
Command addAttachCommand(CLI::App& app);
Command addReportCommand(CLI::App& app);
Command addCheckCommand(CLI::App& app);
Command addDiffCommand(CLI::App& app);

}  // namespace memtool::cli
