#include "collectors/stacks/NativeUnwinder.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "collectors/engine/HighDescriptor.h"
#include "collectors/engine/OwnDescriptors.h"
#include "collectors/engine/Warn.h"
#include "collectors/preload/GotPatcher.h"
#if defined(__SANITIZE_THREAD__)
#include <execinfo.h>
#endif

namespace memtool::collectors {

void* realDlopen(const char* file, int mode) {
    using Fn = void* (*)(const char*, int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dlopen"));
    return real ? real(file, mode) : nullptr;
}

namespace {

// libunwind opens a pipe of its own (to test whether an address can be read,
// by writing a byte of it) when it starts, and keeps it for the process's life.
// Made in the program, it would take the lowest free numbers: the program's
// first open() would get 5 where it gets 3 bare, a program started with its
// stdout closed would find libunwind's pipe as its fd 1, and one that closes
// every descriptor and opens files again would have libunwind read from and
// write into them. Its pipe goes where the collector's own descriptors live,
// high and kept open (HighDescriptor.h, OwnDescriptors.h).
int unwinderPipe2(int fds[2], int flags) noexcept {
    static const auto real = MEMTOOL_ORIGINAL(pipe2);
    const int result = real(fds, flags);
    if (result == 0)
        for (int i = 0; i < 2; ++i) {
            fds[i] = moveHigh(fds[i]);
            own::keep(fds[i]);
        }
    return result;
}

// libunwind closes its pipe to open another (when reading it failed): then it is
// no longer the collector's.
int unwinderClose(int fd) noexcept {
    own::letGo(fd);
    return ::close(fd);
}

// Points libunwind's own imports of pipe2 and close at the two above; only its
// calls go there. (Unused in the TSan build, which unwinds with backtrace().)
[[maybe_unused]] void adoptUnwinderDescriptors(void* lib) {
    link_map* map = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map) return;
    const GotHook hooks[] = {MEMTOOL_GOT_HOOK(pipe2, unwinderPipe2),
                             MEMTOOL_GOT_HOOK(close, unwinderClose)};
    struct Search {
        ElfW(Addr) base;
        const GotHook* hooks;
        size_t count;
    } search{map->l_addr, hooks, std::size(hooks)};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* arg) {
            auto* s = static_cast<Search*>(arg);
            if (info->dlpi_addr != s->base) return 0;
            patchModuleImports(info, s->hooks, s->count);
            return 1;
        },
        &search);
}

}  // namespace

bool NativeUnwinder::load(const char** why) {
    const char* choice = getenv("MEMTOOL_NATIVE_UNWINDER");
    cfi_ = !(choice && std::strcmp(choice, "libunwind") == 0);
    if (debugLogOn())
        DebugLine().add("native stacks: ").add(cfi_ ? "memtool's CFI walk" : "libunwind");
#if defined(__SANITIZE_THREAD__)
    // The TSan build (the engine's own test, never injected): libunwind frees its
    // per-thread trace cache in a thread-specific destructor that takes a mutex,
    // and TSan may have finished the exiting thread by then (a crash in
    // MutexPreLock). glibc's backtrace() gives the same return addresses without
    // per-thread state.
    (void)why;
    backtrace_ = ::backtrace;
    return true;
#else
    void* lib = realDlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *why = "libunwind.so.8 is not installed; native stacks are off";
        return false;
    }
    // Before anything calls into it: its pipe is made on its first call.
    adoptUnwinderDescriptors(lib);
    // unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD): each thread
    // keeps its own cache of unwind info, so unwinding takes no global lock.
    using SetPolicy = int (*)(void*, int);
    auto setPolicy = reinterpret_cast<SetPolicy>(dlsym(lib, "_ULx86_64_set_caching_policy"));
    auto* space = static_cast<void**>(dlsym(lib, "_ULx86_64_local_addr_space"));
    constexpr int kCachePerThread = 2;  // UNW_CACHE_PER_THREAD
    if (setPolicy && space) setPolicy(*space, kCachePerThread);
    backtrace_ = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "unw_backtrace"));
    if (!backtrace_) {
        *why = "libunwind.so.8 has no unw_backtrace; native stacks are off";
        return false;
    }
    return true;
#endif
}

}  // namespace memtool::collectors
