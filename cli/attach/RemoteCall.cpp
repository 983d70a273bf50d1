#include "cli/attach/RemoteCall.h"

#include <elf.h>
#include <errno.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "core/Error.h"

namespace memtool::cli {

namespace {

constexpr size_t kXsaveMostBytes = 64 * 1024;  // AVX-512 needs ~2.7 KiB; AMX ~11 KiB

user_regs_struct& regsOf(std::vector<unsigned char>& bytes) {
    return *reinterpret_cast<user_regs_struct*>(bytes.data());
}

double since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// kernel.yama.ptrace_scope; 0 where the kernel has no Yama.
int yamaScope() {
    std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
    int scope = 0;
    return yama >> scope ? scope : 0;
}

}  // namespace

std::string seizeRefusal(pid_t pid, int err, int scope) {
    if (err == ESRCH) return fmt::format("attach: no process {}", pid);
    if (err != EPERM)
        return fmt::format("attach: cannot trace process {}: {}", pid, std::strerror(err));
    if (scope > 0)
        return fmt::format(
            "attach: the kernel forbids tracing process {} (kernel.yama.ptrace_scope = {}: {}); "
            "run memtool attach as root, or set the sysctl to 0",
            pid, scope,
            scope == 1 ? "only a process's ancestors may trace it" : "only root may trace");
    return fmt::format(
        "attach: not permitted to trace process {} (another user's, not dumpable, or traced "
        "already by a debugger)",
        pid);
}

RemoteThread::RemoteThread(pid_t pid, pid_t tid) : pid_(pid), tid_(tid) {
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0)
        throw core::Error(core::kExitBadInput, seizeRefusal(pid, errno, yamaScope()));
    seized_ = true;
    try {
        stop();
    } catch (...) {
        if (seized_) ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);  // its registers untouched
        throw;
    }
}

void RemoteThread::park(bool resume) {
    if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0 ||
        (resume && ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0))
        throw core::Error(core::kExitRunFailed, fmt::format("attach: cannot stop process {}: {}",
                                                            pid_, std::strerror(errno)));
    // Signals that were on their way come first: each goes on to the thread.
    for (;;) {
        const int status = waitStop(10);
        if (status >> 16 == PTRACE_EVENT_STOP) return;
        ptrace(PTRACE_CONT, tid_, nullptr,
               reinterpret_cast<void*>(static_cast<long>(WSTOPSIG(status))));
    }
}

void RemoteThread::stop() {
    const pid_t pid = pid_, tid = tid_;
    park(false);
    regs_.resize(sizeof(user_regs_struct));
    if (ptrace(PTRACE_GETREGS, tid, nullptr, regs_.data()) != 0)
        throw core::Error(core::kExitRunFailed,
                          fmt::format("attach: cannot read process {}'s registers: {}", pid,
                                      std::strerror(errno)));
    xsave_.resize(kXsaveMostBytes);
    iovec v{xsave_.data(), xsave_.size()};
    if (ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &v) != 0)
        throw core::Error(core::kExitRunFailed,
                          fmt::format("attach: cannot read process {}'s floating-point state: {}",
                                      pid, std::strerror(errno)));
    xsave_.resize(v.iov_len);
}

RemoteThread::~RemoteThread() {
    if (!seized_) return;
    restoreRegisters();
    ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
}

void RemoteThread::restoreRegisters() {
    ptrace(PTRACE_SETREGS, tid_, nullptr, regs_.data());
    iovec v{xsave_.data(), xsave_.size()};
    ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &v);
}

int RemoteThread::waitStop(double timeoutS) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        int status = 0;
        const pid_t r = waitpid(tid_, &status, __WALL | WNOHANG);
        if (r == tid_ && WIFSTOPPED(status)) return status;
        if (r == tid_ || (r < 0 && errno == ECHILD)) {
            seized_ = false;  // gone: nothing to let go of
            const std::string how = r == tid_ && WIFEXITED(status)
                                        ? fmt::format("exited with {}", WEXITSTATUS(status))
                                    : r == tid_ && WIFSIGNALED(status)
                                        ? fmt::format("was killed by signal {}", WTERMSIG(status))
                                        : std::string("ended");
            throw core::Error(core::kExitRunFailed,
                              fmt::format("attach: process {} {} during the attach", pid_, how));
        }
        if (r < 0 && errno != EINTR)
            throw core::Error(
                core::kExitRunFailed,
                fmt::format("attach: waiting for process {}: {}", pid_, std::strerror(errno)));
        if (since(start) > timeoutS)
            throw core::Error(
                core::kExitRunFailed,
                fmt::format("attach: process {} did not answer within {:g} s", pid_, timeoutS));
        // The tracee's stops come as SIGCHLD to this process, whose main thread
        // reads them from a signalfd: this thread looks every 200 µs.
        timespec pause{0, 200'000};
        nanosleep(&pause, nullptr);
    }
}

