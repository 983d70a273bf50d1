#pragma once
// Pausable regions: memory whose physical pages can be released while its
// addresses stay, and given back at the same addresses. Device-agnostic: tags,
// states, backups and accounting are here; each kind of memory is a
// MemoryBackend (CPU pages, CUDA VMM).
//
// A tag (at most 63 bytes) names what a program put in it ("weights",
// "kv_cache"); a region is a tag on one device, so pausing a tag pauses it on
// every device. A thread allocates into the innermost region it entered
// (memtool.region); the preload hooks route those allocations here instead of
// to the program's allocator.
//
// Regions orchestrates (tags, regions, pause and resume in phases, commands,
// fork); its parts each own one table: AllocationTable (the allocations by slot
// and address), FreeBlockCache (freed blocks kept for reuse), BackupSlots (the
// paused content) and PausedIndex (paused ranges, for the fault handler).
//
// Locks: tableMu_ guards the tables and is held only briefly (hooks take it);
// opMu_ serializes pauses and resumes, which do device calls and I/O without
// tableMu_. A region in the middle of an operation is `busy`: freeing one of its
// allocations waits for the operation to end. Neither is ever held while the
// engine's lock is (the engine is called with neither held... except tableMu_
// around serve's record, which the engine never waits on).

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "collectors/control/AllocationTable.h"
#include "collectors/control/BackupSlots.h"
#include "collectors/control/FreeBlockCache.h"
#include "collectors/control/MemoryBackend.h"
#include "collectors/control/PausedIndex.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/Mutex.h"
#include "core/Protocol.h"

namespace memtool::collectors {
class Engine;
}

namespace memtool::collectors::control {

class JsonWriter;

// What a pause or resume did, for the caller (Python API, `memtool ctl`).
struct OpResult {
    bool ok = true;        // false: it failed; the message says what, and what was left as it was
    bool changed = false;  // some memory was paused or resumed
    bool resumed = false;  // it answers a resume (or restore), not a pause (or yield)
    uint64_t bytes = 0;    // physical bytes released or restored
    // A resume: physical bytes of paused allocations the program freed before it
    // (nothing to bring back), since their region was last resumed. What a pause
    // released is `bytes` of the resume after it plus these plus its `cachedBytes`.
    uint64_t freedBytes = 0;
    // A pause: the part of `bytes` that was free blocks kept for reuse, let go with
    // no backup (no resume brings them back).
    uint64_t cachedBytes = 0;
    // A pause: where the content of `bytes` went (the rest had no backup), and
    // the part of toDiskBytes that went to disk because host backups had reached
    // the host budget (Regions::setHostBudget).
    uint64_t toHostBytes = 0, toDiskBytes = 0, overBudgetBytes = 0;
    // A resume: some allocation's content came back different from what its
    // verified pause checksummed (the message names it).
    bool verifyFailed = false;
    uint64_t allocations = 0;
    uint32_t regions = 0;  // regions (tag on a device) touched
    double seconds = 0;
    char message[512] = "";
    // `bytes` by device (wire codes), in the order first met.
    static constexpr int kMaxDevices = 16;
    struct DeviceBytes {
        uint8_t device;
        uint64_t bytes;
    };
    DeviceBytes devices[kMaxDevices] = {};
    int deviceCount = 0;
    void addBytes(uint8_t device, uint64_t n);
    // What no resume brings back: for a resume, "freed_bytes" (beside `bytes`,
    // not part of it); for a pause, "cached_bytes" (part of `bytes`). Every answer
    // made from an OpResult writes it through here.
    void writeLetGo(JsonWriter& j) const;
    // A pause's "to_host_bytes", "to_disk_bytes" and "over_budget_bytes"; a
    // resume's "verify_failed".
    void writePlaces(JsonWriter& j) const;
    // Writes {"ok":..., "action":..., ...} into out; returns its length.
    size_t toJson(const char* action, char* out, size_t size) const;
};

// Where a pause puts content whatever each region's own backup says (courtesy):
// CPU memory can go to disk only; CUDA memory to host or disk.
// "cpu", "cuda:3": a device (wire code) as the trace names it.
void deviceText(uint8_t device, char* out, size_t size);

struct ForcedBackup {
    core::BackupKind cpu = core::BackupKind::Disk;
    core::BackupKind cuda = core::BackupKind::Disk;
};

class Regions {
public:
    static constexpr int kMaxTags = 64;
    static constexpr int kMaxRegions = 256;
    static constexpr uint8_t kNoRegion = 0xff;  // a thread's "no region" entry

