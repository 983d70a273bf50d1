#pragma once
// The process's collector, as `memtool run` injects it: the composition root
// (Collector.cpp) that owns one engine over one socket to the CLI, the module scan
// (preload/ModuleScan.h), the stream's lifecycle (preload/StreamLifecycle.h) and
// the pausable regions, and hands the CUDA runtime hooks and the torch bridge
// loader their engine at start-up. What it declares here is for the callers it
// cannot hand anything to: PreloadHooks.cpp's interposed functions and C surface,
// the allocator hooks patched into libc10 (preload/AllocatorHooks.h) and the
// program-end hooks (preload/ProgramEnd.h).

#include <sys/types.h>

#include "collectors/engine/Engine.h"
#include "collectors/preload/ChildEnvironment.h"

namespace memtool::collectors {

// The process's engine (in static storage, never destroyed: hooks may run during
// and after static destruction). Inactive until the collector connects.
Engine& engine();

// From the library constructor: reads MEMTOOL_SOCKET and MEMTOOL_OPTIONS. False
// outside `memtool run` (then nothing is ever patched or recorded).
bool startCollector();
// memtool.track() (CollectorApi.h's memtool_track_start): in a process memtool
// run did not start, the collector (loaded by dlopen) starts a stream to the
// companion `memtool run --track PID` listening at `socket`, with its options
// (MEMTOOL_OPTIONS' text) and backup directory, and patches the libraries loaded
// now. False, with the reason in `why`, when it cannot: a track already runs,
// the process runs under memtool run, or nothing memtool tracks is loaded.
bool startTracking(const char* socket, const char* options, const char* backupDir, char* why,
                   size_t whyBytes);
// The track's end: the stream ends (detached), its control thread is gone, and
// every import slot gets back what it held, unless memory regions still hold
// memory (then `note` says so) or `keepHooks` (block after block, as pytest's
// tests: the hooks stay, doing nothing, until unhook()). False when no track runs.
bool stopTracking(bool keepHooks, char* note, size_t noteBytes);
// memtool attach (CollectorApi.h's memtool_attach_start): the track's start, on a
// thread memtool stopped at any point of the program. Python tracking waits for
// the main thread's next bytecode (a pending call); the track ends when memtool
// attach asks ("detach" down the stream). One of the kAttach codes.
inline constexpr int kAttachStarted = 0;
inline constexpr int kAttachBusy = 1;            // a track or an attach runs already
inline constexpr int kAttachUnderRun = 2;        // the process runs under memtool run
inline constexpr int kAttachBadSocket = 3;       // no socket path the sink can use
inline constexpr int kAttachNothingTracked = 4;  // no libc10, no CUDA
int startAttach(const char* socket, const char* options, const char* backupDir,
                const char* pythonPackage);
// Between tracks: every import slot gets back what it held (as stopTracking's).
bool unhook(char* note, size_t noteBytes);
// What a child of this process needs in its environment to be profiled (empty
// outside `memtool run`); taken by startCollector().
const ChildEnvironment& childEnvironment();
bool collectorConfigured();

// After any change to the set of loaded modules (start-up, dlopen): patches
// libc10's allocator imports (and the CUDA runtime's, once that route is on),
// connects once something worth recording is there, announces new modules, and
// installs Python tracking when an interpreter runs.
void refreshModules();

// The CUDA injection's requests (collectors/CollectorApi.h).
bool attachCuda();
void fallBackToCudaRuntimeHooks(const char* why);
// Ends the stream (library destructor, _exit). `exitStatus`: what the process
// gave _exit(); -1 for what exit() was given (when the collector saw it) or not known.
void finishCollector(core::ExitKind kind, int exitStatus = -1);

// A child this process waited for ended with `status` (as wait() gives it): said
// in the stream, for a fork child that died of a signal before its stream could.
// No allocation, no stdio (waitpid may run in a SIGCHLD handler).
void childReaped(pid_t pid, int status);

// Around an exec of this process: the stream says before it that the image ends
// (and everything it held with it), and goes on if the exec failed.
void beforeExec();
void afterFailedExec();

}  // namespace memtool::collectors
