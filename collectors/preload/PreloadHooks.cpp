// The LD_PRELOAD front end: the library constructor and destructor, dlopen,
// _exit, kill, exec, posix_spawn, close and __libc_start_main interposition, and the exported C
// surface (collectors/CollectorApi.h). Everything here calls the collector (Collector.h) and
// nothing else.

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "collectors/Collector.h"
#include "collectors/CollectorApi.h"
#include "collectors/ascend/AclHooks.h"
#include "collectors/control/ControlChannel.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/Regions.h"
#include "collectors/cuda/CudaRuntimeHooks.h"
#include "collectors/engine/OwnDescriptors.h"
#include "collectors/engine/ThreadState.h"
#include "collectors/preload/CallerDlopen.h"
#include "collectors/preload/ProgramEnd.h"
#include "collectors/stacks/ModuleScopes.h"
#include "collectors/stacks/NativeUnwinder.h"
#include "collectors/torch/TorchBridgeLoader.h"

namespace memtool::collectors {
namespace {

// The C library's exec and spawn functions, found before anything can call them:
// a vfork child (subprocess) runs in its parent's memory and must not look them
// up then. execv and execvp are execve and execvpe with the environment.
struct ExecFunctions {
    decltype(&::execve) execve = nullptr;
    decltype(&::execvpe) execvpe = nullptr;
    decltype(&::fexecve) fexecve = nullptr;
    decltype(&::posix_spawn) posixSpawn = nullptr;
    decltype(&::posix_spawnp) posixSpawnp = nullptr;
};
ExecFunctions gExec;
int (*gRealKill)(pid_t, int) = nullptr;
struct WaitFunctions {
    decltype(&::waitpid) waitpid = nullptr;
    decltype(&::wait4) wait4 = nullptr;
    decltype(&::wait) wait = nullptr;
    decltype(&::waitid) waitid = nullptr;
};
WaitFunctions gWait;
// The C library's close family (close_range and closefrom may be missing: the
// system calls stand in).
struct CloseFunctions {
    decltype(&::close) close = nullptr;
    decltype(&::close_range) closeRange = nullptr;
    decltype(&::closefrom) closeFrom = nullptr;
};
CloseFunctions gClose;

int realClose(int fd) {
    return gClose.close ? gClose.close(fd) : static_cast<int>(syscall(SYS_close, fd));
}

int realCloseRange(unsigned first, unsigned last, int flags) {
    if (gClose.closeRange) return gClose.closeRange(first, last, flags);
    return static_cast<int>(syscall(SYS_close_range, first, last, flags));
}

// [first, last] closed but for the collector's own descriptors (OwnDescriptors.h):
// the ranges between them, by `closeRange`; `closeTail` closes from the last gap.
template <typename CloseRange, typename CloseTail>
int closeAroundOwn(unsigned first, unsigned last, CloseRange closeRange, CloseTail closeTail) {
    int own[own::kMaxOwnDescriptors];
    const size_t n = own::ownedIn(first, last, own);
    if (n == 0) return closeTail(first);  // none of them in it: the call as made
    int rc = 0, error = 0;
    auto keepFirstFailure = [&](int result) {
        if (result != 0 && rc == 0) {
            rc = -1;
            error = errno;
        }
    };
    unsigned from = first;
    for (size_t i = 0; i < n; ++i) {
        const unsigned fd = static_cast<unsigned>(own[i]);
        if (fd > from) keepFirstFailure(closeRange(from, fd - 1));
        if (fd + 1 > from) from = fd + 1;
    }
    if (from <= last) keepFirstFailure(closeTail(from));
    if (rc != 0) errno = error;
    return rc;
}

// `sig` would end this process now: its default action terminates, that action is
// in place, and the calling thread does not block it.
bool endsTheProcess(int sig) {
    switch (sig) {
        case 0:
        case SIGKILL:  // asks for no clean-up at all, as from outside
        case SIGCHLD:
        case SIGCONT:
        case SIGURG:
        case SIGWINCH:
        case SIGSTOP:
        case SIGTSTP:
        case SIGTTIN:
        case SIGTTOU:
            return false;  // no signal, ignored or stopping by default
        default:
            break;
    }
    struct sigaction action {};
    sigset_t blocked;
    if (sigaction(sig, nullptr, &action) != 0 || pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0)
        return false;
    return action.sa_handler == SIG_DFL && !(action.sa_flags & SA_SIGINFO) &&
           !sigismember(&blocked, sig);
}

void findExecFunctions() {
    gRealKill = reinterpret_cast<int (*)(pid_t, int)>(dlsym(RTLD_NEXT, "kill"));
    gWait.waitpid = reinterpret_cast<decltype(&::waitpid)>(dlsym(RTLD_NEXT, "waitpid"));
    gWait.wait4 = reinterpret_cast<decltype(&::wait4)>(dlsym(RTLD_NEXT, "wait4"));
    gWait.wait = reinterpret_cast<decltype(&::wait)>(dlsym(RTLD_NEXT, "wait"));
    gWait.waitid = reinterpret_cast<decltype(&::waitid)>(dlsym(RTLD_NEXT, "waitid"));
    gClose.close = reinterpret_cast<decltype(&::close)>(dlsym(RTLD_NEXT, "close"));
    gClose.closeRange = reinterpret_cast<decltype(&::close_range)>(dlsym(RTLD_NEXT, "close_range"));
    gClose.closeFrom = reinterpret_cast<decltype(&::closefrom)>(dlsym(RTLD_NEXT, "closefrom"));
    gExec.execve = reinterpret_cast<decltype(&::execve)>(dlsym(RTLD_NEXT, "execve"));
    gExec.execvpe = reinterpret_cast<decltype(&::execvpe)>(dlsym(RTLD_NEXT, "execvpe"));
    gExec.fexecve = reinterpret_cast<decltype(&::fexecve)>(dlsym(RTLD_NEXT, "fexecve"));
    gExec.posixSpawn = reinterpret_cast<decltype(&::posix_spawn)>(dlsym(RTLD_NEXT, "posix_spawn"));
    gExec.posixSpawnp =
        reinterpret_cast<decltype(&::posix_spawnp)>(dlsym(RTLD_NEXT, "posix_spawnp"));
}

// `start` given the child's environment `envp` completed with memtool's variables
// (ChildEnvironment.h), on this frame's stack: nothing is allocated, so it runs
// in a vfork child too. Not inlined: the room goes when the call returns.
template <typename Start>
[[gnu::noinline]] int withChildEnvironment(char* const* envp, Start start) {
    const ChildEnvironment& child = childEnvironment();
    const size_t room = child.roomFor(envp);
    if (room == 0) return start(envp);
    return start(child.complete(envp, __builtin_alloca(room)));
}

// An exec ends this image's stream first (its memory goes with it, and its
// collector's buffer would be lost); one that fails goes on with a stream that
// continues it. errno is the exec's.
template <typename Call>
int aroundExec(Call call) {
    beforeExec();
    const int rc = call();
    const int saved = errno;
    afterFailedExec();
    errno = saved;
    return rc;
}

int execPath(const char* path, char* const argv[], char* const envp[]) {
    if (!gExec.execve) return errno = ENOSYS, -1;
    return aroundExec([&] {
        return withChildEnvironment(
            envp, [&](char* const* env) { return gExec.execve(path, argv, env); });
    });
}

// `file` looked up on PATH, as execvpe does.
int execSearched(const char* file, char* const argv[], char* const envp[]) {
    if (!gExec.execvpe) return errno = ENOSYS, -1;
    return aroundExec([&] {
        return withChildEnvironment(
            envp, [&](char* const* env) { return gExec.execvpe(file, argv, env); });
    });
}

// posix_spawn or posix_spawnp (`spawn`, the C library's) with the environment completed.
int spawnCompleted(decltype(&::posix_spawn) spawn, pid_t* pid, const char* file,
                   const posix_spawn_file_actions_t* actions, const posix_spawnattr_t* attributes,
                   char* const argv[], char* const envp[]) {
    if (!spawn) return ENOSYS;
    return withChildEnvironment(
        envp, [&](char* const* env) { return spawn(pid, file, actions, attributes, argv, env); });
}

// execl's arguments up to its terminating null, into `argv` (room for `max`).
size_t collectArgs(const char* first, va_list args, const char** argv, size_t max) {
    size_t n = 0;
    argv[n++] = first;
    while (argv[n - 1] && n < max) argv[n++] = va_arg(args, const char*);
    if (n == max) argv[max - 1] = nullptr;
    return n;
}
constexpr size_t kMaxExeclArgs = 4096;

__attribute__((constructor)) void collectorStart() {
    findExecFunctions();
    if (startCollector()) refreshModules();
}

__attribute__((destructor)) void collectorStop() { finishCollector(core::ExitKind::Normal); }

// A child reaped here may be a fork child that died of a signal: its stream was
// cut short and only this process learns how it ended. `wait` is called with a
// status to fill: the caller's, or ours when it passed none (a null status
// pointer stays null to the caller).
template <typename Wait>
pid_t reportingReaped(int* status, Wait wait) {
    int mine = 0;
    int* into = status ? status : &mine;
    const pid_t got = wait(into);
    if (got > 0) childReaped(got, *into);
    return got;
}

}  // namespace
}  // namespace memtool::collectors

