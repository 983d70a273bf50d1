#include "collectors/control/PausedAccess.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "collectors/control/Regions.h"
#include "collectors/control/SignalChain.h"

namespace memtool::collectors::control {

namespace {

const Regions* gRegions = nullptr;
struct sigaction gPrevious;
std::atomic<bool> gInstalled{false};
// 1 while memtool ctl holds the program yielded: the futex word faulting threads
// wait on.
std::atomic<uint32_t> gHold{0};
std::atomic<uint32_t> gHeld{0};  // threads that waited, since the hold began
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word");

uint32_t* holdWord() { return reinterpret_cast<uint32_t*>(&gHold); }

// Async-signal-safe output: one line put together on the stack and written with
// one write(2), so that threads faulting at once do not interleave their pieces
// (a pipe keeps a write of up to PIPE_BUF bytes whole).
class Line {
public:
    Line& add(const char* s) {
        const size_t n = std::min(std::strlen(s), sizeof text_ - used_);
        std::memcpy(text_ + used_, s, n);
        used_ += n;
        return *this;
    }
    Line& addHex(uint64_t v) {
        char digits[16];
        int n = 0;
        do {
            digits[n++] = "0123456789abcdef"[v & 15];
            v >>= 4;
        } while (v && n < 16);
        char hex[19] = "0x";
        for (int i = 0; i < n; ++i) hex[2 + i] = digits[n - 1 - i];
        hex[2 + n] = '\0';
        return add(hex);
    }
    void write() const {
        ssize_t ignored = ::write(STDERR_FILENO, text_, used_);
        (void)ignored;
    }

private:
    char text_[256];
    size_t used_ = 0;
};

void onSegv(int sig, siginfo_t* info, void* context) {
    const uint64_t address = reinterpret_cast<uint64_t>(info->si_addr);
    if (info->si_code == SEGV_ACCERR && gHold.load(std::memory_order_acquire)) {
        // A yield: memory made read-only or released under a thread that ran on.
        // It waits for restore, then the access is made again (and, if that memory
        // is still refused, handled below as any other fault).
        const int savedErrno = errno;
        gHeld.fetch_add(1, std::memory_order_relaxed);
        while (gHold.load(std::memory_order_acquire))
            syscall(SYS_futex, holdWord(), FUTEX_WAIT_PRIVATE, 1, nullptr, nullptr, 0);
        errno = savedErrno;
        return;
    }
    char tag[64];
    if (gRegions && info->si_code == SEGV_ACCERR && gRegions->pausedAt(address, tag, sizeof tag)) {
        Line()
            .add("memtool: the program touched paused memory at ")
            .addHex(address)
            .add(" (region '")
            .add(tag)
            .add("', paused by memtool: resume it before use); ending the program with SIGSEGV\n")
            .write();
        // The default action, for a core dump and an exit status that says SIGSEGV.
        signal(SIGSEGV, SIG_DFL);
        return;  // the access faults again, now fatally
    }
    // Not ours: what would have happened without memtool.
    if (callPrevious(gPrevious, sig, info, context)) return;
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &fallback, nullptr);
}

}  // namespace

uint32_t holdFaultsWhileYielded(bool hold) {
    if (hold) {
        gHeld.store(0, std::memory_order_relaxed);
        gHold.store(1, std::memory_order_release);
        return 0;
    }
    gHold.store(0, std::memory_order_release);
    syscall(SYS_futex, holdWord(), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
    return gHeld.load(std::memory_order_relaxed);
}

uint32_t threadsHeld() { return gHeld.load(std::memory_order_relaxed); }

uint32_t threadsWaiting() {
    return gHold.load(std::memory_order_acquire) ? gHeld.load(std::memory_order_relaxed) : 0;
}

void installPausedAccessHandler(const Regions& regions) {
    if (gInstalled.exchange(true)) return;
    gRegions = &regions;
    // A child forked while its parent is held yielded (by a thread that ran on) is
    // not yielded: its faults are its own, not to wait for a restore that never
    // comes to it.
    pthread_atfork(nullptr, nullptr, [] { gHold.store(0, std::memory_order_relaxed); });
    struct sigaction action {};
    action.sa_sigaction = onSegv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &gPrevious);
}

}  // namespace memtool::collectors::control
