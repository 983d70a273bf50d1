#pragma once
// A handler of the collector's for a signal the program may handle too: what it
// does not take goes on to the handler that was there before it.

#include <signal.h>

namespace memtool::collectors::control {

// Calls `previous` (as sigaction saved it) for the signal; false when it was
// the default action or ignore, which the caller then decides about.
inline bool callPrevious(const struct sigaction& previous, int sig, siginfo_t* info,
                         void* context) {
    if (previous.sa_flags & SA_SIGINFO) {
        if (!previous.sa_sigaction) return false;
        previous.sa_sigaction(sig, info, context);
        return true;
    }
    if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) return false;
    previous.sa_handler(sig);
    return true;
}

}  // namespace memtool::collectors::control