extern "C" {

// noinline: the return address must be the program's call site.
__attribute__((visibility("default"), noinline)) void* dlopen(const char* file, int mode) {
    memtool::collectors::control::enterLoader();
    void* handle = memtool::collectors::dlopenForCaller(file, mode, __builtin_return_address(0));
    memtool::collectors::control::leaveLoader();
    if (handle) memtool::collectors::refreshModules();
    return handle;
}

// A program that starts a thread of its own is multi-threaded from now on: the
// collector's control thread costs it nothing more, and starts with it
// (control/ControlChannel.h).
__attribute__((visibility("default"))) int pthread_create(pthread_t* thread,
                                                          const pthread_attr_t* attr,
                                                          void* (*start)(void*), void* arg) {
    using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
    const int rc = real ? real(thread, attr, start, arg) : EAGAIN;
    if (rc == 0) memtool::collectors::control::startControlThreadNow();
    return rc;
}

// The unloaded code's cached frame rules and module spans must go: another
// library may be mapped at its addresses next. Before the unload as well as
// after: a walk that starts while it runs must not keep a span of its module.
__attribute__((visibility("default"))) int dlclose(void* handle) {
    using Fn = int (*)(void*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dlclose"));
    memtool::collectors::codeUnloaded();
    memtool::collectors::control::enterLoader();
    const int rc = real ? real(handle) : -1;
    memtool::collectors::control::leaveLoader();
    memtool::collectors::codeUnloaded();
    return rc;
}

// os._exit() and friends skip destructors; end the stream first so that the trace
// is complete and nothing buffered is lost.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    using Fn = void (*)(int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "_exit"));
    memtool::collectors::finishCollector(memtool::core::ExitKind::Immediate, status);
    real(status);
    __builtin_unreachable();
}

// A process that sends itself a signal whose default action ends it, with that
// action in place and the signal not blocked, dies without running destructors:
// Python re-raises an unhandled Ctrl-C this way once it has finalized. End the
// stream first, so that its trace is whole (its exit_signal says how it ended).
__attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
    using namespace memtool::collectors;
    if (!gRealKill) return errno = ENOSYS, -1;
    if (pid == getpid() && endsTheProcess(sig)) finishCollector(memtool::core::ExitKind::Immediate);
    return gRealKill(pid, sig);
}

