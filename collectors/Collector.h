#pragma once
// The process's collector, as `memtool run` injects it: one engine over one socket
// to the CLI, the scan of loaded modules that patches the allocator's imports, and
// the lazy connection. The front ends (PreloadHooks.cpp's hooks and C surface,
// the CUDA runtime hooks, the torch bridge loader) reach the engine through
// engine() and call nothing else of it.

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
// What a child of this process needs in its environment to be profiled (empty
// outside `memtool run`); taken by startCollector().
const ChildEnvironment& childEnvironment();
bool collectorConfigured();

// After any change to the set of loaded modules (start-up, dlopen): patches
// libc10's allocator imports (and the CUDA runtime's, once that route is on),
// connects once something worth recording is there, announces new modules, and
// installs Python tracking when an interpreter runs.
void refreshModules();

// CUDA memory is recorded through the runtime hooks (not CUPTI).
bool cudaRuntimeRecording();

// The CUDA injection's requests (collectors/CollectorApi.h).
bool attachCuda();
void fallBackToCudaRuntimeHooks(const char* why);
// A reference to the VMM memory at `address` taken outside memtool: said once
// when it is a region's (memtool_cuda_memory_referenced).
void regionMemoryReferenced(uint64_t address);

// `text` on stderr and as a warning in the trace, the first time `said` is seen
// false (once per process for each flag).
void warnOnce(std::atomic<bool>& said, const char* text);

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