uint64_t RemoteThread::call(uint64_t fn, const std::vector<Arg>& args, double timeoutS) {
    if (args.size() > 6)
        throw core::Error(core::kExitInternal, "attach: a call of more than six arguments");
    std::vector<unsigned char> bytes = regs_;
    user_regs_struct& r = regsOf(bytes);
    // Below the thread's own stack: past its red zone (128 bytes), with room to spare.
    uint64_t sp = (r.rsp - 1024) & ~uint64_t{15};
    auto poke = [&](uint64_t address, const void* data, size_t n) {
        for (size_t i = 0; i < n; i += 8) {
            long word = 0;
            std::memcpy(&word, static_cast<const char*>(data) + i, std::min<size_t>(8, n - i));
            if (ptrace(PTRACE_POKEDATA, tid_, reinterpret_cast<void*>(address + i),
                       reinterpret_cast<void*>(word)) == 0)
                continue;
            if (errno == ESRCH) waitStop(1);  // it is dying: throws how it ended
            throw core::Error(core::kExitRunFailed,
                              fmt::format("attach: cannot write process {}'s stack: {}", pid_,
                                          std::strerror(errno)));
        }
    };
    uint64_t values[6] = {};
    for (size_t i = 0; i < args.size(); ++i) {
        if (!args[i].isText) {
            values[i] = args[i].value;
            continue;
        }
        const size_t n = (args[i].text.size() + 1 + 7) & ~size_t{7};
        std::vector<char> text(n, '\0');
        std::memcpy(text.data(), args[i].text.data(), args[i].text.size());
        sp -= n;
        poke(sp, text.data(), n);
        values[i] = sp;
    }
    sp &= ~uint64_t{15};
    sp -= 8;  // the return address: 0, whose fault ends the call
    const uint64_t zero = 0;
    poke(sp, &zero, 8);
    r.rsp = sp;
    r.rip = fn;
    r.rdi = values[0];
    r.rsi = values[1];
    r.rdx = values[2];
    r.rcx = values[3];
    r.r8 = values[4];
    r.r9 = values[5];
    r.rax = 0;
    r.orig_rax = static_cast<uint64_t>(-1);  // not inside a system call: nothing to restart
    if (ptrace(PTRACE_SETREGS, tid_, nullptr, bytes.data()) != 0 ||
        ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) {
        if (errno == ESRCH) waitStop(1);  // it is dying: throws how it ended
        throw core::Error(core::kExitRunFailed,
                          fmt::format("attach: cannot start a call in process {}: {}", pid_,
                                      std::strerror(errno)));
    }
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        const int status = waitStop(timeoutS - since(start));
        const int sig = WSTOPSIG(status);
        if (status >> 16 == PTRACE_EVENT_STOP) {  // a group stop, or an interrupt
            ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
            continue;
        }
        if (sig == SIGSEGV) {
            std::vector<unsigned char> now(sizeof(user_regs_struct));
            ptrace(PTRACE_GETREGS, tid_, nullptr, now.data());
            const user_regs_struct& n = regsOf(now);
            // The thread goes back to what it was doing either way, and stops again
            // at once: in an interrupt's stop, not this fault's, whose signal a
            // memtool that died here would leave the kernel to deliver.
            restoreRegisters();
            park(true);
            if (n.rip == 0) return n.rax;
            throw core::Error(
                core::kExitRunFailed,
                fmt::format("attach: process {} faulted at {:#x} inside memtool's call "
                            "(it goes on where it was stopped)",
                            pid_, n.rip));
        }
        // The program's own signal: delivered, as it would have been.
        ptrace(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    }
}

namespace {

// System calls a thread waits in without holding malloc's or the loader's lock.
bool waitingCall(uint64_t nr) {
    switch (static_cast<long>(nr)) {
        case SYS_futex:
        case SYS_rt_sigtimedwait:
        case SYS_rt_sigsuspend:
        case SYS_pause:
        case SYS_nanosleep:
        case SYS_clock_nanosleep:
        case SYS_read:
        case SYS_poll:
        case SYS_ppoll:
        case SYS_select:
        case SYS_pselect6:
        case SYS_epoll_wait:
        case SYS_epoll_pwait:
        case SYS_wait4:
        case SYS_waitid:
        case SYS_accept:
        case SYS_accept4:
        case SYS_recvfrom:
        case SYS_recvmsg:
            return true;
        default:
            return false;
    }
}

}  // namespace

void RemoteThread::stopOutside(const std::function<bool(uint64_t)>& locking, double timeoutS) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        const user_regs_struct& r = regsOf(regs_);
        // orig_rax: the system call it was stopped in; -1 when it ran user code.
        const bool waiting = static_cast<int64_t>(r.orig_rax) >= 0 && waitingCall(r.orig_rax);
        if (waiting || !locking(r.rip)) return;
        if (since(start) > timeoutS)
            throw core::Error(core::kExitRunFailed,
                              fmt::format("attach: process {}'s main thread stayed inside its C "
                                          "library for {:g} s (where it may hold malloc's or the "
                                          "loader's lock): nothing was changed; try again",
                                          pid_, timeoutS));
        if (ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) {
            if (errno == ESRCH) waitStop(1);  // it is dying: throws how it ended
            throw core::Error(
                core::kExitRunFailed,
                fmt::format("attach: cannot resume process {}: {}", pid_, std::strerror(errno)));
        }
        timespec run{0, 1'000'000};  // a millisecond of its own work, then stopped again
        nanosleep(&run, nullptr);
        stop();
    }
}

std::string RemoteThread::readString(uint64_t address, size_t most) const {
    std::string s;
    while (s.size() < most) {
        errno = 0;
        const long word =
            ptrace(PTRACE_PEEKDATA, tid_, reinterpret_cast<void*>(address + s.size()), nullptr);
        if (errno != 0) break;
        const char* c = reinterpret_cast<const char*>(&word);
        for (size_t i = 0; i < sizeof word; ++i) {
            if (c[i] == '\0' || s.size() >= most) return s;
            s.push_back(c[i]);
        }
    }
    return s;
}

}  // namespace memtool::cli