// The collector's descriptors stay open when the program closes "all of its own"
// (OwnDescriptors.h): the call succeeds and they are left alone.
__attribute__((visibility("default"))) int close(int fd) {
    using namespace memtool::collectors;
    if (own::owned(fd)) return 0;
    return realClose(fd);
}

__attribute__((visibility("default"))) int close_range(unsigned first, unsigned last, int flags) {
    using namespace memtool::collectors;
    // Marking them close-on-exec changes nothing: they are already.
    if (flags & CLOSE_RANGE_CLOEXEC) return realCloseRange(first, last, flags);
    return closeAroundOwn(
        first, last, [&](unsigned a, unsigned b) { return realCloseRange(a, b, flags); },
        [&](unsigned a) { return realCloseRange(a, last, flags); });
}

__attribute__((visibility("default"))) void closefrom(int lowest) {
    using namespace memtool::collectors;
    if (lowest < 0) lowest = 0;
    const int saved = errno;
    closeAroundOwn(
        static_cast<unsigned>(lowest), ~0U,
        [](unsigned a, unsigned b) {
            if (realCloseRange(a, b, 0) == 0) return 0;
            for (unsigned fd = a; fd <= b; ++fd) realClose(static_cast<int>(fd));
            return 0;
        },
        [](unsigned a) {
            if (gClose.closeFrom)
                gClose.closeFrom(static_cast<int>(a));
            else
                realCloseRange(a, ~0U, 0);
            return 0;
        });
    errno = saved;
}

