#pragma once
// The collector's engine: one per stream (the process has one; tests make their
// own over a socketpair). Front ends (the preload hooks, the CUDA injection, the
// torch bridge, the Python tracker) call it and nothing else.
//
// The gate is here, once: every entry point checks the active flag and the
// per-thread recursion guard, and counts what it had to drop. Private work takes
// the guard as a parameter (heaptrack's `op(const RecursionGuard&)`): holding it
// is part of the type.
//
// Hot path (alloc/free): capture the stacks before taking the lock (native
// unwinding, the Python lines), then intern them, check the table of live keys
// and encode under the lock. No heap allocation, stdio, exception or std::string
// anywhere in the engine; on a failure it warns once and deactivates, and the
// program runs on.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "collectors/engine/EngineOptions.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/Mutex.h"
#include "collectors/engine/RecordWriter.h"
#include "collectors/engine/RecursionGuard.h"
#include "collectors/engine/Sink.h"
#include "collectors/stacks/ShadowStack.h"
#include "collectors/stacks/StackCapture.h"
#include "collectors/stacks/StackInterner.h"
#include "core/Protocol.h"

namespace memtool::collectors {

// Who this stream is about: the handshake's fields.
struct StreamIdentity {
    uint64_t pid = 0;
    uint64_t ppid = 0;
    uint64_t startUnixNs = 0;
    const char* command =
        nullptr;  // argv as /proc/self/cmdline has it: each argument NUL-terminated
    size_t commandBytes = 0;
    // The launcher's variables that are set (core::kRankVariables): name, value, name, ...
    const char* const* environment = nullptr;
    size_t environmentCount = 0;  // pairs
    bool forked = false;          // a fork child's first stream
};

// One loaded ELF object, as announced to the CLI.
struct ModuleInfo {
    const char* path = nullptr;
    size_t pathBytes = 0;
    uint64_t loadBias = 0;
    const uint64_t (*ranges)[2] = nullptr;  // executable segments [start, end)
    size_t rangeCount = 0;
};

class Engine {
public:
    constexpr Engine() = default;
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Before connect(): options, and the native unwinder where native stacks are on
    // (false, with the reason in *why, when it is missing: native stacks go off).
    bool configure(const EngineOptions& options, const char** why);
    const EngineOptions& options() const { return options_; }
    StackCapture& capture() { return capture_; }

    // Starts the stream on `sink` with its handshake; from then on events are
    // recorded. False when the sink failed at once (sink.failure() says why).
    // Where an earlier stream of this engine can be continued (a fork child's
    // parent's, or its own before an exec that failed), the new one continues its
    // stack ids (core::kHandshakeContinues) instead of sending every stack again.
    bool connect(Sink& sink, const StreamIdentity& identity);
    bool active() const { return active_.load(std::memory_order_acquire); }
    // The stream's pid and start time (the last stream's, once it ended).
    uint64_t streamPid() const { return streamPid_.load(std::memory_order_relaxed); }
    uint64_t streamStartNs() const { return streamStartNs_; }
    // The stream continues the stack ids of an earlier one (core::kHandshakeContinues).
    bool continuesIds() const { return continuesIds_.load(std::memory_order_relaxed); }
    // Stream generation: bumped for every new stream, so per-thread caches of wire
    // ids (stack nodes, code ids) know when they are stale.
    uint64_t generation() const { return streamGeneration_.load(std::memory_order_relaxed); }

    // ---- events ---------------------------------------------------------------
    // `key` is an address, or a key with the protocol's tag bits; sizes below 2^56.
    // `region`: the pausable region it was served from (declared first), or 0.
    // Inlined into its caller, so that native unwinding starts in the hook's frame:
    // every frame unwound costs ~13 ns, and the engine's own would be thrown away.
    [[gnu::always_inline]] void alloc(uint8_t device, uint64_t key, uint64_t size,
                                      FlushPolicy flush = FlushPolicy::Timed, uint32_t region = 0) {
        if (OwnDeviceCalls::active) return;
        if (!active() && !reopen()) return suspendedMiss();
        if (RecursionGuard::active) return missed();
        RecursionGuard guard;
        Stacks stacks;
        captureStacks(stacks);
        allocCaptured(guard, stacks, device, key, size, flush, region);
    }
    // Reported before the memory is released, so that a reuse of the address by
    // another thread cannot reach the stream ahead of this free. Keys never
    // allocated through the engine are ignored.
    void free(uint64_t key);
    // An allocation of `size` bytes on `device` that failed for want of memory,
    // with the requesting thread's stacks; flushed at once (the program may be
    // about to die of it).
    void oom(uint8_t device, uint64_t size, core::OomSource source, uint64_t deviceFree = 0,
             uint64_t deviceTotal = 0);
    // A note for the trace (core::kNote* keys): rare; flushed at once.
    void note(const char* key, const char* text);
    // The bytes live on a device code now, as the stream has told them.
    uint64_t liveBytesOn(uint8_t device);

