// A C++ program without a Python interpreter, for `memtool ctl PID yield`:
// 64 MiB of CPU storage from libc10's allocator (what `--pausable all` makes
// pausable), filled with a pattern; then it waits for SIGUSR1 and checks the
// pattern.
//
//   courtesy_user plain   waits in sigwait: it offers no safe point (yield is refused)
//   courtesy_user marks   calls memtool_safe_point() between short waits (yield parks it there)
//   courtesy_user late    as marks, but says "ready PID" first, then takes a second to
//                         start: no stream and no safe point yet when ctl may ask
//
// Prints "ready PID ADDRESS" (the storage's, in hex) when it waits, then
// "intact 1" (or 0) and exits 0.
#include <c10/core/impl/alloc_cpu.h>
#include <dlfcn.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    const bool late = argc > 1 && std::strcmp(argv[1], "late") == 0;
    const bool marks = late || (argc > 1 && std::strcmp(argv[1], "marks") == 0);
    if (late) {
        std::printf("ready %d\n", static_cast<int>(getpid()));
        std::fflush(stdout);
        const timespec setUp{1, 0};  // what a real program's start-up takes, before its loop
        nanosleep(&setUp, nullptr);
    }
    constexpr size_t kBytes = 64u << 20;
    auto* data = static_cast<uint64_t*>(c10::alloc_cpu(kBytes));
    for (size_t i = 0; i < kBytes / 8; ++i) data[i] = i * 0x9e3779b97f4a7c15ull;

    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, nullptr);
    // The collector's C API, found in the running process (collectors/CollectorApi.h).
    auto safePoint = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "memtool_safe_point"));
    if (!late) {
        std::printf("ready %d %jx\n", static_cast<int>(getpid()),
                    static_cast<uintmax_t>(reinterpret_cast<uintptr_t>(data)));
        std::fflush(stdout);
    }
    if (marks && safePoint) {
        const timespec step{0, 10 * 1000 * 1000};
        for (;;) {  // the program's main loop: a safe point between steps
            safePoint();
            if (sigtimedwait(&usr1, nullptr, &step) == SIGUSR1) break;
        }
    } else {
        int sig = 0;
        sigwait(&usr1, &sig);
    }
    bool intact = true;
    for (size_t i = 0; i < kBytes / 8; ++i) intact &= data[i] == i * 0x9e3779b97f4a7c15ull;
    c10::free_cpu(data);
    std::printf("intact %d\n", intact ? 1 : 0);
    return 0;
}
