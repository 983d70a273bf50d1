#include "cli/RunCommand.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/CollectorLocator.h"
#include "cli/ElfSymbolizer.h"
#include "core/Aggregator.h"
#include "core/Error.h"
#include "core/StreamDecoder.h"
#include "core/Units.h"
#include "reporters/TraceJson.h"

namespace memtool::cli {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// One collector's connection: its stream is folded as it arrives.
struct Connection {
    int fd = -1;
    core::Aggregator aggregator;
    core::StreamDecoder decoder{aggregator};
    // Symbolized as node records arrive, on the CLI's own core, while the target
    // runs: only the trace is left to write once it exits.
    ElfSymbolizer symbolizer;
    size_t modulesSeen = 0;
    size_t nodesSeen = 1;  // node 0 is the root
    Clock::time_point opened = Clock::now();
    double durationS = 0;
    std::string error;

    Connection() = default;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() {
        if (fd >= 0) close(fd);
    }
    void symbolizeNew() {
        const auto& modules = aggregator.modules();
        for (; modulesSeen < modules.size(); ++modulesSeen) symbolizer.addModule(modules[modulesSeen]);
        const auto& nodes = aggregator.nativeNodes();
        for (; nodesSeen < nodes.size(); ++nodesSeen) symbolizer.symbolize(nodes[nodesSeen].ip);
    }
    void finish() {
        if (fd >= 0) close(fd);
        fd = -1;
        durationS = secondsSince(opened);
    }
};

// The private rendezvous: a 0700 directory holding the listening socket.
class SocketDir {
public:
    SocketDir() {
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/memtool-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data()))
            throw core::Error(core::kExitRunFailed, "cannot create a directory in " + tmpl + ": " + std::strerror(errno));
        dir_ = buf.data();
        path_ = dir_ + "/collector.sock";
        fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        if (fd_ < 0 || path_.size() >= sizeof addr.sun_path) {
            throw core::Error(core::kExitRunFailed, "cannot create the collector socket " + path_);
        }
        std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
        if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 128) != 0)
            throw core::Error(core::kExitRunFailed, "cannot listen on " + path_ + ": " + std::strerror(errno));
    }
    ~SocketDir() {
        if (fd_ >= 0) close(fd_);
        unlink(path_.c_str());
        rmdir(dir_.c_str());
    }
    SocketDir(const SocketDir&) = delete;
    SocketDir& operator=(const SocketDir&) = delete;

    int fd() const { return fd_; }
    const std::string& path() const { return path_; }

private:
    std::string dir_, path_;
    int fd_ = -1;
};

// Signals arrive through a signalfd; the original mask comes back on scope exit
// and in the child before exec.
class SignalRouter {
public:
    SignalRouter() {
        sigemptyset(&set_);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&set_, s);
        sigprocmask(SIG_BLOCK, &set_, &old_);
        fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd_ < 0) throw core::Error(core::kExitRunFailed, std::string("signalfd: ") + std::strerror(errno));
    }
    ~SignalRouter() {
        close(fd_);
        sigprocmask(SIG_SETMASK, &old_, nullptr);
    }
    SignalRouter(const SignalRouter&) = delete;
    SignalRouter& operator=(const SignalRouter&) = delete;

    int fd() const { return fd_; }
    const sigset_t& original() const { return old_; }

private:
    sigset_t set_, old_;
    int fd_ = -1;
};

std::string joinOptions(const RunOptions& o, bool cudaHooks) {
    return fmt::format("native={},python={},cudahooks={}", o.nativeStacks ? 1 : 0, o.pythonStacks ? 1 : 0,
                       cudaHooks ? 1 : 0);
}

// How this run records CUDA memory.
struct CudaPlan {
    std::string injection;  // CUDA_INJECTION64_PATH to set, or empty
    bool runtimeHooks = false;
    std::string torchBridge;
    std::string warning;  // for the launched process's trace
};

CudaPlan planCuda(const RunOptions& options, const std::string& collector) {
    CudaPlan plan;
    if (options.cuda == "off") return plan;
    const std::string injection = locateCudaInjection(collector);
    const char* theirs = std::getenv("CUDA_INJECTION64_PATH");
    const bool slotTaken = theirs && *theirs;
    if (options.cuda == "cupti") {
        if (injection.empty())
            throw core::Error(core::kExitBadInput, "--cuda cupti: this memtool was built without CUPTI");
        if (slotTaken)
            throw core::Error(core::kExitBadInput, std::string("--cuda cupti: CUDA_INJECTION64_PATH is already set (") +
                                                       theirs + "); use --cuda runtime-hooks");
        plan.injection = injection;
    } else if (options.cuda == "runtime-hooks" || injection.empty() || slotTaken) {
        // The driver takes one injection library: the user's (nsys, ...) keeps it.
        if (options.cuda == "auto" && slotTaken) {
            plan.warning = std::string("CUDA_INJECTION64_PATH was already set (") + theirs +
                           "); CUDA memory was recorded through runtime API hooks (cudaMalloc & co.; direct "
                           "driver calls are not seen)";
            if (!options.quiet) std::cerr << "memtool: " << plan.warning << '\n';
        }
        plan.runtimeHooks = true;
    } else {
        plan.injection = injection;
    }
    plan.torchBridge = locateTorchBridge(collector);
    return plan;
}