    constexpr Regions() = default;
    Regions(const Regions&) = delete;
    Regions& operator=(const Regions&) = delete;

    // Set up once, before the first region is entered.
    void setCpuBackend(MemoryBackend* backend) { cpu_ = backend; }
    // `ready` (null: always) is asked once, when CUDA memory is first needed: the
    // driver is found lazily, so that a CPU-only program never loads it.
    void setCudaBackend(MemoryBackend* backend, bool (*ready)(Failure&) = nullptr) {
        cuda_.backend = backend;
        cuda_.ready = ready;
    }
    // The same for Ascend NPU memory (npu:N), found when first needed.
    void setNpuBackend(MemoryBackend* backend, bool (*ready)(Failure&) = nullptr) {
        npu_.backend = backend;
        npu_.ready = ready;
        npu_.retries = true;
    }
    void setBackupDirectory(const char* directory);
    // The same while the program runs (torch_memory_saver's set_disk_backup_dir):
    // the next disk backups go to `directory`, which must be a directory this
    // process can write; false, with the reason, when it is not.
    bool changeBackupDirectory(const char* directory, Failure& why);
    // Host backups' pinned memory kept after a resume for the next pause: at most
    // `bytes` (MemoryBackend::setHostPoolLimit). Returns what is kept now.
    uint64_t setHostPoolLimit(uint64_t bytes) {
        if (cuda_.backend) cuda_.backend->setHostPoolLimit(bytes);
        return hostPoolBytes();
    }
    // The most pinned host memory host backups and the host pool may hold
    // together (memtool run --host-budget; UINT64_MAX: no budget). A pause whose
    // region's host backup would go beyond it backs that region up to disk
    // instead, and the pool is trimmed first so that what is pinned stays
    // within it; the answer says how much went where.
    void setHostBudget(uint64_t bytes) { hostBudget_.store(bytes, std::memory_order_relaxed); }
    uint64_t hostBudget() const { return hostBudget_.load(std::memory_order_relaxed); }
    // Device memory a new region allocation must leave free (torch_memory_saver's
    // memory_margin_bytes; 0: none): one that would leave less fails as out of
    // memory, where the backend can tell the device's free memory (CUDA).
    void setMemoryMargin(uint64_t bytes) { margin_.store(bytes, std::memory_order_relaxed); }
    uint64_t memoryMargin() const { return margin_.load(std::memory_order_relaxed); }
    // Pinned host memory kept now for the next pause.
    uint64_t hostPoolBytes() { return cuda_.backend ? cuda_.backend->hostPoolBytes() : 0; }
    void setEngine(Engine* engine) { engine_ = engine; }

    // ---- the calling thread's region ------------------------------------------------
    // Enters the region `tag`: the thread's allocations until the matching exit are
    // served pausable, each kept with `backup` (a tag may hold allocations of several
    // backup kinds, as torch_memory_saver's do; a pause backs each up its own way).
    // `deviceOnly`: CPU allocations pass the region by (they go where they would
    // outside it): torch_memory_saver's regions serve only the device allocator.
    // `verify`: the tag's pauses checksum each allocation's content and its
    // resumes check it (setVerifyAll for every tag); once asked, for good.
    bool enter(const char* tag, core::BackupKind backup, Failure& why, bool deviceOnly = false,
               bool verify = false);
    // memtool run --verify: every backed-up allocation's content is checksummed at
    // its pause (on its device) and checked after its resume; a mismatch fails
    // the resume loudly (stderr, the trace's warnings, the answer's
    // verify_failed), naming the allocation. Set before the first pause.
    void setVerifyAll(bool on) { verifyAll_.store(on, std::memory_order_relaxed); }
    // Enters "no region": allocations until the matching exit are the program's
    // own even inside a region (torch_memory_saver's disable()).
    bool enterNone(Failure& why);
    void exit();
    // The calling thread allocates into a region now (hooks check this first).
    bool threadInRegion() const;
    // The same for a CPU storage of `size` bytes: under --pausable all alone (no
    // explicit region), storages under kImplicitMinCpuBytes stay in the program's
    // heap, since a page of its own each would cost more than they hold (a
    // 256-byte storage would take 4 KiB).
    static constexpr uint64_t kImplicitMinCpuBytes = 64 * 1024;
    bool threadInRegionForCpu(uint64_t size) const;

