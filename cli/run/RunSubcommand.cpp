// `memtool run`'s command line: its options, and the RunOptions they make for
// runCommand (RunCommand.h). The command to profile and its own options are
// not CLI11's to read (runCommandWords).

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/Commands.h"
#include "cli/policy/UsagePoller.h"
#include "cli/run/RunCommand.h"
#include "core/CtlArgs.h"
#include "core/Error.h"
#include "core/SiteChoice.h"
#include "core/Units.h"

namespace memtool::cli {
namespace {

// What run's options were given, as words where RunOptions keeps something else.
struct RunArgs {
    RunOptions run;
    std::string siteMode = "user";
    bool noNative = false, noPython = false;
    std::string pausable = "none";
    std::string hostPool = "all";
    std::string hostBudget;
    std::string events;
    std::vector<std::string> tail;  // from the first "--" on (addRunCommand)
};

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

[[noreturn]] void dieLike(int sig) {
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    kill(getpid(), sig);
    _exit(128 + sig);  // the signal was ignored or caught elsewhere
}

// Where the trace goes, which stacks are recorded, and what memtool prints.
void addRecordingOptions(CLI::App* cmd, RunArgs& a) {
    cmd->add_option("-o,--output", a.run.output, "Where to write the trace")->capture_default_str();
    cmd->add_flag("--no-native", a.noNative, "Do not record native (C/C++) call stacks");
    CLI::Option* noPython =
        cmd->add_flag("--no-python", a.noPython, "Do not record Python call stacks");
    cmd->add_flag("--modules", a.run.moduleScopes,
                  "Name each nn.Module instance on the stacks of what its forward and its "
                  "backward allocate (report --group-by module)")
        ->excludes(noPython);
    cmd->add_option("--site", a.siteMode,
                    "Hotspot site: innermost frame of user code, innermost of all, or the library "
                    "call the user's code made (wrappers skipped)")
        ->check(CLI::IsMember({"user", "all", "library"}))
        ->capture_default_str();
    CLI::Option* quietFlag =
        cmd->add_flag("-q,--quiet", a.run.quiet, "Print nothing of memtool's own");
    cmd->add_flag("--live", a.run.live,
                  "Show memory on the terminal while the program runs (q leaves the view)")
        ->excludes(quietFlag);
}

CLI::Validator waitChildrenSeconds() {
    return CLI::Validator(
        [](const std::string& text) -> std::string {
            char* end = nullptr;
            const double s = std::strtod(text.c_str(), &end);
            if (!core::isDecimalText(text.c_str()) || *end != '\0' || !(s >= 0 && s <= 1e7))
                return "'" + text + "' is not a number of seconds from 0 to 10000000";
            return {};
        },
        "SECONDS");
}

CLI::Validator hostPoolSize() {
    return CLI::Validator(
        [](const std::string& text) -> std::string {
            if (text == "all" || core::parseSize(text)) return {};
            return "'" + text + "' is not a size (e.g. 0, 8GiB, 500MB) or all";
        },
        "SIZE|all");
}

// "P%" -> P (above 0, at most 100); nullopt when `text` is no percent.
std::optional<double> percentOf(const std::string& text) {
    if (text.size() < 2 || text.back() != '%') return std::nullopt;
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    const double p = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !(p > 0 && p <= 100)) return std::nullopt;
    return p;
}

CLI::Validator hostBudgetSize() {
    return CLI::Validator(
        [](const std::string& text) -> std::string {
            if (percentOf(text) || core::parseSize(text)) return {};
            return "'" + text +
                   "' is not a size (e.g. 8GiB, 500MB) or a percent of host memory (e.g. 50%)";
        },
        "SIZE|P%");
}

// --host-budget in bytes: a percent is of the host memory the run may use (the
// tightest cgroup limit over memtool run, whose child the program is, else
// MemTotal).
uint64_t hostBudgetBytes(const std::string& text) {
    const std::optional<double> p = percentOf(text);
    if (!p) return *core::parseSize(text);
    std::optional<policy::HostMemory> host;
    if (const auto group = policy::findCgroup(getpid())) host = policy::readCgroup(*group);
    if (!host) host = policy::meminfoMemory();
    if (!host || host->total == 0)
        throw core::Error(
            core::kExitBadInput,
            "--host-budget " + text + ": the host's memory cannot be read (give a size instead)");
    return static_cast<uint64_t>(*p / 100.0 * static_cast<double>(host->total));
}

CLI::Validator eventsCount() {
    return CLI::Validator(
        [](const std::string& text) -> std::string {
            if (text == "all") return {};
            char* end = nullptr;
            const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
            if (!core::isDecimalText(text.c_str()) || *end != '\0' || n == 0 || n > kMaxEventRing)
                return "'" + text + "' is not a number of events from 1 to " +
                       std::to_string(kMaxEventRing) + ", or all";
            return {};
        },
        "N|all");
}

// How the target's memory is recorded and paused, and how long its children get.
void addTargetOptions(CLI::App* cmd, RunArgs& a) {
    cmd->add_option(
           "--pausable", a.pausable,
           "all: every CUDA allocation and every CPU storage of 64 KiB or more belongs to a "
           "region from the "
           "start (memtool ctl PID yield takes it all); none: only the program's own regions")
        ->check(CLI::IsMember({"all", "none"}))
        ->capture_default_str();
    cmd->add_option("--cuda", a.run.cuda,
                    "How CUDA memory is recorded: auto (CUPTI, else runtime hooks), cupti, "
                    "runtime-hooks, off")
        ->check(CLI::IsMember({"auto", "cupti", "runtime-hooks", "off"}))
        ->capture_default_str();
    cmd->add_option("--wait-children", a.run.waitChildrenS,
                    "After the program exits, how many seconds the processes it left running "
                    "get to finish; those still running then are traced as incomplete")
        ->check(waitChildrenSeconds())
        ->capture_default_str();
    cmd->add_option("--host-pool", a.hostPool,
                    "The most pinned host memory (host backups of paused CUDA regions) a resume "
                    "keeps for the next pause, as pinning is slow: a size (0: none) or all")
        ->check(hostPoolSize())
        ->capture_default_str();
    cmd->add_option("--host-budget", a.hostBudget,
                    "The most pinned host memory host backups (and the host pool) may hold: "
                    "a pause or yield whose host backup would go beyond it puts that region "
                    "on disk instead (a size, or a percent of the host's memory)")
        ->check(hostBudgetSize());
    cmd->add_flag("--verify", a.run.verify,
                  "Checksum each backed-up allocation at its pause (on its device) and check it "
                  "after its resume: content that comes back different fails the resume, "
                  "loudly, naming the allocation");
    cmd->add_option("--backup-dir", a.run.backupDir,
                    "Where paused regions' disk backups go, as files no name points to ("
                    "default $TMPDIR or /tmp)")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
                return text.empty() ? "an empty name is no directory" : "";
            },
            "DIR"));
    cmd->add_option("--policy", a.run.policyFile,
                    "A memory policy (JSON, docs/policies.md): rules that gc, pause, resume, "
                    "yield or restore when a reading crosses a threshold")
        ->check(CLI::ExistingFile);
    cmd->add_option("--events", a.events,
                    "Keep the last N events of each process (allocations, frees, refused "
                    "requests, with their stacks), or all, in a log beside the trace "
                    "(docs/events.md)")
        ->check(eventsCount());
    cmd->add_option("--poll", a.run.pollMs,
                    "Read the devices, host memory and RSS every MS milliseconds into the "
                    "trace (a policy polls at its own interval_ms)")
        ->check(CLI::Range(10, 60000));
    // memtool.track's companion (python/memtool/_track.py starts it): not listed.
    cmd->add_option("--track", a.run.trackPid,
                    "Profile the running process PID from inside (memtool.track)")
        ->check(CLI::Range(1, 1 << 30))
        ->group("");
    cmd->add_flag("--serve", a.run.serve, "With --track: serve block after block (memtool.track)")
        ->group("");
}