    // ---- memory control (collectors/control) ------------------------------------
    // Starts the stream now when one is wanted and none is open (a fork child's
    // first event); true when the engine is active.
    bool activate() { return active() || reopen(); }
    // Declares a pausable region before its first allocation is recorded. Ids are
    // the caller's, from 1, unique in the process.
    void region(uint32_t id, const char* tag, uint8_t device, core::BackupKind backup);
    // A pause or resume that happened (or failed); flushed at once.
    void control(core::ControlFields fields, const char* message);
    // The answer to a request that came down the stream; flushed at once.
    void reply(uint64_t requestId, core::ReplyStatus status, const char* body, size_t bodyBytes);
    // The stream's sink, for the thread that reads requests from it.
    Sink* sink() const { return sink_; }
    // Python code object (GIL held by the caller): returns its wire id.
    uint32_t pyCode(const char* file, size_t fileBytes, const char* name, size_t nameBytes,
                    uint64_t firstLine);
    // A loaded object, for the CLI's symbolizer; sent with the next flush (before
    // any node record that could need it, since the stream keeps its order).
    void announceModule(const ModuleInfo& module);
    // Sends the end record and closes the stream. `exitStatus`: what the process
    // gave exit() or _exit(), -1 when not known. A Detach end (memtool.track) says
    // first how many frees were of blocks the stream never saw (core::kNoteEarlierFrees).
    void finish(core::ExitKind kind, int exitStatus = -1);
    // After a Detach end: the next stream goes to another reader (the next
    // memtool.track's), which knows none of this one's ids.
    void forgetStream();

    // ---- fork (pthread_atfork) and exec -----------------------------------------
    // Takes the lock and sends what is buffered: every node a child's stacks may
    // name is in the parent's stream before the child exists.
    void prepareFork();
    void parentAfterFork();
    // The child drops its copy of the parent's stream without ending it, and
    // forgets the parent's live blocks (their frees in the child are not its own).
    // Its own stream, started by the reopener at its first event, continues the
    // parent's stack ids.
    void childAfterFork();
    // Right before an exec: sends an end record of kind Exec (what the image
    // held goes with it) and stops recording, leaving the stream open (the exec
    // closes it). Events of other threads meanwhile are counted as missed.
    void suspendForExec();
    // The exec failed: the same stream goes on (the reader takes the Exec end
    // back when records follow it).
    void resumeAfterFailedExec();
    // The collector's way to start a stream again (after a fork, a failed exec): an
    // event that finds the engine inactive while a reopen is wanted calls it first.
    using Reopener = void (*)();
    void setReopener(Reopener reopener) { reopener_ = reopener; }
    void wantReopen(bool wanted) { reopenWanted_.store(wanted, std::memory_order_relaxed); }
    bool reopenWanted() const { return reopenWanted_.load(std::memory_order_relaxed); }

    // Sends what has waited in the buffer longer than the flush interval: the
    // control thread calls it while the program is quiet, so that what a program
    // did last reaches the CLI (memtool ctl list, a live view) without waiting
    // for its next allocation.
    void flushIfStale();

