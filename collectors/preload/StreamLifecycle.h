#pragma once
// The process's stream to `memtool run`, from its lazy connection to its end:
// connects once (when a scan finds something to record), tells memtool run why
// a stream whose descriptor was taken over stops, holds every lock across
// fork() and gives the child a stream of its own at its first event, suspends
// the stream around an exec, and ends it when the process does.

#include <pthread.h>
#include <sys/types.h>

#include <atomic>

#include "core/Protocol.h"

namespace memtool::collectors {

class Engine;
class SocketSink;
namespace control {
class Regions;
class RegionCommands;
}  // namespace control

class StreamLifecycle {
public:
    // `scanLock` is the module scan's lock, which connecting happens under.
    constexpr StreamLifecycle(Engine& engine, SocketSink& sink, control::Regions& regions,
                              control::RegionCommands& commands, pthread_mutex_t& scanLock)
        : engine_(engine),
          sink_(sink),
          regions_(regions),
          commands_(commands),
          scanLock_(scanLock) {}
    StreamLifecycle(const StreamLifecycle&) = delete;
    StreamLifecycle& operator=(const StreamLifecycle&) = delete;

    // MEMTOOL_SOCKET's value; false when there is none (or it is too long).
    bool setSocketPath(const char* path);
    // Everything is wired (startCollector's last step): scans and connections may begin.
    void markConfigured() {
        gaveUp_ = false;
        configured_ = true;
    }
    bool configured() const { return configured_.load(std::memory_order_acquire); }

    // Under the scan lock. Connects once; a process that never loads an allocator
    // memtool tracks (a shell, a compiler the script spawns) never appears in the trace.
    void ensureConnected();
    // The writer found its descriptor taken over (the sink's callback, under the
    // engine's lock: nothing here records).
    void sendLostNotice(const char* why);

    // pthread_atfork's handlers.
    void prepareFork();
    void parentAfterFork();
    void childAfterFork();

    // Collector.h's finishCollector, childReaped, beforeExec, afterFailedExec.
    void finish(core::ExitKind kind, int exitStatus);
    // memtool.track's end: the stream ends as detached (core::ExitKind::Detach),
    // its control thread is gone when this returns, and nothing connects again
    // until the next markConfigured().
    void detach();
    void childReaped(pid_t pid, int status);
    void beforeExec();
    void afterFailedExec();

private:
    static void rememberExitStatus(int status, void* self);

    Engine& engine_;
    SocketSink& sink_;
    control::Regions& regions_;
    control::RegionCommands& commands_;
    pthread_mutex_t& scanLock_;
    char socketPath_[4096] = {};
    std::atomic<bool> configured_{false};
    // The CLI could not be reached, or the program took the stream's socket over:
    // never try again. Set by whichever thread's write found the socket taken.
    std::atomic<bool> gaveUp_{false};
    bool forkChild_ = false;           // the next stream is a fork child's first (under scanLock_)
    bool exitHandlerSet_ = false;      // on_exit registered in this process image
    std::atomic<int> exitStatus_{-1};  // what the process gave exit(), once it did
};

}  // namespace memtool::collectors
