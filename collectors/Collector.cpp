#include "collectors/Collector.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "collectors/control/ControlChannel.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/LiveTensors.h"
#include "collectors/cuda/CudaRuntimeHooks.h"
#include "collectors/engine/ModuleName.h"
#include "collectors/engine/NoDestroy.h"
#include "collectors/engine/SocketSink.h"
#include "collectors/engine/Warn.h"
#include "collectors/preload/ChildEnvironment.h"
#include "collectors/preload/GotPatcher.h"
#include "collectors/preload/ProgramEnd.h"
#include "collectors/stacks/CfiUnwinder.h"
#include "collectors/stacks/PythonTracker.h"
#include "collectors/torch/TorchBridgeLoader.h"
#include "core/SourceHash.h"
#if MEMTOOL_HAVE_CUDA_VMM
#include "collectors/control/CudaVmmBackend.h"
#endif
#include "collectors/control/PausedAccess.h"
#include "collectors/control/Regions.h"
#include "core/DecimalPair.h"

namespace memtool::collectors {

namespace {

// Plain data at namespace scope only (or objects built on first use): the library
// constructor runs before this file's dynamic initializers would.
char gSocketPath[4096];
bool gConfigured = false;
bool gGaveUp = false;                    // the CLI could not be reached: never try again
std::atomic<bool> gCudaAttached{false};  // the CUDA injection asked to record
// CUDA runtime hooks (the fallback route): every module's cudaMalloc & co. slots
// are patched once cudaRuntimeRecording() is on; gCudaHooked once any slot was.
std::atomic<bool> gCudaHooked{false};
std::atomic<bool> gRuntimeSourceNoted{false};
pthread_mutex_t gScanMutex = PTHREAD_MUTEX_INITIALIZER;
bool gForkChild = false;           // the next stream is a fork child's first (under gScanMutex)
bool gExitHandlerSet = false;      // on_exit registered in this process image
std::atomic<int> gExitStatus{-1};  // what the process gave exit(), once it did
// How long a collector waits for `memtool run` to admit its connection.
constexpr int kAdmissionTimeoutMs = 10000;

constinit NoDestroy<Engine> gEngine;
constinit NoDestroy<SocketSink> gSink;
// memtool's variables, as this process started with them, for its children.
constinit NoDestroy<ChildEnvironment> gChildEnvironment;
constinit NoDestroy<control::Regions> gRegions;
constinit NoDestroy<control::CpuPagesBackend> gCpuPages;
#if MEMTOOL_HAVE_CUDA_VMM
constinit NoDestroy<control::CudaVmmBackend> gCudaVmm;
// Asked when a region first needs CUDA memory: the driver is already loaded in a
// program that uses CUDA, and is never loaded into one that does not.
bool cudaVmmReady(control::Failure& why) { return gCudaVmm.value.load(why); }
#endif
constinit NoDestroy<control::SafePoint> gSafePoint;
constinit NoDestroy<control::Courtesy> gCourtesy{gRegions.value, gSafePoint.value};
constinit NoDestroy<control::LiveTensors> gTensors{gSafePoint.value};
constinit NoDestroy<control::RegionCommands> gCommands{gRegions.value, &gCourtesy.value,
                                                       &gTensors.value};

// ---- what the module scan keeps (under gScanMutex) --------------------------------
// Keys are load bias + 1 (a non-PIE executable's bias is 0); the value is a hash of
// the path, so a different object loaded at a reused address is described again.
struct ScanState {
    PointerMap allocatorPatched;  // libc10 objects whose posix_memalign/free are ours
    PointerMap sharedPatched;     // libtorch_cpu objects whose shm_open/mmap/munmap are ours
    PointerMap runtimePatched;    // objects looked at for the CUDA runtime hooks
    PointerMap regionPatched;     // libc10_cuda objects given the region hooks
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
constinit NoDestroy<ScanState> gScan;
ScanState& scanState() { return gScan.value; }

// The C library reports its counts of objects loaded and unloaded (dlpi_adds,
// dlpi_subs) in a dl_phdr_info of `size` bytes.
bool hasLoaderCounts(size_t size) {
    return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs);
}

// ---- the allocator's hooks: libc10's DefaultCPUAllocator ---------------------------
// It calls posix_memalign and free itself, through its own GOT: hooking exactly
// those slots sees every CPU storage of any torch, and no other allocation or free
// in the process.
//
// Inside a pausable region (memtool.region), storages come from the collector's
// own pages instead, which a pause can release while their addresses stay.
int hookPosixMemalign(void** out, size_t alignment, size_t size) noexcept {
    control::startIfWanted();
    if (gRegions.value.threadInRegionForCpu(size)) {
        control::Failure why;
        void* p = gRegions.value.serve(core::kDeviceCpu, size, alignment, why);
        if (!p) {  // torch raises its out-of-memory error
            engine().oom(core::kDeviceCpu, size, core::OomSource::Allocator);
            return ENOMEM;
        }
        control::installPausedAccessHandler(gRegions.value);
        *out = p;
        return 0;
    }
    int rc = posix_memalign(out, alignment, size);
    if (rc == 0)
        engine().alloc(core::kDeviceCpu, reinterpret_cast<uint64_t>(*out), size);
    else if (rc == ENOMEM)  // torch raises its out-of-memory error with this size
        engine().oom(core::kDeviceCpu, size, core::OomSource::Allocator);
    return rc;
}

void hookFree(void* p) noexcept {
    if (!p) return free(p);
    control::startIfWanted();
    const uint64_t address = reinterpret_cast<uint64_t>(p);
    if (gRegions.value.release(address)) return;  // recorded and released there
    engine().free(address);
    free(p);
}

const GotHook kAllocatorHooks[] = {
    MEMTOOL_GOT_HOOK(posix_memalign, &hookPosixMemalign),
    MEMTOOL_GOT_HOOK(free, &hookFree),
};

bool isAllocatorLibrary(const char* path) { return fileNameStartsWith(path, "libc10.so"); }

// ---- shared memory: PyTorch's MapAllocator (libtorch_cpu) --------------------------
// share_memory_(), DataLoader batches and both sharing strategies make a storage's
// memory with shm_open(O_CREAT | O_EXCL), ftruncate and mmap(MAP_SHARED) of that
// descriptor; the processes it is passed to map it again (a descriptor received,
// or the name opened without O_CREAT). Counting the mapping of a descriptor this
// process created, on the `shared` row, counts each storage once, in its creator.
// Descriptors are told apart from a reused number by their inode.
constexpr int kMaxShmFds = 4096;
std::atomic<uint64_t> gCreatedShm[kMaxShmFds];  // fd -> inode + 1 of a shm object made here
// One past the highest descriptor gCreatedShm ever noted: a fork child clears only
// that far. The table is 8 pages, untouched in most programs, and a child's write
// to each would be a page fault of its own, in every worker a pool or a DataLoader
// forks.
std::atomic<int> gCreatedShmEnd{0};

int hookShmOpen(const char* name, int oflag, mode_t mode) noexcept {
    const int fd = shm_open(name, oflag, mode);
    if (fd >= 0 && fd < kMaxShmFds) {
        struct stat st {};
        const bool created = (oflag & O_CREAT) && fstat(fd, &st) == 0;
        int end = gCreatedShmEnd.load(std::memory_order_relaxed);
        while (end <= fd && !gCreatedShmEnd.compare_exchange_weak(end, fd + 1)) {
        }
        gCreatedShm[fd].store(created ? static_cast<uint64_t>(st.st_ino) + 1 : 0);
    }
    return fd;
}

bool createdHere(int fd) {
    if (fd < 0 || fd >= kMaxShmFds) return false;
    const uint64_t inode = gCreatedShm[fd].load(std::memory_order_relaxed);
    struct stat st {};
    return inode != 0 && fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) + 1 == inode;
}

void* hookMmap64(void* address, size_t length, int prot, int flags, int fd,
                 off64_t offset) noexcept {
    void* p = mmap64(address, length, prot, flags, fd, offset);
    if (p != MAP_FAILED && (flags & MAP_SHARED) && createdHere(fd))
        engine().alloc(core::kDeviceShared, reinterpret_cast<uint64_t>(p), length);
    return p;
}

int hookMunmap(void* address, size_t length) noexcept {
    engine().free(reinterpret_cast<uint64_t>(address));  // before another mapping can take it
    return munmap(address, length);
}

const GotHook kSharedMemoryHooks[] = {
    MEMTOOL_GOT_HOOK(shm_open, &hookShmOpen),
    MEMTOOL_GOT_HOOK(mmap64, &hookMmap64),
    MEMTOOL_GOT_HOOK(mmap, &hookMmap64),
    MEMTOOL_GOT_HOOK(munmap, &hookMunmap),
};

bool isSharedMemoryLibrary(const char* path) { return fileNameStartsWith(path, "libtorch_cpu.so"); }

// ---- one scan of the loaded objects --------------------------------------------------
// Module descriptions are gathered in memory of the scan's own (mmap), copied out
// of the loader's data so they stay valid if an object is unloaded meanwhile.
struct ModuleEntry {
    ModuleInfo info;
    uint64_t key;
    uint64_t hash;
    uint64_t ranges[8][2];
};

class Scan {
public:
    constexpr Scan() = default;
    Scan(const Scan&) = delete;
    Scan& operator=(const Scan&) = delete;
    ~Scan() {
        if (arena_) munmap(arena_, arenaBytes_);
    }
    // Starts a scan in the memory of the last one (under gScanMutex): every dlopen
    // scans, and pages mapped afresh each time would each be faulted in again.
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
    bool growArena(size_t atLeast) {
        // Paths are kept where they are: a new block, and the old one stays mapped
        // until the scan ends, so earlier pointers remain valid.
        size_t bytes = arenaBytes_ * 2 > atLeast + 65536 ? arenaBytes_ * 2 : atLeast + 65536;
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return false;
        if (arena_) retired_.push(Block{arena_, arenaBytes_});
        arena_ = static_cast<char*>(p);
        arenaBytes_ = bytes;
        arenaUsed_ = 0;
        return true;
    }
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

// The scan of each refresh, and the second one of a stream that starts afresh.
constinit NoDestroy<Scan> gScans[2];

const char* mainExecutable(size_t* len) {
    static char path[4096];
    static size_t n = 0;
    if (n == 0) {
        ssize_t got = readlink("/proc/self/exe", path, sizeof path - 1);
        n = got > 0 ? static_cast<size_t>(got) : 0;
        path[n] = '\0';
    }
    *len = n;
    return path;
}

int scanModule(dl_phdr_info* info, size_t size, void* data) {
    auto* scan = static_cast<Scan*>(data);
    ScanState& state = scanState();
    const bool mainProgram = scan->visited++ == 0;
    if (mainProgram && hasLoaderCounts(size)) {
        scan->subs = info->dlpi_subs;
        scan->noUnloads = state.lastSubs == info->dlpi_subs;
    }
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    const uint64_t key = info->dlpi_addr + 1;
    uint64_t seen = 0;
    if (cudaRuntimeRecording() && (*name || mainProgram) && !skipForCudaRuntimeHooks(name) &&
        !state.runtimePatched.find(key, &seen) && state.runtimePatched.insert(key, 1)) {
        size_t count = 0;
        const GotHook* hooks = cudaRuntimeHooks(&count);
        if (patchModuleImports(info, hooks, count, "libcudart", &state.slots) > 0)
            gCudaHooked = true;
    }
    // Every dlopen scans all loaded objects again (300 of them once torch is
    // imported); one already checked, and announced where the stream is on, is
    // the same object as long as nothing was unloaded.
    const bool checked = scan->noUnloads && state.checked.find(key, &seen);
    if (checked && state.described.find(key, &seen)) return 0;
    size_t pathLen = std::strlen(name);
    const char* path = name;
    if (pathLen == 0) {
        if (!mainProgram) return 0;  // the vDSO: no file to read symbols from
        path = mainExecutable(&pathLen);
    }
    // The path's hash, the value the tables above keep (never 0).
    const uint64_t hash = core::fnv1a64({path, pathLen}) | 1;
    if (!checked) {
        if (fileNameStartsWith(path, "libc10_cuda.so") && !state.regionPatched.find(key, &seen) &&
            state.regionPatched.insert(key, 1)) {
            size_t count = 0;
            const GotHook* hooks = cudaRegionHooks(&count);
            patchModuleImports(info, hooks, count, "libcudart", &state.slots);
        }
        if (isSharedMemoryLibrary(path) &&
            !(state.sharedPatched.find(key, &seen) && seen == hash) &&
            patchModuleImports(info, kSharedMemoryHooks, 4, nullptr, &state.slots) > 0)
            state.sharedPatched.insert(key, hash);
        if (isAllocatorLibrary(path) &&
            !(state.allocatorPatched.find(key, &seen) && seen == hash) &&
            patchModuleImports(info, kAllocatorHooks, 2, nullptr, &state.slots) > 0) {
            state.allocatorPatched.insert(key, hash);
            scan->patchedNew = true;
        }
        state.checked.insert(key, hash);
    }
    if (state.described.find(key, &seen) && seen == hash) return 0;
    ModuleEntry e{};
    e.key = key;
    e.hash = hash;
    e.info.path = scan->keep(path, pathLen);
    e.info.pathBytes = pathLen;
    e.info.loadBias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum && e.info.rangeCount < 8; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        e.ranges[e.info.rangeCount][0] = info->dlpi_addr + ph.p_vaddr;
        e.ranges[e.info.rangeCount][1] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
        ++e.info.rangeCount;
    }
    if (e.info.path) scan->modules.push(e);
    return 0;
}

// The loader's counts of objects loaded and unloaded so far, from the first object
// alone: dl_iterate_phdr stops there, where a whole scan reads every object's
// entry (a fork child's first one touches ~300 pages for the first time, 0.7 ms).
struct LoaderCounts {
    uint64_t adds = 0, subs = 0;
    bool known = false;
};

int readLoaderCounts(dl_phdr_info* info, size_t size, void* data) {
    auto* counts = static_cast<LoaderCounts*>(data);
    if (hasLoaderCounts(size)) {
        counts->adds = info->dlpi_adds;
        counts->subs = info->dlpi_subs;
        counts->known = true;
    }
    return 1;
}

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

// on_exit: the status exit() was given (a return from main too), for the end record.
void rememberExitStatus(int status, void*) { gExitStatus.store(status); }

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

// Under gScanMutex. Connects once; a process that never loads an allocator memtool
// tracks (a shell, a compiler the script spawns) never appears in the trace.
void ensureConnected() {
    Engine& e = engine();
    if (!gConfigured || gGaveUp || e.active()) return;
    e.wantReopen(false);
    const char* why = nullptr;
    // Nothing is sent before memtool run admits the connection: a fork child that
    // connected and exited at once would otherwise be gone (reaped by its parent)
    // before memtool could check that it descends from the program.
    if (!gSink.value.connect(gSocketPath, &why) ||
        !gSink.value.awaitAdmission(kAdmissionTimeoutMs, &why)) {
        warn(why);
        gGaveUp = true;
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
    id.forked = gForkChild;
    if (!e.connect(gSink.value, id)) {
        warn(gSink.value.failure());
        gGaveUp = true;
        return;
    }
    gForkChild = false;
    // A fork child inherits the registration with the rest of its parent's memory.
    if (!gExitHandlerSet) {
        gExitHandlerSet = true;
        on_exit(rememberExitStatus, nullptr);
    }
    // Commands from `memtool ctl` come down the same socket.
    // Only the program itself waits for its control thread: its stream is flushed
    // when it ends, and memtool run waits for that. A descendant may still run,
    // quiet, when memtool run stops waiting for it: its thread sends what it did.
    const bool theProgram =
        !id.forked && e.options().runPid != 0 && static_cast<int>(getppid()) == e.options().runPid;
    control::startControlThread(
        gSink.value, e, gCommands.value,
        !theProgram || e.options().controlAtStart || e.options().pausableAll);
}

// The engine's reopener: a fork child's first event (or the first after an exec
// that failed) starts its stream, where the process tracks an allocator.
void reopenStream() {
    engine().wantReopen(false);
    refreshModules();
}

// The writer found its descriptor taken over: a connection of its own tells
// memtool run why this stream stops (the stream itself cannot say it any more).
// Under the engine's lock: nothing here records.
void sendLostNotice(const char* why) {
    SocketSink notice;
    const char* failed = nullptr;
    if (!notice.connect(gSocketPath, &failed) ||
        !notice.awaitAdmission(kAdmissionTimeoutMs, &failed))
        return;
    const Engine& e = engine();
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
void atForkPrepare() {
    // Before the first fork: the children's rule reads are then shared (CfiUnwinder.h).
    shareRulesWithForks();
    gRegions.value.lockOuterForFork();
    pthread_mutex_lock(&gScanMutex);
    gRegions.value.lockTableForFork();
    engine().prepareFork();
}
void atForkParent() {
    engine().parentAfterFork();
    gRegions.value.unlockTableAfterFork();
    pthread_mutex_unlock(&gScanMutex);
    gRegions.value.unlockOuterAfterFork();
}
void atForkChild() {
    Engine& e = engine();
    e.childAfterFork();
    control::forgetControlThread();
    gRegions.value.childAfterFork();
    gRegions.value.unlockTableAfterFork();
    // The child gets a stream of its own at its first event: a child that execs at
    // once (subprocess) never connects, its new image does if it tracks anything.
    gForkChild = true;
    if (gConfigured && !gGaveUp) e.wantReopen(true);
    // Shared memory the parent created is the parent's, mapped in the child or not.
    const int shmEnd = gCreatedShmEnd.load(std::memory_order_relaxed);
    for (int fd = 0; fd < shmEnd; ++fd) gCreatedShm[fd].store(0, std::memory_order_relaxed);
    gCreatedShmEnd.store(0, std::memory_order_relaxed);
    pthread_mutex_unlock(&gScanMutex);
    gRegions.value.unlockOuterAfterFork();
}

}  // namespace

Engine& engine() { return gEngine.value; }
const ChildEnvironment& childEnvironment() { return gChildEnvironment.value; }

namespace control {
Regions& regions() { return gRegions.value; }
SafePoint& safePoint() { return gSafePoint.value; }
Courtesy& courtesy() { return gCourtesy.value; }
}  // namespace control

bool collectorConfigured() { return gConfigured; }

bool startCollector() {
    // Wired whether or not this process records: the C surface may be called anyway.
    bindCudaRuntimeHooks(gEngine.value, gRegions.value);
    bindTorchBridge(gEngine.value);
    const char* socket = std::getenv(core::kEnvSocket);
    if (!socket || !*socket || std::strlen(socket) >= sizeof gSocketPath) return false;
    std::strcpy(gSocketPath, socket);
    Dl_info self;
    if (dladdr(reinterpret_cast<const void*>(&startCollector), &self) && self.dli_fname)
        gChildEnvironment.value.capture(environ, self.dli_fname);
    Engine& e = engine();
    const char* why = nullptr;
    if (!e.configure(EngineOptions::parse(std::getenv(core::kEnvOptions)), &why)) warn(why);
    uint64_t start = 0, end = 0;
    if (StackCapture::codeRangeOf(reinterpret_cast<const void*>(&hookFree), &start, &end))
        e.capture().setOwnCode(start, end);
    setCudaRuntimeRecording(e.options().cudaRuntimeHooks);
    control::Regions& r = gRegions.value;
    r.setEngine(&e);
    r.setCpuBackend(&gCpuPages.value);
#if MEMTOOL_HAVE_CUDA_VMM
    r.setCudaBackend(&gCudaVmm.value, cudaVmmReady);
    gCudaVmm.value.setHostPoolLimit(e.options().hostPoolBytes);
#endif
    r.setBackupDirectory(std::getenv(core::kEnvBackupDir));
    if (e.options().pausableAll) r.setPausableAll();
    gCourtesy.value.setCacheEmptier(emptyTorchCache);
    e.setReopener(reopenStream);
    gSink.value.onTakenOver(sendLostNotice);
    pthread_atfork(atForkPrepare, atForkParent, atForkChild);
    configureTorchBridge();
    gConfigured = true;
    return true;
}

void refreshModules() {
    if (!gConfigured) return;
    Engine& e = engine();
    pthread_mutex_lock(&gScanMutex);
    ScanState& state = scanState();
    Scan& scan = gScans[0].value;
    scan.restart();
    // Nothing loaded or unloaded since a scan whose every object was announced (a
    // fork child's new stream, which continues its parent's): nothing to scan.
    LoaderCounts counts;
    dl_iterate_phdr(readLoaderCounts, &counts);
    const bool settled =
        counts.known && counts.adds == state.settledAdds && counts.subs == state.settledSubs;
    if (!settled) dl_iterate_phdr(scanModule, &scan);
    const bool anyPatched = state.allocatorPatched.size() > 0;
    const bool wasActive = e.active();
    if (anyPatched || gCudaAttached || gCudaHooked) ensureConnected();
    const bool active = e.active();
    // A stream that starts afresh, after an earlier one of this process that it
    // does not continue, knows no module yet: every one is announced again.
    Scan& again = gScans[1].value;
    Scan* found = &scan;
    if (active && !wasActive && !e.continuesIds() && state.described.size() > 0) {
        state.described.clear();
        again.restart();
        dl_iterate_phdr(scanModule, &again);
        found = &again;
    }
    // What a scan of this refresh found is announced below only where the stream is on.
    state.settledAdds = active && counts.known ? counts.adds : 0;
    state.settledSubs = active && counts.known ? counts.subs : 0;
    if (found->visited > 0) state.lastSubs = found->subs;
    if (active) {
        // Until the engine connects, nothing is announced, so nothing may be marked described.
        for (size_t i = 0; i < found->modules.size(); ++i) {
            ModuleEntry& m = found->modules[i];
            m.info.ranges = m.ranges;
            e.announceModule(m.info);
            state.described.insert(m.key, m.hash);
        }
    }
    pthread_mutex_unlock(&gScanMutex);
    if (!active) return;
    if (gCudaHooked && !gRuntimeSourceNoted.exchange(true))
        e.note(core::kNoteCudaSource, "runtime-hooks");
    if (e.options().pythonStacks) PythonTracker::tryInstall(e);
    programEnd::tryInstallPython(e);
}

bool attachCuda() {
    if (!gConfigured) return false;
    gCudaAttached = true;
    refreshModules();  // announce modules, install Python tracking if due
    Engine& e = engine();
    e.note(core::kNoteCudaSource, "cupti");
    return e.active();
}

void fallBackToCudaRuntimeHooks(const char* why) {
    if (!gConfigured) return;
    setCudaRuntimeRecording(true);
    refreshModules();
    if (why) engine().note(core::kNoteWarning, why);
}

void finishCollector(core::ExitKind kind, int exitStatus) {
    Engine& e = engine();
    // A vfork child (subprocess, posix_spawn) shares its parent's memory until it
    // execs or exits: it must leave the parent's stream alone.
    if (static_cast<uint64_t>(getpid()) != e.streamPid()) return;
    if (exitStatus < 0 && kind == core::ExitKind::Normal) exitStatus = gExitStatus.load();
    e.finish(kind, exitStatus);
}

void childReaped(pid_t pid, int status) {
    if (pid <= 0 || !(WIFEXITED(status) || WIFSIGNALED(status))) return;  // stopped, continued
    const int saved = errno;  // the wait succeeded: the caller sees errno as it was
    char text[core::kDecimalPairBytes];
    engine().note(core::kNoteChildEnded, core::decimalPair(text, static_cast<uint64_t>(pid),
                                                           static_cast<uint32_t>(status)));
    errno = saved;
}

void beforeExec() {
    Engine& e = engine();
    if (static_cast<uint64_t>(getpid()) != e.streamPid()) return;  // a vfork child
    e.suspendForExec();
}

void afterFailedExec() {
    Engine& e = engine();
    if (static_cast<uint64_t>(getpid()) != e.streamPid()) return;
    e.resumeAfterFailedExec();
}

}  // namespace memtool::collectors