// The wait family says which child ended and how (reportingReaped; waitid below).
__attribute__((visibility("default"))) pid_t waitpid(pid_t pid, int* status, int options) {
    using namespace memtool::collectors;
    if (!gWait.waitpid) return errno = ENOSYS, -1;
    return reportingReaped(status, [&](int* s) { return gWait.waitpid(pid, s, options); });
}

__attribute__((visibility("default"))) pid_t wait4(pid_t pid, int* status, int options,
                                                   struct rusage* usage) {
    using namespace memtool::collectors;
    if (!gWait.wait4) return errno = ENOSYS, -1;
    return reportingReaped(status, [&](int* s) { return gWait.wait4(pid, s, options, usage); });
}

__attribute__((visibility("default"))) pid_t wait(int* status) {
    using namespace memtool::collectors;
    if (!gWait.wait) return errno = ENOSYS, -1;
    return reportingReaped(status, [](int* s) { return gWait.wait(s); });
}

__attribute__((visibility("default"))) int waitid(idtype_t type, id_t id, siginfo_t* info,
                                                  int options) {
    using namespace memtool::collectors;
    if (!gWait.waitid) return errno = ENOSYS, -1;
    const int rc = gWait.waitid(type, id, info, options);
    if (rc == 0 && info && info->si_pid > 0) {
        if (info->si_code == CLD_EXITED)
            childReaped(info->si_pid, (info->si_status & 0xff) << 8);
        else if (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED)
            childReaped(info->si_pid,
                        (info->si_status & 0x7f) | (info->si_code == CLD_DUMPED ? 0x80 : 0));
    }
    return rc;
}

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[],
                                                  char* const envp[]) {
    return memtool::collectors::execPath(path, argv, envp);
}

__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
    return memtool::collectors::execPath(path, argv, environ);
}

__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
    return memtool::collectors::execSearched(file, argv, environ);
}

__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[],
                                                   char* const envp[]) {
    return memtool::collectors::execSearched(file, argv, envp);
}

__attribute__((visibility("default"))) int fexecve(int fd, char* const argv[], char* const envp[]) {
    using namespace memtool::collectors;
    if (!gExec.fexecve) return errno = ENOSYS, -1;
    return aroundExec([&] {
        return withChildEnvironment(envp,
                                    [&](char* const* env) { return gExec.fexecve(fd, argv, env); });
    });
}

// A spawned child is a process of its own (the caller goes on): only its
// environment is completed. These return an error number, not -1 with errno.
__attribute__((visibility("default"))) int posix_spawn(pid_t* pid, const char* path,
                                                       const posix_spawn_file_actions_t* actions,
                                                       const posix_spawnattr_t* attributes,
                                                       char* const argv[], char* const envp[]) {
    return memtool::collectors::spawnCompleted(memtool::collectors::gExec.posixSpawn, pid, path,
                                               actions, attributes, argv, envp);
}

__attribute__((visibility("default"))) int posix_spawnp(pid_t* pid, const char* file,
                                                        const posix_spawn_file_actions_t* actions,
                                                        const posix_spawnattr_t* attributes,
                                                        char* const argv[], char* const envp[]) {
    return memtool::collectors::spawnCompleted(memtool::collectors::gExec.posixSpawnp, pid, file,
                                               actions, attributes, argv, envp);
}

__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
    const char* argv[memtool::collectors::kMaxExeclArgs];
    va_list args;
    va_start(args, arg);
    memtool::collectors::collectArgs(arg, args, argv, memtool::collectors::kMaxExeclArgs);
    va_end(args);
    return execv(path, const_cast<char* const*>(argv));
}

__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) {
    const char* argv[memtool::collectors::kMaxExeclArgs];
    va_list args;
    va_start(args, arg);
    memtool::collectors::collectArgs(arg, args, argv, memtool::collectors::kMaxExeclArgs);
    va_end(args);
    return execvp(file, const_cast<char* const*>(argv));
}

__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) {
    const char* argv[memtool::collectors::kMaxExeclArgs];
    va_list args;
    va_start(args, arg);
    memtool::collectors::collectArgs(arg, args, argv, memtool::collectors::kMaxExeclArgs);
    char* const* envp = va_arg(args, char* const*);
    va_end(args);
    return execve(path, const_cast<char* const*>(argv), envp);
}