    // Sends what is buffered now (memtool_flush: before the program asks memtool
    // run about its own state, which must include everything it did so far).
    void flush();

private:
    // The calling thread's stacks, taken outside the lock (unwinding is the costly
    // part, and the Python lines are read from the thread's own frames); then
    // interned under it.
    struct Stacks {
        ThreadState* thread = nullptr;
        ShadowStack* python = nullptr;
        bool hasPython = false;
        int depth = 0;
        int firstIp = 0;  // ips[firstIp .. firstIp + depth): the native stack
        uint32_t firstStale = 0;
        // The walk's frames, kept in the thread's walk memo (a replay copies
        // nothing), and which kept walk gave them (WalkMemo::resultSerial).
        const uint64_t* ips = nullptr;
        uint64_t walkSerial = 0;
    };
    [[gnu::always_inline]] void captureStacks(Stacks& s) {
        // The Python stack first: native unwinding stops at the interpreter when
        // there is one.
        s.thread = threadState();
        s.python =
            options_.pythonStacks && s.thread
                ? readPythonStack(*s.thread, streamGeneration_.load(std::memory_order_relaxed),
                                  &s.firstStale)
                : nullptr;
        s.hasPython = s.python != nullptr;
        if (options_.nativeStacks && s.thread) {
            s.depth = capture_.native(*s.thread, s.thread->walkMemo.ips, options_.maxNativeDepth,
                                      s.hasPython, &s.firstIp);
            s.ips = s.thread->walkMemo.ips;
            s.walkSerial = s.thread->walkMemo.resultSerial;
        }
    }
    // Inactive: starts a stream when one is wanted (never from inside the
    // collector's own work). True when the engine is active after it.
    bool reopen();
    // Under mu_: the node ids of captured stacks (sending new nodes first).
    void internLocked(Stacks& s, uint64_t* nativeNode, uint64_t* pyNode);
    void allocCaptured(const RecursionGuard&, Stacks& stacks, uint8_t device, uint64_t key,
                       uint64_t size, FlushPolicy flush, uint32_t region);
    // Under mu_: reserves, encodes with `encode(p)` (returning the record's end),
    // commits and flushes at once. For rare records that say something now;
    // `deltaNs`: the time delta the record carries, if it is timed.
    template <typename Encode>
    void sendNowLocked(size_t bytes, Encode encode, uint64_t deltaNs = 0);
    void freeGuarded(const RecursionGuard&, uint64_t key);
    // Under mu_, before an End record: the lock's counts over the stream
    // (core::kNoteCollectorLock).
    void commitLockCountsLocked();
    // Under mu_, before a Detach End: the frees of keys never allocated on this stream.
    void commitUnseenFreesLocked();
    // Under mu_: ends the stream, warns once with the reason.
    void deactivateLocked(const char* why);
    // Under mu_: checks the writer after a send; deactivates when the sink failed.
    bool healthyLocked();
    // Nanoseconds since the previous record, from the precise clock (an allocation
    // that raises its device to a new high, OOM, control events: when a peak or a
    // pause happened) or the kernel tick's coarse clock (every other allocation and
    // free: ~30 ns saved on each, and a time still never before the record it
    // follows).
    uint64_t clockDeltaLocked(bool coarse = false);
    // Under mu_: forgets the live keys and the bytes they hold (a new stream).
    void clearLiveLocked();
    void missed() { missedEvents_.fetch_add(1, std::memory_order_relaxed); }
    // Under mu_, after an allocation or a free: the End record's counts beside the
    // shared buffer (core::TailHeader), for a kill to leave them behind. (A miss
    // after the last event is not among them: a nested event in the instant
    // before the kill.)
    void publishCountsLocked() {
        writer_.publishCounts(counters_.allocCount, counters_.freeCount,
                              missedEvents_.load(std::memory_order_relaxed));
    }
    // An event while the stream waits for an exec: missed if the exec fails.
    void suspendedMiss() {
        if (suspended_.load(std::memory_order_relaxed)) missed();
    }

    EngineOptions options_;
    StackCapture capture_;
    std::atomic<bool> active_{false};
    std::atomic<uint64_t> missedEvents_{0};
    std::atomic<uint64_t> streamGeneration_{
        1};  // interner_.generation(), readable without the lock
    std::atomic<uint64_t> streamPid_{0};
    std::atomic<bool> reopenWanted_{false};
    std::atomic<bool> suspended_{false};  // between suspendForExec() and the exec
    std::atomic<bool> continuesIds_{false};
    Reopener reopener_ = nullptr;

    Mutex mu_;  // everything below
    Sink* sink_ = nullptr;
    uint64_t streamStartNs_ = 0;
    // The interner, code and module ids are exactly what stream (streamPid_,
    // streamStartNs_) received: a new stream may continue them.
    bool continuable_ = false;
    uint64_t unseenFrees_ = 0;  // under mu_: frees of keys this stream never saw allocated
    StackInterner interner_;
    // A live block: device (top byte) | size, and its Alloc's tag in the writer
    // (RecordWriter::prepareEvent), which tells its free where that record is.
    struct LiveEntry {
        uint64_t deviceSize;
        uint64_t tag;
    };
    BasicPointerMap<LiveEntry> live_;
    // Per wire device code: the bytes live_ holds, and their high-water mark.
    uint64_t liveBytes_[256] = {};
    uint64_t highBytes_[256] = {};
    core::EndFields counters_;
    uint64_t lastClockNs_ = 0;
    uint32_t pyCodes_ = 0;
    uint64_t moduleIds_ = 0;
    RecordWriter writer_;  // last: a 256 KiB buffer
};

}  // namespace memtool::collectors