[[noreturn]] void execTarget(const RunOptions& options, const std::string& collector, const CudaPlan& cuda,
                             const std::string& socketPath, const sigset_t& mask, int errorPipe) {
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    const char* existing = std::getenv("LD_PRELOAD");
    std::string preload = collector;
    if (existing && *existing) preload += std::string(":") + existing;
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv(core::kEnvSocket, socketPath.c_str(), 1);
    setenv(core::kEnvOptions, joinOptions(options, cuda.runtimeHooks).c_str(), 1);
    // The CUDA driver loads this when (and only if) the program initializes CUDA.
    if (!cuda.injection.empty()) setenv("CUDA_INJECTION64_PATH", cuda.injection.c_str(), 1);
    // A bridge named in the environment wins (tests, a bridge built elsewhere).
    if (!cuda.torchBridge.empty()) setenv(core::kEnvTorchBridge, cuda.torchBridge.c_str(), 0);
    std::vector<char*> argv;
    for (const auto& a : options.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    int err = errno;
    ssize_t ignored = write(errorPipe, &err, sizeof err);
    (void)ignored;
    _exit(err == ENOENT ? core::kExitNotFound : core::kExitNotExecutable);
}

}  // namespace

RunResult runCommand(const RunOptions& options) {
    if (options.command.empty()) throw core::Error(core::kExitBadInput, "run: no command given (memtool run -- CMD ...)");
    const std::string collector = locateCollector();
    const CudaPlan cuda = planCuda(options, collector);
    SocketDir socketDir;
    SignalRouter signals;

    int pipeFds[2];
    if (pipe2(pipeFds, O_CLOEXEC) != 0)
        throw core::Error(core::kExitRunFailed, std::string("pipe: ") + std::strerror(errno));
    const Clock::time_point started = Clock::now();
    pid_t child = fork();
    if (child < 0) throw core::Error(core::kExitRunFailed, std::string("fork: ") + std::strerror(errno));
    if (child == 0) execTarget(options, collector, cuda, socketDir.path(), signals.original(), pipeFds[1]);
    close(pipeFds[1]);
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
                          "cannot run '" + options.command[0] + "': " + std::strerror(execErrno));
    }

    std::vector<std::unique_ptr<Connection>> connections;
    bool childDone = false;
    int childStatus = 0;
    rusage childUsage{};
    double childDuration = 0;
    Clock::time_point childExit;
    std::vector<uint8_t> buf(1 << 20);
    // After the target exits, processes it left running get this long to finish
    // their streams; then they are written as incomplete.
    constexpr double kGraceS = 10.0;

    for (;;) {
        size_t open = 0;
        for (const auto& c : connections) open += c->fd >= 0;
        if (childDone && open == 0) {
            // A collector may still sit in the listen queue: take it before leaving.
            pollfd p{socketDir.fd(), POLLIN, 0};
            if (poll(&p, 1, 0) <= 0) break;
        }
        if (childDone && secondsSince(childExit) > kGraceS) break;

        std::vector<pollfd> fds{{socketDir.fd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
        std::vector<Connection*> polled;
        for (const auto& c : connections) {
            if (c->fd < 0) continue;
            fds.push_back({c->fd, POLLIN, 0});
            polled.push_back(c.get());
        }
        int timeoutMs = childDone ? 100 : -1;
        int n = poll(fds.data(), fds.size(), timeoutMs);
        if (n < 0 && errno != EINTR) throw core::Error(core::kExitRunFailed, std::string("poll: ") + std::strerror(errno));
        if (n <= 0) continue;

        if (fds[1].revents & POLLIN) {
            signalfd_siginfo si;
            while (read(signals.fd(), &si, sizeof si) == sizeof si) {
                int sig = static_cast<int>(si.ssi_signo);
                if (sig == SIGCHLD) {
                    int status;
                    if (!childDone && wait4(child, &status, WNOHANG, &childUsage) == child) {
                        childDone = true;
                        childStatus = status;
                        childDuration = secondsSince(started);
                        childExit = Clock::now();
                    }
                } else if (!childDone && si.ssi_code != SI_KERNEL) {
                    // A terminal's Ctrl-C already went to the whole foreground group
                    // (SI_KERNEL); anything sent to memtool alone is passed on.
                    kill(child, sig);
                }
            }
        }
        if (fds[0].revents & POLLIN) {
            for (;;) {
                int fd = accept4(socketDir.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) break;
                auto c = std::make_unique<Connection>();
                c->fd = fd;
                connections.push_back(std::move(c));
            }
        }
        for (size_t i = 0; i < polled.size(); ++i) {
            if (!(fds[2 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            Connection& c = *polled[i];
            ssize_t r = read(c.fd, buf.data(), buf.size());
            if (r > 0) {
                try {
                    c.decoder.feed(buf.data(), static_cast<size_t>(r));
                    c.symbolizeNew();
                } catch (const core::ProtocolError& e) {
                    c.error = std::string("the stream broke: ") + e.what();
                    c.finish();
                }
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                if (r < 0) c.error = std::string("reading the stream failed: ") + std::strerror(errno);
                c.finish();
            }
        }
    }
    if (!childDone) {  // cannot happen: the loop only ends after the child
        wait4(child, &childStatus, 0, &childUsage);
        childDuration = secondsSince(started);
    }

    core::Trace trace;
    trace.memtoolVersion = MEMTOOL_VERSION;
    ProcessOutcome targetOutcome;
    if (WIFEXITED(childStatus)) targetOutcome.exitCode = WEXITSTATUS(childStatus);
    if (WIFSIGNALED(childStatus)) targetOutcome.exitSignal = WTERMSIG(childStatus);
    targetOutcome.durationS = childDuration;
    const uint64_t targetRss = static_cast<uint64_t>(childUsage.ru_maxrss) * 1024;  // KiB on Linux

    // processes[0] is the launched program (the last image it exec'd); then the rest.
    Connection* target = nullptr;
    for (const auto& c : connections)
        if (c->aggregator.handshake() && c->aggregator.handshake()->pid == child) target = c.get();
    if (target) {
        ProcessOutcome o = targetOutcome;
        o.streamError = target->error;
        target->symbolizeNew();
        trace.processes.push_back(buildProcessTrace(target->aggregator, target->symbolizer, o, options.siteMode));
        trace.processes.back().maxRssBytes = targetRss;
        if (!cuda.warning.empty()) trace.processes.back().warnings.push_back(cuda.warning);
    } else {
        core::ProcessTrace p;
        p.pid = child;
        p.ppid = getpid();
        p.command = options.command;
        p.exitCode = targetOutcome.exitCode;
        p.exitSignal = targetOutcome.exitSignal;
        p.durationS = childDuration;
        p.maxRssBytes = targetRss;
        p.nativeStacks = options.nativeStacks;
        p.pythonStacks = options.pythonStacks;
        p.complete = true;
        p.stream.verified = true;
        p.warnings.push_back("the program loaded no allocator memtool tracks (no libc10 CPU allocator)");
        trace.processes.push_back(std::move(p));
    }
    for (const auto& c : connections) {
        if (c.get() == target || !c->aggregator.handshake()) continue;
        ProcessOutcome o;
        o.durationS = c->fd >= 0 ? secondsSince(c->opened) : c->durationS;
        o.streamError = c->fd >= 0 ? "the process was still running when the target exited" : c->error;
        c->symbolizeNew();
        trace.processes.push_back(buildProcessTrace(c->aggregator, c->symbolizer, o, options.siteMode));
    }
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd))
        for (auto& p : trace.processes) p.cwd = cwd;
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    trace.cliMaxRssBytes = static_cast<uint64_t>(self.ru_maxrss) * 1024;
    reporters::saveTrace(trace, options.output);

    if (!options.quiet) {
        const core::ProcessTrace& p = trace.processes[0];
        std::string peaks;
        for (const auto& [name, d] : p.devices) peaks += fmt::format(", {} peak {}", name, core::formatBytes(d.peakBytes));
        std::cerr << fmt::format("memtool: wrote {} ({} process{}{}{})\n", options.output, trace.processes.size(),
                                 trace.processes.size() == 1 ? "" : "es", peaks,
                                 p.complete ? "" : ", INCOMPLETE: " + p.incompleteReason);
    }

    RunResult result;
    result.exitCode = targetOutcome.exitCode.value_or(0);
    result.signal = targetOutcome.exitSignal.value_or(0);
    return result;
}

}  // namespace memtool::cli