    // `memtool run --pausable all`: every allocation a backend can serve belongs
    // to a region from the start, "default" (backup none) unless an explicit
    // region says otherwise. Set once, before the first allocation. With
    // `backup` and `deviceOnly`, torch_memory_saver's TMS_INIT_ENABLE: only device
    // memory, kept in `backup` while paused.
    void setPausableAll(core::BackupKind backup = core::BackupKind::None, bool deviceOnly = false);
    bool pausableAll() const { return pausableAll_; }

    // ---- fork (the collector's pthread_atfork handlers) ------------------------------
    // The locks, taken in the collector's order: the outer ones (operations, the
    // CUDA backend's loading) before its module-scan lock, the table's after it.
    void lockOuterForFork();
    void lockTableForFork();
    void unlockTableAfterFork();
    void unlockOuterAfterFork();
    // In the child (single-threaded, the table's lock held): what it inherited is
    // its copy of the parent's allocations, freed here the usual way but never this
    // process's to pause, list or count; its own regions start empty, and are
    // declared on its own stream when they first serve memory.
    void childAfterFork();

    // ---- allocation routing (hooks) ---------------------------------------------------
    // Serves `size` bytes on `device` from the calling thread's region: page- (or
    // granularity-) rounded memory of the backend's own, recorded with its region.
    // Null when it cannot (the reason in *why): the caller reports out-of-memory.
    void* serve(uint8_t device, uint64_t size, uint64_t alignment, Failure& why);
    // Frees a region allocation (recorded as freed first). False when `address`
    // is not one: the caller frees it its own way.
    bool release(uint64_t address);
    // Whether `address` is a live region allocation's (release() would take it).
    bool holds(uint64_t address);
    // The tag of the live region allocation whose mapping contains `address`
    // (into `tag`); false when none does.
    bool tagOf(uint64_t address, char* tag, size_t tagSize);
    // Copies `bytes` of paused memory at `address` from its backup (disk or
    // host) into `out`; the region stays paused. False, with the reason, when
    // the range is not one paused allocation's with a backup.
    bool readBackup(uint64_t address, void* out, uint64_t bytes, Failure& why);

    // ---- commands ---------------------------------------------------------------------
    // Pauses every resident allocation of `tag` (null: of every tag). With
    // `forced`, the content goes there whatever each region's own backup says
    // (courtesy). Backups are written first: if any fails, nothing is released.
    OpResult pause(const char* tag, core::ControlOrigin origin,
                   core::ControlAction action = core::ControlAction::Pause,
                   const ForcedBackup* forced = nullptr);
    OpResult resume(const char* tag, core::ControlOrigin origin,
                    core::ControlAction action = core::ControlAction::Resume);
    // Moves every paused region's host backup to disk, oldest pause first, and
    // lets the pinned memory go (the host pool keeps none after it): a policy's
    // "spill host backups to disk". Stops at the first that cannot move, the rest
    // left in host memory; a resume reads each from where it is.
    OpResult spillHostBackups();
    // [{"tag":..., "device":..., "bytes":..., "state":..., "backup":...}, ...]
    size_t describe(char* out, size_t size);
    // Bytes of allocations on `device` now paused / resident (for yield's report).
    void totals(uint8_t device, uint64_t* resident, uint64_t* paused);
    // What `device` holds that memtool counted: its regions' resident bytes, and
    // the bytes of the allocations the engine has live that no region holds (a
    // library's own cudaMalloc, memory from before the regions), which a yield
    // cannot release. False without an engine.
    bool heldOnDevice(uint8_t device, uint64_t* inRegions, uint64_t* outsideRegions);
    // The device's free and total memory, where its backend can tell.
    bool deviceMemory(uint8_t device, uint64_t* free, uint64_t* total) {
        MemoryBackend* backend = backendFor(device);
        return backend && backend->deviceMemory(device, free, total);
    }

