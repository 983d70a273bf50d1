#include "collectors/preload/StreamLifecycle.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "collectors/control/ControlChannel.h"
#include "collectors/control/Regions.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/SocketSink.h"
#include "collectors/engine/Warn.h"
#include "collectors/preload/AllocatorHooks.h"
#include "collectors/stacks/CfiUnwinder.h"
#include "core/DecimalPair.h"

namespace memtool::collectors {

namespace {

// How long a collector waits for `memtool run` to admit its connection. The run's
// loop admits between other work, such as building an ended stream's trace, which
// reads the symbols of that process's libraries: 14 s for a CUDA torch 2.14's on a
// loaded 2-core machine, where 10 s of patience left an exec'd image unprofiled.
// A run that has gone closes the socket, which ends the wait at once.
constexpr int kAdmissionTimeoutMs = 60000;

// Reads argv as the kernel keeps it (NUL-separated), into memory of its own.
struct CommandLine {
    char* bytes = nullptr;
    size_t used = 0;
    size_t mapped = 0;
    CommandLine() {
        int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        for (;;) {
            if (used == mapped && !grow()) break;
            ssize_t n = read(fd, bytes + used, mapped - used);
            if (n <= 0) break;
            used += static_cast<size_t>(n);
        }
        close(fd);
    }
    ~CommandLine() {
        if (bytes) munmap(bytes, mapped);
    }
    bool grow() {
        size_t next = mapped ? mapped * 2 : 65536;
        void* p = mmap(nullptr, next, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return false;
        if (bytes) {
            std::memcpy(p, bytes, used);
            munmap(bytes, mapped);
        }
        bytes = static_cast<char*>(p);
        mapped = next;
        return true;
    }
};

// The launcher's variables this process has (core::kRankVariables), as name,
// value pairs into `out`; returns the pairs.
size_t rankEnvironment(const char** out) {
    size_t n = 0;
    for (const char* name : core::kRankVariables) {
        if (const char* value = getenv(name)) {
            out[2 * n] = name;
            out[2 * n + 1] = value;
            ++n;
        }
    }
    return n;
}

}  // namespace

bool StreamLifecycle::setSocketPath(const char* path) {
    if (!path || !*path || std::strlen(path) >= sizeof socketPath_) return false;
    std::strcpy(socketPath_, path);
    return true;
}

// on_exit: the status exit() was given (a return from main too), for the end record.
void StreamLifecycle::rememberExitStatus(int status, void* self) {
    static_cast<StreamLifecycle*>(self)->exitStatus_.store(status);
}

void StreamLifecycle::ensureConnected() {
    Engine& e = engine_;
    if (!configured_ || gaveUp_ || e.active()) return;
    e.wantReopen(false);
    const char* why = nullptr;
    // Nothing is sent before memtool run admits the connection: a fork child that
    // connected and exited at once would otherwise be gone (reaped by its parent)
    // before memtool could check that it descends from the program.
    if (!sink_.connect(socketPath_, &why) || !sink_.awaitAdmission(kAdmissionTimeoutMs, &why)) {
        warn(why);
        gaveUp_ = true;
        return;
    }
    CommandLine command;
    StreamIdentity id;
    id.pid = static_cast<uint64_t>(getpid());
    id.ppid = static_cast<uint64_t>(getppid());
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    id.startUnixNs =
        static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
    id.command = command.bytes;
    id.commandBytes = command.used;
    const char* environment[2 * core::kRankVariableCount];
    id.environment = environment;
    id.environmentCount = rankEnvironment(environment);
    id.forked = forkChild_;
    if (!e.connect(sink_, id)) {
        warn(sink_.failure());
        gaveUp_ = true;
        return;
    }
    forkChild_ = false;
    // A fork child inherits the registration with the rest of its parent's memory.
    if (!exitHandlerSet_) {
        exitHandlerSet_ = true;
        on_exit(rememberExitStatus, this);
    }
    // Commands from `memtool ctl` come down the same socket.
    // Only the program itself waits for its control thread: its stream is flushed
    // when it ends, and memtool run waits for that. A descendant may still run,
    // quiet, when memtool run stops waiting for it: its thread sends what it did.
    const bool theProgram =
        !id.forked && e.options().runPid != 0 && static_cast<int>(getppid()) == e.options().runPid;
    control::startControlThread(
        sink_, e, commands_, !theProgram || e.options().controlAtStart || e.options().pausableAll);
}

// A connection of its own tells memtool run why this stream stops (the stream
// itself cannot say it any more).
void StreamLifecycle::sendLostNotice(const char* why) {
    // Profiling stopped, as the notice says: a library loaded later (its scan
    // connects a process without a stream) must not start a second, empty one.
    gaveUp_ = true;
    SocketSink notice;
    const char* failed = nullptr;
    if (!notice.connect(socketPath_, &failed) ||
        !notice.awaitAdmission(kAdmissionTimeoutMs, &failed))
        return;
    const Engine& e = engine_;
    const size_t whyBytes = std::strlen(why);
    const size_t keyBytes = std::strlen(core::kNoteStreamLost);
    uint8_t record[2048];
    if (core::handshakeBytes(0, 0) + core::noteBytes(keyBytes, whyBytes) > sizeof record) return;
    uint8_t* p = core::encodeHandshakeHead(record, e.streamPid(), static_cast<uint64_t>(getppid()),
                                           e.streamStartNs(), core::kHandshakeNotice, 0);
    p = core::encodeHandshakeEnvCount(p, 0);
    p = core::encodeNote(p, core::kNoteStreamLost, keyBytes, why, whyBytes);
    notice.write(record, static_cast<size_t>(p - record));
    notice.close();
}

// Every lock a hook or a scan may take is held across fork(), in the one order
// the collector takes them in (region operations and the CUDA backend's loading,
// which may dlopen, before the module scan; the region table, then the engine,
// after it): a child never starts with a lock some other thread of its parent held.
void StreamLifecycle::prepareFork() {
    // Before the first fork: the children's rule reads are then shared (CfiUnwinder.h).
    shareRulesWithForks();
    regions_.lockOuterForFork();
    pthread_mutex_lock(&scanLock_);
    regions_.lockTableForFork();
    engine_.prepareFork();
}

void StreamLifecycle::parentAfterFork() {
    engine_.parentAfterFork();
    regions_.unlockTableAfterFork();
    pthread_mutex_unlock(&scanLock_);
    regions_.unlockOuterAfterFork();
}

void StreamLifecycle::childAfterFork() {
    Engine& e = engine_;
    e.childAfterFork();
    control::forgetControlThread();
    regions_.childAfterFork();
    regions_.unlockTableAfterFork();
    // The child gets a stream of its own at its first event: a child that execs at
    // once (subprocess) never connects, its new image does if it tracks anything.
    forkChild_ = true;
    if (configured_ && !gaveUp_) e.wantReopen(true);
    // Shared memory the parent created is the parent's, mapped in the child or not.
    forgetCreatedSharedMemory();
    pthread_mutex_unlock(&scanLock_);
    regions_.unlockOuterAfterFork();
}

void StreamLifecycle::finish(core::ExitKind kind, int exitStatus) {
    Engine& e = engine_;
    // A vfork child (subprocess, posix_spawn) shares its parent's memory until it
    // execs or exits: it must leave the parent's stream alone.
    if (static_cast<uint64_t>(getpid()) != e.streamPid()) return;
    if (exitStatus < 0 && kind == core::ExitKind::Normal) exitStatus = exitStatus_.load();
    e.finish(kind, exitStatus);
}

void StreamLifecycle::detach() {
    configured_ = false;  // no scan connects from here on
    engine_.finish(core::ExitKind::Detach);
    engine_.forgetStream();
    control::endControlThread();
    forkChild_ = false;
}

void StreamLifecycle::childReaped(pid_t pid, int status) {
    if (pid <= 0 || !(WIFEXITED(status) || WIFSIGNALED(status))) return;  // stopped, continued
    const int saved = errno;  // the wait succeeded: the caller sees errno as it was
    char text[core::kDecimalPairBytes];
    engine_.note(core::kNoteChildEnded, core::decimalPair(text, static_cast<uint64_t>(pid),
                                                          static_cast<uint32_t>(status)));
    errno = saved;
}

void StreamLifecycle::beforeExec() {
    if (static_cast<uint64_t>(getpid()) != engine_.streamPid()) return;  // a vfork child
    engine_.suspendForExec();
}

void StreamLifecycle::afterFailedExec() {
    if (static_cast<uint64_t>(getpid()) != engine_.streamPid()) return;
    engine_.resumeAfterFailedExec();
}

}  // namespace memtool::collectors
