#pragma once
// Courtesy: a running program yields all of its pausable memory, and takes it
// back later, without a change to its code (`memtool run --pausable all`, then
// `memtool ctl PID yield` / `restore`), or at a point of its choosing
// (memtool.yield_memory / memtool.restore).
//
// From outside, the program is first parked at a safe point (SafePoint.h) and
// kept there until restore: nothing of it runs while its memory is away. Then
// the devices are synchronized, the caching allocator is asked to give back what
// it holds unused (through the torch bridge, when attached), and every region is
// paused with its content backed up whatever its own backup says (CPU memory to
// disk, CUDA memory to host or disk).

#include <cstddef>
#include <cstdint>

#include "collectors/control/Regions.h"
#include "collectors/control/SafePoint.h"
#include "collectors/engine/Mutex.h"

namespace memtool::collectors::control {

class JsonWriter;

class Courtesy {
public:
    constexpr Courtesy(Regions& regions, SafePoint& safePoint)
        : regions_(regions), safePoint_(safePoint) {}
    Courtesy(const Courtesy&) = delete;
    Courtesy& operator=(const Courtesy&) = delete;

    // What empties PyTorch's CUDA cache without the GIL (the torch bridge); null: none.
    void setCacheEmptier(void (*emptier)()) { emptyCache_ = emptier; }
    // What lets cuBLAS's workspaces go before the cache is emptied (the torch
    // bridge): 1 when it did, 0 when this torch has no way; null: none.
    void setWorkspaceReleaser(int (*releaser)()) { releaseWorkspaces_ = releaser; }

    // `memtool ctl PID yield [--to host|disk] [--wait SECONDS]` and `restore`: a
    // JSON answer in `out`; returns a core::ReplyStatus.
    uint8_t yieldCommand(size_t argc, const char* const* argv, char* out, size_t size);
    uint8_t restoreCommand(char* out, size_t size);

    // In-process, from a point the program chose (it does not park).
    OpResult yieldHere(core::BackupKind cudaTarget);
    OpResult restoreHere();

    // The stream ended while the program was yielded from outside: give everything
    // back and let it go on, rather than leave it parked for good.
    void abandon();

private:
    // Pauses every region with forced backups; under mu_.
    OpResult yieldLocked(core::BackupKind cudaTarget, core::ControlOrigin origin);
    // threadsWaited: for a restore, the threads that touched yielded memory and
    // waited for it (PausedAccess); below 0 for a yield.
    void describe(const OpResult& r, const char* action, double parkS, int64_t threadsWaited,
                  char* out, size_t size);
    // An answer that moved nothing (asked twice, refused, timed out): the fields of
    // every other answer, zero where nothing moved, so that a script reads one shape.
    void describeNothing(const char* action, bool ok, const char* message, char* out, size_t size);

    Regions& regions_;
    SafePoint& safePoint_;
    void (*emptyCache_)() = nullptr;
    int (*releaseWorkspaces_)() = nullptr;
    bool workspacesReleased_ = false;  // by the last yield; under mu_
    // Per CUDA device of an answer: what the device still holds, by what memtool
    // can name.
    void describeLeft(JsonWriter& j, uint8_t device);
    Mutex mu_;
    bool yielded_ = false;     // everything is away (from outside or in-process)
    bool parkedByUs_ = false;  // the program waits at a safe point for our restore
};

// The process's courtesy (the preload collector's).
Courtesy& courtesy();

}  // namespace memtool::collectors::control
