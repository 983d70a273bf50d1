#include "collectors/control/PausedAccess.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "collectors/control/Regions.h"

namespace memtool::collectors::control {

namespace {

const Regions* gRegions = nullptr;
struct sigaction gPrevious;
std::atomic<bool> gInstalled{false};

// Async-signal-safe output: write(2) of fixed pieces, the address in hex.
void say(const char* s) {
    ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
    (void)ignored;
}

void sayHex(uint64_t v) {
    char buf[19] = "0x";
    char digits[16];
    int n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && n < 16);
    for (int i = 0; i < n; ++i) buf[2 + i] = digits[n - 1 - i];
    buf[2 + n] = '\0';
    say(buf);
}

void onSegv(int sig, siginfo_t* info, void* context) {
    const uint64_t address = reinterpret_cast<uint64_t>(info->si_addr);
    char tag[64];
    if (gRegions && info->si_code == SEGV_ACCERR && gRegions->pausedAt(address, tag, sizeof tag)) {
        say("memtool: the program touched paused memory at ");
        sayHex(address);
        say(" (region '");
        say(tag);
        say("', paused by memtool: resume it before use); ending the program with SIGSEGV\n");
        // The default action, for a core dump and an exit status that says SIGSEGV.
        signal(SIGSEGV, SIG_DFL);
        return;  // the access faults again, now fatally
    }
    // Not ours: what would have happened without memtool.
    if (gPrevious.sa_flags & SA_SIGINFO) {
        if (gPrevious.sa_sigaction) return gPrevious.sa_sigaction(sig, info, context);
    } else if (gPrevious.sa_handler != SIG_DFL && gPrevious.sa_handler != SIG_IGN) {
        return gPrevious.sa_handler(sig);
    }
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &fallback, nullptr);
}

}  // namespace

void installPausedAccessHandler(const Regions& regions) {
    if (gInstalled.exchange(true)) return;
    gRegions = &regions;
    struct sigaction action {};
    action.sa_sigaction = onSegv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &gPrevious);
}

}  // namespace memtool::collectors::control
