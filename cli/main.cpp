// memtool: the command line. main registers the subcommands (cli/Commands.h,
// one file each), parses, and runs the one given. Errors surface as core::Error,
// printed as one line; exit codes are listed in README.md.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/CommandGuard.h"
#include "cli/Commands.h"
#include "core/Error.h"

namespace {

using namespace memtool;

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

// `memtool run [options] [--] COMMAND...`: from the first "--" on, every word is
// the command's (cli/run/RunSubcommand.cpp). Returns how many words of argv CLI11
// parses; `tail` gets the rest.
int argcBeforeRunTail(int argc, char** argv, std::vector<std::string>& tail) {
    if (argc > 1 && std::string_view(argv[1]) == "run") {
        for (int i = 2; i < argc; ++i) {
            if (std::string_view(argv[i]) != "--") continue;
            tail.assign(argv + i, argv + argc);
            return i;
        }
    }
    return argc;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"memtool: memory profiler and controller for PyTorch and CUDA programs"};
    app.set_version_flag("--version", std::string("memtool ") + MEMTOOL_VERSION);
    app.require_subcommand(1);

    std::vector<std::string> runTail;
    const int parsedArgc = argcBeforeRunTail(argc, argv, runTail);
    // In the order --help lists them (a braced list is evaluated left to right).
    const std::vector<cli::Command> commands{cli::addRunCommand(app, std::move(runTail)),
                                             cli::addAttachCommand(app),
                                             cli::addCtlCommand(app),
                                             cli::addReportCommand(app),
                                             cli::addCheckCommand(app),
                                             cli::addDiffCommand(app)};

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
    for (const cli::Command& command : commands)
        if (command.app->parsed())
            return cli::runGuarded(command.action, command.unexpectedExitCode, std::cerr);
    return 0;
}
