#pragma once
// The signals `memtool run` handles arrive through a signalfd, read by the event
// loop: SIGCHLD reaps the target when it exits (and the orphans memtool adopted); SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to memtool go on to the target. The signals are blocked
// from construction until destruction, which restores the original mask; the target gets the
// original mask before exec.
//
// SIGPIPE is ignored from construction on, and stays so: memtool's own output (the summary
// on stderr, a trace on stdout) may go to a reader that has gone (`memtool run ... 2>&1 |
// head -1`), and the write failing must not kill memtool in place of reporting the program's
// exit. The target gets SIGPIPE's disposition as memtool found it.

#include <signal.h>

namespace memtool::cli {

class EventLoop;
class TargetProcess;

// What the program gets of memtool's signal state: what memtool was started with.
struct ChildSignals {
    sigset_t mask;
    struct sigaction pipe;  // SIGPIPE's disposition
};

class SignalRouter {
public:
    SignalRouter();  // throws core::Error (125) when there is no signalfd
    ~SignalRouter();
    SignalRouter(const SignalRouter&) = delete;
    SignalRouter& operator=(const SignalRouter&) = delete;

    // The mask and SIGPIPE's disposition memtool had before: the target's.
    const ChildSignals& forChild() const { return child_; }

    // Routes the signals to `target` from now on. Both must outlive the loop's use.
    void attach(EventLoop& loop, TargetProcess& target);

private:
    void route(TargetProcess& target);

    sigset_t handled_;
    ChildSignals child_{};  // also what the destructor restores
    int fd_ = -1;
};

}  // namespace memtool::cli
