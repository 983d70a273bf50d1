#include "cli/run/SignalRouter.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cli/run/EventLoop.h"
#include "cli/run/TargetProcess.h"
#include "core/Error.h"

namespace memtool::cli {

SignalRouter::SignalRouter() {
    sigemptyset(&handled_);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD})
        sigaddset(&handled_, s);
    sigprocmask(SIG_BLOCK, &handled_, &child_.mask);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &child_.pipe);
    fd_ = signalfd(-1, &handled_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) {
        int err = errno;
        sigprocmask(SIG_SETMASK, &child_.mask, nullptr);
        sigaction(SIGPIPE, &child_.pipe, nullptr);
        throw core::Error(core::kExitRunFailed, std::string("signalfd: ") + std::strerror(err));
    }
}

SignalRouter::~SignalRouter() {
    close(fd_);
    sigprocmask(SIG_SETMASK, &child_.mask, nullptr);
}

void SignalRouter::attach(EventLoop& loop, TargetProcess& target) {
    loop.watch(fd_, [this, &target] { route(target); });
}

void SignalRouter::route(TargetProcess& target) {
    signalfd_siginfo si;
    while (read(fd_, &si, sizeof si) == sizeof si) {
        const int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) {
            target.reapChildren();
        } else if (si.ssi_code != SI_KERNEL) {
            // A terminal's Ctrl-C already went to the whole foreground group
            // (SI_KERNEL); anything sent to memtool alone is passed on.
            target.forward(sig);
        }
    }
}

}  // namespace memtool::cli
