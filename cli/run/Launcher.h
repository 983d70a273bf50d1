#pragma once
// Starting the program to profile: vfork, then in the child the signal mask and
// SIGPIPE's disposition memtool started with, and exec with the environment given. memtool becomes
// a child subreaper first, so that the program's descendants whose parents exit are re-parented to
// memtool rather than to init, and stay recognisable as the program's (CollectorListener). An exec
// that fails sends its errno back through a close-on-exec pipe, so "not found" (127) and "not
// executable" (126) are memtool's own errors, raised before it waits for a stream
// that will never come.

#include <signal.h>

#include <string>
#include <vector>

#include "cli/run/SignalRouter.h"
#include "cli/run/TargetProcess.h"

namespace memtool::cli {

// One variable of the target's environment, set over memtool's own.
struct EnvVariable {
    std::string name;
    std::string value;
    bool keepExisting = false;  // a value already in the environment wins
};

// Throws core::Error: 127 (not found), 126 (not executable), 125 (no pipe, no fork).
TargetProcess launchTarget(const std::vector<std::string>& command,
                           const std::vector<EnvVariable>& environment,
                           const ChildSignals& signals);

}  // namespace memtool::cli
