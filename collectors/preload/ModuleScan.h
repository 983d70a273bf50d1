#pragma once
// The scan of loaded modules, after every change to them (start-up, dlopen): it
// patches the imports of the libraries memtool hooks (libc10's allocator,
// libtorch_cpu's shared memory, libc10_cuda's device allocations, every module's
// CUDA runtime calls once that route is on), has the stream connect once
// something worth recording is there, and announces the modules the stream does
// not know yet. Its tables and its scans live in memory of their own (mmap):
// a scan may run inside a dlopen hook, where the heap is off limits.

#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "collectors/engine/Engine.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/preload/GotPatcher.h"

namespace memtool::collectors {

class StreamLifecycle;

// What the scans keep (under the scan lock). Keys are load bias + 1 (a non-PIE
// executable's bias is 0); the value is a hash of the path, so a different object
// loaded at a reused address is described again.
struct ScanState {
    PointerMap allocatorPatched;  // libc10 objects whose posix_memalign/free are ours
    PointerMap sharedPatched;     // libtorch_cpu objects whose shm_open/mmap/munmap are ours
    PointerMap runtimePatched;    // objects looked at for the CUDA runtime hooks
    PointerMap regionPatched;     // libc10_cuda objects given the region hooks
    PointerMap aclPatched;        // objects given the ACL hooks (AclHooks.h)
    PointerMap described;         // objects announced to the CLI
    PointerMap checked;           // objects whose imports were looked at for the hooks above
    MappedArray<PatchedSlot> slots;
    // The loader's count of unloaded objects at the last scan: while it stays the
    // same, an object at a known load address is the one seen then. (Before the
    // first scan nothing is in `checked`, so its 0 skips nothing.)
    uint64_t lastSubs = 0;
    // The loader's counts of objects loaded and unloaded when the last scan that
    // announced all it found (the stream was on) began: while both stay so, a
    // refresh has nothing to check or announce. 0, 0: no such scan.
    uint64_t settledAdds = 0, settledSubs = 0;
};

// One module a scan found to announce, copied out of the loader's data so it
// stays valid if the object is unloaded meanwhile.
struct ModuleEntry {
    ModuleInfo info;
    uint64_t key;
    uint64_t hash;
    uint64_t ranges[8][2];
};

// One pass over the loaded objects: the modules it found, their paths in an
// arena of the pass's own (mmap).
class Scan {
public:
    constexpr Scan() = default;
    Scan(const Scan&) = delete;
    Scan& operator=(const Scan&) = delete;
    ~Scan() {
        if (arena_) munmap(arena_, arenaBytes_);
    }
    // Starts a scan in the memory of the last one (under the scan lock): every
    // dlopen scans, and pages mapped afresh each time would each be faulted in again.
    void restart() {
        modules.clear();
        patchedNew = false;
        visited = 0;
        noUnloads = false;
        subs = 0;
        arenaUsed_ = 0;
        retired_.release();
    }
    // A copy of `s` that lives as long as the scan; null when memory ran out.
    const char* keep(const char* s, size_t n) {
        if (arenaUsed_ + n + 1 > arenaBytes_ && !growArena(n + 1)) return nullptr;
        char* p = arena_ + arenaUsed_;
        std::memcpy(p, s, n);
        p[n] = '\0';
        arenaUsed_ += n + 1;
        return p;
    }

    MappedArray<ModuleEntry> modules;
    bool patchedNew = false;
    size_t visited = 0;  // dl_iterate_phdr reports the main program first
    // Nothing was unloaded since the last scan (the loader's dlpi_subs, the same in
    // every report of one dl_iterate_phdr): objects already checked are skipped.
    bool noUnloads = false;
    uint64_t subs = 0;

private:
    bool growArena(size_t atLeast);
    struct Block {
        char* base;
        size_t bytes;
    };
    struct Retired : MappedArray<Block> {
        ~Retired() { release(); }
        void release() {
            for (size_t i = 0; i < size(); ++i) munmap((*this)[i].base, (*this)[i].bytes);
            clear();
        }
    };
    char* arena_ = nullptr;
    size_t arenaBytes_ = 0;
    size_t arenaUsed_ = 0;
    Retired retired_;
};

class ModuleScan {
public:
    // `lock` is the one the scan and the stream's connection share (held across
    // fork() by StreamLifecycle); `stream` connects when a scan finds what to record.
    constexpr ModuleScan(Engine& engine, StreamLifecycle& stream, pthread_mutex_t& lock)
        : engine_(engine), stream_(stream), lock_(lock) {}
    ModuleScan(const ModuleScan&) = delete;
    ModuleScan& operator=(const ModuleScan&) = delete;

    // After any change to the set of loaded modules: patches, connects once
    // something worth recording is there, announces new modules, and installs
    // Python tracking when an interpreter runs. A no-op until the stream is configured.
    void refresh();

    // The CUDA injection's requests (collectors/CollectorApi.h): record through
    // CUPTI (true when the stream is on), or fall back to the runtime hooks.
    bool attachCuda();
    void fallBackToRuntimeHooks(const char* why);

    // memtool.track()'s end: every import slot a scan patched gets back what it
    // held, and the scans forget what they did, so that the program runs on with
    // none of memtool's code in its calls and a later track starts afresh.
    // Returns the slots restored.
    size_t detach();

    // memtool attach: a scan runs on a thread stopped at any point of the program
    // (perhaps between two halves of a bytecode, the GIL held): Python tracking is
    // not installed from there but from a pending call (the next bytecode boundary),
    // which clears this and scans again.
    void deferPython(bool defer) { pythonDeferred_.store(defer); }

private:
    struct Visit {
        ModuleScan* self;
        Scan* scan;
    };
    static int visitModule(dl_phdr_info* info, size_t size, void* data);
    static int restoreModule(dl_phdr_info* info, size_t size, void* data);
    void visit(dl_phdr_info* info, size_t size, Scan& scan);
    void patchAllocator(dl_phdr_info* info, const char* path, const GotHook* hooks, size_t count,
                        uint64_t key, uint64_t hash, Scan& scan);
    // Once libascendcl is loaded: every module not yet looked at gets the ACL
    // hooks (its allocation imports where it needs the runtime, and dlsym).
    struct AclVisit {
        ModuleScan* self;
        int index;  // of the module visited: 0 is the program
    };
    static int patchAclModule(dl_phdr_info* info, size_t size, void* data);

    Engine& engine_;
    StreamLifecycle& stream_;
    pthread_mutex_t& lock_;
    ScanState state_;
    // The scan of each refresh, and the second one of a stream that starts afresh.
    Scan scans_[2];
    std::atomic<bool> pythonDeferred_{false};
    std::atomic<bool> cudaAttached_{false};  // the CUDA injection asked to record
    std::atomic<bool> cudaHooked_{false};    // some module's CUDA runtime slot is ours
    std::atomic<bool> aclLoaded_{false};     // a scan saw libascendcl (never unset: hooks stay)
    std::atomic<bool> aclHooked_{false};     // some module's ACL allocation slot is ours
    std::atomic<bool> runtimeSourceNoted_{false};
    // A libc10 whose allocator memtool cannot hook: the warning, sent once the stream is on.
    char allocatorWarning_[1024] = "";
    std::atomic<bool> allocatorWarningPending_{false};
    std::atomic<bool> allocatorWarningNoted_{false};
    size_t restored_ = 0;  // under lock_: detach()'s count
};

}  // namespace memtool::collectors