// The program's start (the executable's _start calls it through its PLT): main is
// wrapped so that its return marks the end of the program's own code for leaks
// (collectors/preload/ProgramEnd.h). Everything else passes through unchanged.
using MainFunction = int (*)(int, char**, char**);
__attribute__((visibility("default"))) int __libc_start_main(MainFunction main, int argc,
                                                             char** argv, void (*init)(),
                                                             void (*fini)(), void (*rtldFini)(),
                                                             void* stackEnd) {
    using Fn = int (*)(MainFunction, int, char**, void (*)(), void (*)(), void (*)(), void*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "__libc_start_main"));
    return real(memtool::collectors::programEnd::wrapMain(main), argc, argv, init, fini, rtldFini,
                stackEnd);
}

__attribute__((visibility("default"))) int memtool_collector_api_version(void) {
    return MEMTOOL_COLLECTOR_API_VERSION;
}

__attribute__((visibility("default"))) void memtool_record_alloc(uint8_t device, uint64_t key,
                                                                 uint64_t size) {
    memtool::collectors::engine().alloc(device, key, size);
}

__attribute__((visibility("default"))) void memtool_record_free(uint64_t key) {
    memtool::collectors::engine().free(key);
}

__attribute__((visibility("default"))) void memtool_record_oom(uint8_t device, uint64_t size,
                                                               int torch, uint64_t device_free,
                                                               uint64_t device_total) {
    memtool::collectors::engine().oom(
        device, size, torch ? memtool::core::OomSource::Torch : memtool::core::OomSource::Allocator,
        device_free, device_total);
}

__attribute__((visibility("default"))) int memtool_cuda_attach(void) {
    return memtool::collectors::attachCuda() ? 1 : 0;
}

__attribute__((visibility("default"))) void memtool_cuda_fallback(const char* why) {
    memtool::collectors::fallBackToCudaRuntimeHooks(why);
}

__attribute__((visibility("default"))) void memtool_torch_bridge_try(void) {
    memtool::collectors::tryAttachTorchBridge();
}

__attribute__((visibility("default"))) void memtool_cuda_memory_referenced(uint64_t address) {
    memtool::collectors::regionMemoryReferenced(address);
}

__attribute__((visibility("default"))) int memtool_enabled(void) {
    return memtool::collectors::collectorConfigured() ? 1 : 0;
}

__attribute__((visibility("default"))) int memtool_track_start(const char* socket,
                                                               const char* options,
                                                               const char* backup_dir, char* out,
                                                               size_t size) {
    return memtool::collectors::startTracking(socket, options, backup_dir, out, size) ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_track_stop(int keep_hooks, char* out,
                                                              size_t size) {
    return memtool::collectors::stopTracking(keep_hooks != 0, out, size) ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_attach_start(const char* socket,
                                                                const char* options,
                                                                const char* backup_dir,
                                                                const char* python_package) {
    return memtool::collectors::startAttach(socket, options, backup_dir, python_package);
}

__attribute__((visibility("default"))) int memtool_track_unhook(char* out, size_t size) {
    return memtool::collectors::unhook(out, size) ? 0 : 1;
}

__attribute__((visibility("default"))) size_t memtool_collector_path(char* out, size_t size) {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void*>(&memtool_enabled), &info) || !info.dli_fname || !out ||
        size == 0)
        return 0;
    const size_t n = std::strlen(info.dli_fname);
    if (n + 1 > size) return 0;
    std::memcpy(out, info.dli_fname, n + 1);
    return n;
}

// A C entry's failure: its reason in `out` (NUL-terminated, at most `size` bytes), and -1.
static int failedWith(const memtool::collectors::control::Failure& why, char* out, size_t size) {
    if (out && size) {
        std::strncpy(out, why.text, size - 1);
        out[size - 1] = '\0';
    }
    return -1;
}

__attribute__((visibility("default"))) int memtool_region_enter(const char* tag, int backup,
                                                                char* out, size_t size) {
    using namespace memtool::collectors;
    control::Failure why;
    const bool deviceOnly = (backup & MEMTOOL_REGION_DEVICE_ONLY) != 0;
    const bool verify = (backup & MEMTOOL_REGION_VERIFY) != 0;
    backup &= ~(MEMTOOL_REGION_DEVICE_ONLY | MEMTOOL_REGION_VERIFY);
    if (backup < 0 || backup > 2) {
        why.set("memtool_region_enter: the backup kind is 0 none, 1 host or 2 disk");
    } else if (!collectorConfigured()) {
        why.set("this process does not run under `memtool run`: regions are not available");
    } else if (!tag ? control::regions().enterNone(why)
                    : control::regions().enter(tag, static_cast<memtool::core::BackupKind>(backup),
                                               why, deviceOnly, verify)) {
        // A program with regions is one `memtool ctl` lists: their bytes reach
        // memtool run while it is quiet.
        if (tag) control::startControlThreadNow();
        return 0;
    }
    return failedWith(why, out, size);
}

