#pragma once
// Calls functions inside another process, on one of its threads, as a debugger
// does (x86-64 Linux, ptrace): the thread is seized and interrupted wherever it
// is, each call runs on its own stack below the thread's (past the red zone)
// with a return address of 0, whose fault hands the thread back, and every
// register (general, x87/SSE/AVX state) is put back after each call, so that
// between two calls the thread is exactly as it was stopped. A system call the
// thread slept in is restarted when it goes on (its saved registers say so).
//
// Between calls (Step) the thread is in a ptrace stop with its own registers:
// if memtool dies there, the kernel lets it go on as if never stopped.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace memtool::cli {

// Why ptrace refused to seize `pid` (errno `err`), as a user can act on it;
// `yamaScope`: kernel.yama.ptrace_scope (0 where there is no Yama).
std::string seizeRefusal(pid_t pid, int err, int yamaScope);

class RemoteThread {
public:
    // One argument of a call: a number, or a string copied onto the call's stack
    // (the function gets its address).
    struct Arg {
        uint64_t value = 0;
        std::string text;
        bool isText = false;
        static Arg number(uint64_t v) { return Arg{v, {}, false}; }
        static Arg string(std::string s) { return Arg{0, std::move(s), true}; }
    };

    // Seizes thread `tid` of process `pid` and waits for it to stop. Throws
    // core::Error (kExitBadInput where it cannot be traced: its reason; 125 when it
    // ended meanwhile).
    RemoteThread(pid_t pid, pid_t tid);
    ~RemoteThread();  // lets the thread go on, its registers as they were
    RemoteThread(const RemoteThread&) = delete;
    RemoteThread& operator=(const RemoteThread&) = delete;

    // fn(args...) on the thread (at most six arguments); its return value (rax).
    // Signals that arrive for the thread meanwhile are delivered to it. Throws
    // core::Error (125) when the process ends or faults inside the call, or the
    // call does not return within `timeoutS`.
    uint64_t call(uint64_t fn, const std::vector<Arg>& args, double timeoutS);
    // Lets the thread run on, a millisecond at a time, until it is stopped where
    // `locking(rip)` is false, or blocked in a system call that waits (futex, read,
    // poll, sigwait...: no lock of malloc's or the loader's is held across those);
    // throws core::Error (125) after `timeoutS`.
    void stopOutside(const std::function<bool(uint64_t)>& locking, double timeoutS);
    // `bytes` bytes at `address` in the process (a NUL-terminated string: up to it).
    std::string readString(uint64_t address, size_t most) const;

private:
    // Interrupts the seized thread and keeps its registers.
    void stop();
    // Interrupts the thread (`resume`: from the stop it is in) and waits for the
    // interrupt's stop, delivering the signals that come first.
    void park(bool resume);
    // Waits for the thread's next stop; its wait status. Throws when it ended.
    int waitStop(double timeoutS);
    void restoreRegisters();

    pid_t pid_;
    pid_t tid_;
    bool seized_ = false;
    std::vector<unsigned char> regs_;   // struct user_regs_struct, as the thread stopped
    std::vector<unsigned char> xsave_;  // its x87/SSE/AVX state (NT_X86_XSTATE)
};

}  // namespace memtool::cli
