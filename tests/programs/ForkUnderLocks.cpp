// Forks while another thread is inside the collector holding one of its locks,
// then lets the child allocate: the child must never start with a lock some
// thread of its parent held (it would hang at its first event).
//
//   fork_under_locks scan    the module-scan lock: thread A dlopens libc10, and the
//                            collector connects under that lock (reading the
//                            launcher's variables with getenv)
//   fork_under_locks engine  the engine's lock: thread A flushes (memtool_flush),
//                            and the collector sends under that lock
//
// This program's own getenv and send are exported (-rdynamic), so they stand in
// for the C library's in the collector's calls: thread A parks inside them, holding
// the lock, until this program's fork handler lets it go. That handler runs before
// the collector's (handlers registered later prepare first), so a collector whose
// handler takes the lock waits there for A; one that did not would fork with the
// lock held. A watchdog alarm turns a child's hang into a failure. Depends on
// nothing of memtool's: libc10 is found with dlopen, memtool_flush with dlsym.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

enum class Park { None, Scan, Engine };
std::atomic<Park> gArmed{Park::None};
thread_local bool tParker = false;  // thread A
int gParked[2];                     // A -> main: "I hold the lock now"
int gRelease[2];                    // fork handler -> A: "go on"

void parkHere(Park where) {
    Park expected = where;
    if (!tParker || !gArmed.compare_exchange_strong(expected, Park::None)) return;
    char byte = 1;
    if (write(gParked[1], &byte, 1) != 1) _exit(3);
    if (read(gRelease[0], &byte, 1) != 1) _exit(3);
}

void releaseParker() {
    char byte = 1;
    if (write(gRelease[1], &byte, 1) != 1) _exit(3);
}

using AllocCpu = void* (*)(size_t);
using FreeCpu = void (*)(void*);
AllocCpu gAlloc = nullptr;
FreeCpu gFree = nullptr;

void* openC10() {
    void* c10 = dlopen("libc10.so", RTLD_NOW);
    if (!c10) {
        std::fprintf(stderr, "no libc10.so: %s\n", dlerror());
        _exit(2);
    }
    gAlloc = reinterpret_cast<AllocCpu>(dlsym(c10, "_ZN3c109alloc_cpuEm"));
    gFree = reinterpret_cast<FreeCpu>(dlsym(c10, "_ZN3c108free_cpuEPv"));
    if (!gAlloc || !gFree) _exit(2);
    return c10;
}

void* connectInThread(void*) {
    tParker = true;
    openC10();  // the collector connects under its module-scan lock
    return nullptr;
}

void* flushInThread(void*) {
    tParker = true;
    gFree(gAlloc(3000));  // something buffered
    using Flush = void (*)();
    auto flush = reinterpret_cast<Flush>(dlsym(RTLD_DEFAULT, "memtool_flush"));
    if (flush) flush();  // the collector sends under its engine lock
    return nullptr;
}

}  // namespace

extern "C" char* getenv(const char* name) {
    using Fn = char* (*)(const char*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getenv"));
    if (std::strcmp(name, "RANK") == 0) parkHere(Park::Scan);
    return real(name);
}

extern "C" ssize_t send(int fd, const void* data, size_t len, int flags) {
    using Fn = ssize_t (*)(int, const void*, size_t, int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "send"));
    parkHere(Park::Engine);
    return real(fd, data, len, flags);
}

int main(int argc, char** argv) {
    const bool scan = argc > 1 && std::strcmp(argv[1], "scan") == 0;
    if (pipe(gParked) != 0 || pipe(gRelease) != 0) return 2;
    if (!scan) openC10();
    pthread_atfork(releaseParker, nullptr, nullptr);
    gArmed = scan ? Park::Scan : Park::Engine;
    pthread_t parker;
    if (pthread_create(&parker, nullptr, scan ? connectInThread : flushInThread, nullptr) != 0)
        return 2;
    char byte;
    if (read(gParked[0], &byte, 1) != 1) return 2;  // A is inside the collector, holding the lock
    const pid_t child = fork();
    if (child == 0) {
        alarm(60);  // a watchdog: a child that inherited a held lock hangs here
        if (scan) openC10();
        void* p = gAlloc(1000000);
        gFree(p);
        _exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) return 2;
    pthread_join(parker, nullptr);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::printf("child failed (status %d)\n", status);
        return 1;
    }
    void* p = gAlloc(2000000);
    gFree(p);
    std::printf("forked under the %s lock\n", scan ? "module-scan" : "engine");
    return 0;
}