    // ---- faults -----------------------------------------------------------------------
    // The tag of the paused allocation holding `address`; async-signal-safe.
    bool pausedAt(uint64_t address, char* tag, size_t tagSize) const;

private:
    using State = Allocation::State;
    struct Tag {
        char name[core::kMaxTagBytes + 1];
        bool used;
        bool verify;  // its pauses are verified (enter's `verify`)
    };
    // A thread's region entry (ThreadState::regionEntries): the tag's index in bits
    // 0-7 (kNoRegion: "no region"), the backup kind in bits 8-9, deviceOnly bit 10.
    static uint16_t entryOf(int tag, core::BackupKind backup, bool deviceOnly) {
        return static_cast<uint16_t>(tag | static_cast<int>(backup) << 8 |
                                     (deviceOnly ? 1 << 10 : 0));
    }
    static int entryTag(uint16_t e) { return e & 0xff; }
    static core::BackupKind entryBackup(uint16_t e) {
        return static_cast<core::BackupKind>(e >> 8 & 3);
    }
    static bool entryDeviceOnly(uint16_t e) { return (e >> 10 & 1) != 0; }
    // The entry an allocation on `device` by this thread goes by: the innermost
    // region that takes the device (CPU allocations pass deviceOnly ones by); false
    // when the thread is in none of them (*implicit: then only --pausable all's
    // default region can take it).
    bool entryFor(uint8_t device, uint16_t* entry, bool* implicit) const;
    struct Region {
        bool used;
        bool busy;  // a pause or resume is working on it
        uint8_t tag;
        uint8_t device;
        core::BackupKind backup;  // what its allocations' content is kept in while paused
        uint64_t declaredIn;      // the engine's stream generation it was declared in (0: not yet)
        uint64_t residentBytes, pausedBytes;  // requested sizes
        uint32_t pausedCount;                 // allocations paused now
        uint64_t freedPausedBytes;    // mapped bytes freed while paused, since the last resume
        core::BackupKind pausedWith;  // the backup kind of the pause under way
        bool inherited;               // a fork child's: the parent's, not used in this process yet
    };
    // One allocation an operation works on, copied out of the table.
    struct Work {
        uint32_t index;
        uint16_t region;
        uint16_t backup;  // its backup slot + 1, or 0
        uint8_t device;
        uint64_t address, mapped, offset;
        uint64_t sum;  // the content's checksum at the pause, when `verify`
        bool verify;
    };

    MemoryBackend* backendFor(uint8_t device);
    // Whether mapping `bytes` more on `device` leaves the memory margin free.
    bool leavesMargin(MemoryBackend& backend, uint8_t device, uint64_t bytes, Failure& why);
    bool cudaAvailable(Failure& why) { return cuda_.get("this memtool has no CUDA support", why); }
    // A device's memory can be backed up to pinned host memory (CUDA's or an NPU's).
    bool deviceHostBackups(Failure& why);
    int findTagLocked(const char* tag) const;
    // finds or makes; -1 when full
    int regionLocked(int tag, core::BackupKind backup, uint8_t device);
    void declareLocked(int region);
    void warmLocked();
    // The region of (tag, backup, device), made on first use; -1 when the table is full.
    int regionOfLocked(int tag, core::BackupKind backup, uint8_t device);
    // Releases the cached allocations of `tag`'s regions (null: all); their bytes.
    uint64_t dropCache(const char* tag, OpResult& into);
    // Frees a fork child's copy of its parent's allocation at `slot`; called with
    // tableMu_ held, returns with it released.
    void releaseInheritedLocked(uint32_t slot);
    // Marks the regions of `tag` (-1: all) busy and lists their allocations in
    // `state`; false when none.
    bool beginLocked(int tag, State state, MappedArray<Work>& work, bool* busy);
    // The start of a pause (state Resident) or resume (Paused): the work, grouped by
    // region, or false with result's message saying why there is none. A resume's
    // result also gets the bytes freed while paused (freedBytes), work or not.
    bool begin(const char* tag, State state, MappedArray<Work>& work, bool* busy, OpResult& result);
    // One control event per region of the work.
    void recordEach(const MappedArray<Work>& work, core::ControlAction action,
                    core::ControlOrigin origin, uint64_t startNs, bool ok, const char* message);
    // pause's phases, in order, under opMu_ (Regions.cpp says what each does).
    // 1. The work, or false with the answer in `result` (nothing live to pause).
    bool pauseCollect(const char* tag, MappedArray<Work>& work, OpResult& result);
    // 2. Every backup can be made, the devices are idle, a yield's memory frozen.
    bool pauseCheck(const MappedArray<Work>& work, core::ControlAction action,
                    const ForcedBackup* forced, size_t& frozen, Failure& why);
    // 3. The content out to its backups (opOpened_), before anything is released.
    bool pauseBackUp(MappedArray<Work>& work, Failure& why);
    // Within 3., under tableMu_: a host backup of `bytes` for region `r` fits in
    // the host budget (the host pool trimmed to leave room for it); when it does
    // not, region `index` goes to disk (its pausedWith, opOverBudget_). False
    // (why) when it cannot go to disk either.
    bool fitHostBudgetLocked(uint16_t index, uint64_t bytes, Failure& why);
    // Within 3.: the content of `w` out to its backup and, when it is verified,
    // its checksum into w.sum: beside the copy, on a thread of its own, where
    // the backend sums host memory (the copy's I/O and the sum overlap), else
    // after it. False (why) when either fails.
    bool copyOutChecked(MemoryBackend& backend, Work& w, Backup& to, Failure& why);
    // Within a resume: the checksums of one region's allocations, mapped back
    // with their content, against their pauses'. False, with the message, when
    // some came back different (or could not be checked).
    bool verifyResumed(const Work* first, size_t count, MemoryBackend& backend, char* message,
                       size_t size);
    // When 2. or 3. failed: all left as it was, the answer in `result`.
    void pauseUndo(const MappedArray<Work>& work, size_t frozen, const Failure& why,
                   OpResult& result);
    // 4. The memory released, the allocations paused; how many could not be.
    size_t pauseRelease(const MappedArray<Work>& work, size_t frozen, OpResult& result,
                        char* firstError, size_t errorSize);
    // 5. The operation ended and the answer written into `result`.
    void pauseAnswer(const MappedArray<Work>& work, size_t failed, const char* firstError,
                     uint64_t startNs, OpResult& result);
    void endLocked(const bool* busy);
    void waitForOperation();
    void record(const Work* first, size_t count, core::ControlAction action,
                core::ControlOrigin origin, core::BackupKind backup, uint64_t startNs, bool ok,
                const char* message);

