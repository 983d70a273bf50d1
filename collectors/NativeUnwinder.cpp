#include "collectors/NativeUnwinder.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#if defined(__SANITIZE_THREAD__)
#include <execinfo.h>
#endif

namespace memtool::collectors {

void* realDlopen(const char* file, int mode) {
    using Fn = void* (*)(const char*, int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dlopen"));
    return real ? real(file, mode) : nullptr;
}

bool NativeUnwinder::load(const char** why) {
    const char* choice = getenv("MEMTOOL_NATIVE_UNWINDER");
    cfi_ = !(choice && std::strcmp(choice, "libunwind") == 0);
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
