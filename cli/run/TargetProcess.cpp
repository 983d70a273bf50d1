#include "cli/run/TargetProcess.h"

#include <signal.h>
#include <sys/wait.h>

namespace memtool::cli {

namespace {
double secondsBetween(TargetProcess::Clock::time_point from, TargetProcess::Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}
}  // namespace

void TargetProcess::reaped(int status) {
    exited_ = true;
    status_ = status;
    exitedAt_ = Clock::now();
}

void TargetProcess::markDone() {
    if (!exited_) reaped(0);
}

void TargetProcess::reapIfExited() {
    int status = 0;
    if (!exited_ && !outside_ && wait4(pid_, &status, WNOHANG, &usage_) == pid_) reaped(status);
}

void TargetProcess::reapChildren() {
    reapIfExited();
    for (;;) {
        // Looked at first (WNOWAIT): the target's own status is reapIfExited's to take.
        siginfo_t info{};
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
        if (info.si_pid == pid_) {
            reapIfExited();
            if (!exited_) return;
        } else {
            int status = 0;
            if (waitpid(info.si_pid, &status, WNOHANG) == info.si_pid)
                orphans_[info.si_pid] = status;
        }
    }
}

void TargetProcess::waitForExit() {
    int status = 0;
    if (!exited_ && !outside_ && wait4(pid_, &status, 0, &usage_) == pid_) reaped(status);
}

bool TargetProcess::childrenLeft() const {
    siginfo_t info{};
    return waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

void TargetProcess::forward(int signal) {
    if (outside_ && stopAsked_) return stopAsked_();
    if (outside_) return markDone();  // memtool is asked to stop: the trace is written
    if (!exited_) kill(pid_, signal);
}

double TargetProcess::secondsSinceExit() const {
    return exited_ ? secondsBetween(exitedAt_, Clock::now()) : 0;
}

ProcessOutcome TargetProcess::orphanOutcome(pid_t pid) const {
    ProcessOutcome o;
    auto it = orphans_.find(pid);
    if (it != orphans_.end()) o.setExitStatus(it->second);
    return o;
}

ProcessOutcome TargetProcess::outcome() const {
    ProcessOutcome o;
    if (!outside_) o.setExitStatus(status_);  // an outside one runs on
    o.durationS = secondsBetween(started_, exitedAt_);
    return o;
}

uint64_t TargetProcess::maxRssBytes() const {
    return static_cast<uint64_t>(usage_.ru_maxrss) * 1024;
}  // KiB on Linux

double TargetProcess::cpuSeconds() const { return cpuSecondsOf(usage_); }

double cpuSecondsOf(const rusage& usage) {
    auto seconds = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace memtool::cli