__attribute__((visibility("default"))) void memtool_region_exit(void) {
    memtool::collectors::control::regions().exit();
}

__attribute__((visibility("default"))) uint32_t memtool_module_scope(const char* label, int phase) {
    return memtool::collectors::moduleScopes::add(label, phase);
}

__attribute__((visibility("default"))) void memtool_module_scope_set(uint32_t id) {
    using namespace memtool::collectors;
    if (ThreadState* ts = threadState()) {
        ts->moduleScope = moduleScopes::codeOf(id) ? id : 0;
        ts->moduleScopeEpoch = moduleScopes::epoch();
    }
}

__attribute__((visibility("default"))) void memtool_module_scopes_on(int on) {
    if (on)
        memtool::collectors::moduleScopes::start();
    else
        memtool::collectors::moduleScopes::stop();
}

__attribute__((visibility("default"))) int memtool_pause(const char* tag, char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::regions().pause(tag, memtool::core::ControlOrigin::Api);
    if (out && size) r.toJson("pause", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_resume(const char* tag, char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::regions().resume(tag, memtool::core::ControlOrigin::Api);
    if (out && size) r.toJson("resume", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_set_backup_dir(const char* directory, char* out,
                                                                  size_t size) {
    using namespace memtool::collectors;
    control::Failure why;
    if (!collectorConfigured())
        why.set("this process does not run under `memtool run`: regions are not available");
    else if (control::regions().changeBackupDirectory(directory, why))
        return 0;
    return failedWith(why, out, size);
}

__attribute__((visibility("default"))) uint64_t memtool_set_host_pool(uint64_t max_bytes) {
    return memtool::collectors::control::regions().setHostPoolLimit(max_bytes);
}

__attribute__((visibility("default"))) int memtool_read_backup(uint64_t address, void* dst,
                                                               uint64_t bytes, char* out,
                                                               size_t size) {
    memtool::collectors::control::Failure why;
    if (memtool::collectors::control::regions().readBackup(address, dst, bytes, why)) return 0;
    return failedWith(why, out, size);
}

__attribute__((visibility("default"))) void memtool_set_host_budget(uint64_t bytes) {
    memtool::collectors::control::regions().setHostBudget(bytes);
}

__attribute__((visibility("default"))) void memtool_set_memory_margin(uint64_t bytes) {
    memtool::collectors::control::regions().setMemoryMargin(bytes);
}

__attribute__((visibility("default"))) size_t memtool_regions(char* out, size_t size) {
    return memtool::collectors::control::regions().describe(out, size);
}

__attribute__((visibility("default"))) int memtool_yield(int to_host, char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::courtesy().yieldHere(to_host ? memtool::core::BackupKind::Host
                                                                : memtool::core::BackupKind::Disk);
    if (out && size) r.toJson("yield", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_restore(char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::courtesy().restoreHere();
    if (out && size) r.toJson("restore", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) void memtool_flush(void) {
    memtool::collectors::engine().flush();
}

__attribute__((visibility("default"))) void memtool_safe_point(void) {
    memtool::collectors::control::safePoint().reached();
}

__attribute__((visibility("default"))) void* memtool_cuda_malloc(size_t size, int device, void*) {
    return memtool::collectors::pluggableMalloc(size, device);
}

__attribute__((visibility("default"))) void memtool_cuda_free(void* ptr, size_t, int, void*) {
    memtool::collectors::pluggableFree(ptr);
}

__attribute__((visibility("default"))) void* memtool_npu_malloc(size_t size, int device,
                                                                void* stream) {
    return memtool::collectors::aclPluggableMalloc(size, device, stream);
}

__attribute__((visibility("default"))) void memtool_npu_free(void* ptr, size_t size, int device,
                                                             void* stream) {
    memtool::collectors::aclPluggableFree(ptr, size, device, stream);
}
}
