#pragma once
// The program `memtool run` launched, from fork to reaping. It is reaped with
// wait4 on its own pid (when SIGCHLD says it changed), which also gives its peak
// resident memory. Once reaped its pid may name another process, so nothing is
// sent to it any more.

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>

#include "trace/TraceBuilder.h"

namespace memtool::cli {

// User + system seconds of a getrusage/wait4 record.
double cpuSecondsOf(const rusage& usage);

class TargetProcess {
public:
    using Clock = std::chrono::steady_clock;

    TargetProcess(pid_t pid, Clock::time_point started) : pid_(pid), started_(started) {}
    // A process memtool did not start (memtool.track's, `memtool run --track PID`):
    // never waited for or signalled; it is done with once its tracker says so
    // (markDone) or memtool is asked to stop (a signal memtool would forward).
    static TargetProcess outside(pid_t pid, Clock::time_point started) {
        TargetProcess t(pid, started);
        t.outside_ = true;
        return t;
    }

    pid_t pid() const { return pid_; }
    bool exited() const { return exited_; }
    bool isOutside() const { return outside_; }
    // An outside target's track ended (its tracker closed memtool's stdin), or
    // (resumeOutside) another begins.
    void markDone();
    void resumeOutside() {
        if (outside_) exited_ = false;
    }
    // An outside target that memtool is asked to stop profiling (a signal memtool
    // would forward) calls `f` instead of being done with at once: memtool attach
    // first detaches from it.
    void onStopAsked(std::function<void()> f) { stopAsked_ = std::move(f); }

    // Reaps it if it has exited; never blocks.
    void reapIfExited();
    // The same, and every other child that exited: descendants of the target whose
    // parents died, which memtool adopts as a child subreaper (Launcher.h).
    void reapChildren();
    // Blocks until it has exited.
    void waitForExit();
    // Sends `signal` to it while it runs.
    void forward(int signal);

    // Whether memtool still has a child, living or not yet reaped: once the target
    // is reaped, a descendant it left behind (adopted by memtool) that may yet
    // connect or end its stream.
    bool childrenLeft() const;

    double secondsSinceExit() const;
    // How a descendant memtool reaped (its parent had exited) ended: exit code or
    // signal; nothing for the target itself and for those their parents reaped.
    ProcessOutcome orphanOutcome(pid_t pid) const;
    // How it ended: exit code or signal, and the time from fork to exit.
    ProcessOutcome outcome() const;
    uint64_t maxRssBytes() const;
    // CPU seconds (user + system) of the process and the children it waited for.
    double cpuSeconds() const;

private:
    void reaped(int status);

    pid_t pid_;
    Clock::time_point started_;
    Clock::time_point exitedAt_;
    bool exited_ = false;
    bool outside_ = false;
    std::function<void()> stopAsked_;
    int status_ = 0;
    rusage usage_{};
    std::map<pid_t, int> orphans_;  // wait statuses of reaped descendants, by pid
};

}  // namespace memtool::cli
