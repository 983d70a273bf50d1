#pragma once
// `memtool run`: launch a command with the collector injected, fold the streams
// of every process that connects, write trace.json when the command exits.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "cli/stream/EventRecorder.h"
#include "trace/TraceBuilder.h"

namespace memtool::cli {

struct RunOptions {
    std::vector<std::string> command;
    std::string output = "memtool.trace.json";
    bool nativeStacks = true;
    bool pythonStacks = true;
    // --modules: each nn.Module instance named on its forward's and backward's stacks.
    bool moduleScopes = false;
    SiteMode siteMode = SiteMode::User;
    bool quiet = false;
    // Show memory on the terminal while the program runs (cli/live/LiveView).
    bool live = false;
    // How CUDA memory is recorded: "auto" (CUPTI where built and the driver's
    // injection slot is free, else runtime hooks), "cupti", "runtime-hooks", "off".
    std::string cuda = "auto";
    // Where paused regions' disk backups go: a private directory made inside it
    // for this run (default: $TMPDIR or /tmp), removed with what is left when the
    // run ends.
    std::string backupDir;
    // --pausable all: every allocation memtool can serve belongs to a region (tag
    // "default" unless the program names one), so `memtool ctl PID yield` can take
    // all of it away.
    bool pausableAll = false;
    // --host-pool: the most pinned host memory (host backups of CUDA regions) a
    // resume keeps for the next pause; unset: all of it.
    std::optional<uint64_t> hostPoolBytes;
    // --host-budget: the most pinned host memory host backups and the pool may
    // hold (Regions::setHostBudget); unset: no budget.
    std::optional<uint64_t> hostBudgetBytes;
    // --verify: every backed-up allocation checksummed at its pause, checked
    // after its resume.
    bool verify = false;
    // After the program exits, how long the processes it left running get to end
    // their streams (--wait-children); those still running then are written as
    // incomplete.
    double waitChildrenS = 10;
    // --policy FILE: every process of the run under it (cli/policy); --poll MS:
    // the machine read every MS ms into the trace (0: not unless a policy asks).
    std::string policyFile;
    uint32_t pollMs = 0;
    // --events N|all: the last N events of each process, or all, kept in a log
    // beside the trace (cli/stream/EventRecorder.h).
    EventsOption events;
    // memtool.track's companion (`memtool run --track PID`, no command): the
    // process PID, running already, streams to this run from inside. What its
    // collector needs is printed on stdout as one JSON line; the track ends when
    // stdin ends (python/memtool/_track.py).
    pid_t trackPid = 0;
    // With trackPid: one companion for block after block (pytest --memtool). Each
    // block's trace path comes on stdin ("trace PATH") before it, its end after it
    // ("end"); once its trace is written memtool says "written" (or "failed WHY") on
    // stdout; stdin's end ends memtool.
    bool serve = false;
    // memtool attach PID (trackPid): the collector is injected into the running
    // process (cli/attach), which streams until durationS passes (0: no limit),
    // memtool is asked to stop, or the program ends; then memtool detaches.
    bool attach = false;
    double durationS = 0;
};

struct RunResult {
    int exitCode = 0;  // the target's exit code
    int signal = 0;    // non-zero when a signal ended the target
};

RunResult runCommand(const RunOptions& options);

// What `memtool run` says on stderr at the end (unless -q): the file (no files:
// -o /dev/null), the program's peaks, the largest of any other process, and what
// is wrong.
std::string runSummary(const core::Trace& trace, const std::vector<std::string>& files);

}  // namespace memtool::cli
