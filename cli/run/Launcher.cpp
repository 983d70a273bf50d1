#include "cli/run/Launcher.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cli/run/FileLimit.h"
#include "core/Error.h"

extern char** environ;

namespace memtool::cli {

namespace {

// memtool's environment with `changes` applied, as "NAME=VALUE" entries.
std::vector<std::string> environmentFor(const std::vector<EnvVariable>& changes) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    for (const EnvVariable& v : changes) {
        const std::string prefix = v.name + "=";
        auto same = [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; };
        auto it = std::find_if(env.begin(), env.end(), same);
        if (it == env.end())
            env.push_back(prefix + v.value);
        else if (!v.keepExisting)
            *it = prefix + v.value;
    }
    return env;
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// In the child: only async-signal-safe calls from here on (the parent built every string).
// The child of vfork() shares memory with memtool and runs on its stack until the
// exec: these calls change nothing memtool keeps (the signal mask and dispositions,
// and the file limit, are the child's own; execvpe searches PATH on the stack), and
// memtool installs no signal handler that could run here.
[[noreturn]] void execChild(char* const* argv, char* const* envp, const ChildSignals& signals,
                            int errorPipe) {
    sigaction(SIGPIPE, &signals.pipe, nullptr);
    sigprocmask(SIG_SETMASK, &signals.mask, nullptr);
    FileLimit::restoreForChild();  // the program gets the limit memtool was given
    execvpe(argv[0], argv, envp);
    int err = errno;
    ssize_t ignored = write(errorPipe, &err, sizeof err);
    (void)ignored;
    _exit(err == ENOENT ? core::kExitNotFound : core::kExitNotExecutable);
}

}  // namespace

TargetProcess launchTarget(const std::vector<std::string>& command,
                           const std::vector<EnvVariable>& environment,
                           const ChildSignals& signals) {
    const std::vector<std::string> env = environmentFor(environment);
    const std::vector<char*> argv = pointers(command), envp = pointers(env);
    int pipeFds[2];
    if (pipe2(pipeFds, O_CLOEXEC) != 0)
        throw core::Error(core::kExitRunFailed, std::string("pipe: ") + std::strerror(errno));
    // Best effort: without it an orphaned descendant's collector is refused.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const auto started = TargetProcess::Clock::now();
    // vfork, not fork: copying memtool's page tables took 1 ms of every run's start,
    // in front of the program (bench/history/runs.md, run 32).
    pid_t child = vfork();
    if (child < 0) {
        int err = errno;
        close(pipeFds[0]);
        close(pipeFds[1]);
        throw core::Error(core::kExitRunFailed, std::string("vfork: ") + std::strerror(err));
    }
    if (child == 0) execChild(argv.data(), envp.data(), signals, pipeFds[1]);
    close(pipeFds[1]);
    // The pipe closes on a successful exec (nothing read) or carries exec's errno.
    int execErrno = 0;
    ssize_t got;
    do {
        got = read(pipeFds[0], &execErrno, sizeof execErrno);
    } while (got < 0 && errno == EINTR);
    close(pipeFds[0]);
    if (got == sizeof execErrno) {
        int status;
        waitpid(child, &status, 0);
        throw core::Error(execErrno == ENOENT ? core::kExitNotFound : core::kExitNotExecutable,
                          "cannot run '" + command[0] + "': " + std::strerror(execErrno));
    }
    return TargetProcess(child, started);
}

}  // namespace memtool::cli