// Runs the command; ends memtool as the signal that ended the command did.
int runAction(RunArgs& a, const CLI::App& cmd) {
    RunOptions& run = a.run;
    run.pausableAll = a.pausable == "all";
    if (a.hostPool != "all") run.hostPoolBytes = core::parseSize(a.hostPool);
    if (!a.hostBudget.empty()) run.hostBudgetBytes = hostBudgetBytes(a.hostBudget);
    if (a.events == "all")
        run.events.all = true;
    else if (!a.events.empty())
        run.events.limit = std::stoull(a.events);
    run.nativeStacks = !a.noNative;
    run.pythonStacks = !a.noPython;
    run.siteMode = *core::parseSiteMode(a.siteMode);
    run.command = runCommandWords(cmd.remaining(), a.tail);
    RunResult r = runCommand(run);
    if (r.signal) dieLike(r.signal);
    return r.exitCode;
}

}  // namespace

Command addRunCommand(CLI::App& app, std::vector<std::string> tail) {
    auto args = std::make_shared<RunArgs>();
    args->tail = std::move(tail);
    CLI::App* cmd =
        app.add_subcommand("run", "Run a command under the profiler and write trace.json");
    addRecordingOptions(cmd, *args);
    addTargetOptions(cmd, *args);
    // No positional: with prefix_command, CLI11 hands the command and everything after
    // it to remaining() untouched, so options after the command are the command's
    // (memtool run python train.py -o out.pt), with or without "--", as in time and nice.
    cmd->prefix_command();
    cmd->footer(
        "COMMAND [ARGS...]: the program to profile, with its own options; "
        "memtool's options go before it (a \"--\" before it is optional)");
    return {cmd, [args, cmd] { return runAction(*args, *cmd); }, core::kExitRunFailed};
}

}  // namespace memtool::cli
