#pragma once
// The signals `memtool run` handles arrive through a signalfd, read by the event
// loop: SIGCHLD reaps the target when it exits (and the orphans memtool adopted); SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to memtool go on to the target. The signals are blocked
// from construction until destruction, which restores the original mask; the target gets the
// original mask before exec.

#include <signal.h>

namespace memtool::cli {

class EventLoop;
class TargetProcess;

class SignalRouter {
public:
    SignalRouter();  // throws core::Error (125) when there is no signalfd
    ~SignalRouter();
    SignalRouter(const SignalRouter&) = delete;
    SignalRouter& operator=(const SignalRouter&) = delete;

    // The mask memtool had before: the target's.
    const sigset_t& originalMask() const { return original_; }

    // Routes the signals to `target` from now on. Both must outlive the loop's use.
    void attach(EventLoop& loop, TargetProcess& target);

private:
    void route(TargetProcess& target);

    sigset_t handled_, original_;
    int fd_ = -1;
};

}  // namespace memtool::cli