    MemoryBackend* cpu_ = nullptr;
    // A device's backend, whose library is looked for once, when its memory is
    // first needed (`ready`), so that a CPU-only program never loads it.
    struct LazyBackend {
        MemoryBackend* backend = nullptr;
        bool (*ready)(Failure&) = nullptr;
        Mutex mu;
        std::atomic<int> state{0};  // 0 not asked yet, 1 ready, -1 unavailable
        // Asked again after a failure (NPU: the runtime is used only where the
        // program loaded it, which may be later than the first question).
        bool retries = false;
        char why[256] = "";
        // The backend, or null with the reason in `why` (`missing` when none is set).
        MemoryBackend* get(const char* missing, Failure& why);
    };
    LazyBackend cuda_;
    LazyBackend npu_;
    Engine* engine_ = nullptr;

    Mutex tableMu_;
    Mutex opMu_;
    Tag tags_[kMaxTags] = {};
    Region regions_[kMaxRegions] = {};
    BackupSlots backups_;             // the paused content, with the directory disk backups go to
    bool opBusy_[kMaxRegions] = {};   // under opMu_: the regions the operation works on
    int opOpened_[kMaxRegions] = {};  // under opMu_: the backup slot each one fills
    AllocationTable allocations_;     // every region allocation, by slot and by address
    // Paused allocations' ranges for the fault handler, which may take no lock:
    // written under tableMu_, read lock-free.
    PausedIndex paused_;
    std::atomic<uint64_t> margin_{0};
    std::atomic<uint64_t> hostBudget_{UINT64_MAX};
    std::atomic<bool> verifyAll_{false};
    bool opOverBudget_[kMaxRegions] = {};  // under opMu_: regions the budget sent to disk
    std::atomic<bool> marginSaid_{false};
    std::atomic<bool> anyServed_{false};  // release() skips the lock until a region served memory
    bool pausableAll_ = false;
    uint16_t defaultEntry_ = 0;  // what pausableAll_ puts a thread outside regions in
    // (tag, backup, device) -> region + 1: serve's fast lookup
    uint16_t regionIndex_[kMaxTags * 3 * 256] = {};
    FreeBlockCache cache_;  // the freed blocks kept for reuse, threaded through allocations_
};

// The process's regions (the preload collector's).
Regions& regions();

}  // namespace memtool::collectors::control
