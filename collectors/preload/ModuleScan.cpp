#include "collectors/preload/ModuleScan.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "collectors/ascend/AclHooks.h"
#include "collectors/cuda/CudaRuntimeHooks.h"
#include "collectors/engine/ModuleName.h"
#include "collectors/engine/Warn.h"
#include "collectors/preload/AllocatorHooks.h"
#include "collectors/preload/ProgramEnd.h"
#include "collectors/preload/StreamLifecycle.h"
#include "collectors/preload/TorchVersion.h"
#include "collectors/stacks/PythonTracker.h"
#include "core/SourceHash.h"

namespace memtool::collectors {

namespace {

// The C library reports its counts of objects loaded and unloaded (dlpi_adds,
// dlpi_subs) in a dl_phdr_info of `size` bytes.
bool hasLoaderCounts(size_t size) {
    return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs);
}

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

}  // namespace

bool Scan::growArena(size_t atLeast) {
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

int ModuleScan::visitModule(dl_phdr_info* info, size_t size, void* data) {
    auto* v = static_cast<Visit*>(data);
    v->self->visit(info, size, *v->scan);
    return 0;
}

void ModuleScan::visit(dl_phdr_info* info, size_t size, Scan& scan) {
    ScanState& state = state_;
    const bool mainProgram = scan.visited++ == 0;
    if (mainProgram && hasLoaderCounts(size)) {
        scan.subs = info->dlpi_subs;
        scan.noUnloads = state.lastSubs == info->dlpi_subs;
    }
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    const uint64_t key = info->dlpi_addr + 1;
    uint64_t seen = 0;
    if (!aclLoaded_.load(std::memory_order_relaxed) && isAclRuntime(name)) aclLoaded_ = true;
    if (cudaRuntimeRecording() && (*name || mainProgram) && !skipForCudaRuntimeHooks(name) &&
        !state.runtimePatched.find(key, &seen) && state.runtimePatched.insert(key, 1)) {
        size_t count = 0;
        const GotHook* hooks = cudaRuntimeHooks(&count);
        if (patchModuleImports(info, hooks, count, "libcudart", &state.slots) > 0) {
            cudaHooked_ = true;
            if (debugLogOn())
                DebugLine().add("cuda runtime calls hooked in ").add(*name ? name : "the program");
        }
    }
    // Every dlopen scans all loaded objects again (300 of them once torch is
    // imported); one already checked, and announced where the stream is on, is
    // the same object as long as nothing was unloaded.
    const bool checked = scan.noUnloads && state.checked.find(key, &seen);
    if (checked && state.described.find(key, &seen)) return;
    size_t pathLen = std::strlen(name);
    const char* path = name;
    if (pathLen == 0) {
        if (!mainProgram) return;  // the vDSO: no file to read symbols from
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
        size_t sharedCount = 0, allocatorCount = 0;
        const GotHook* shared = sharedMemoryHooks(&sharedCount);
        const GotHook* allocator = allocatorHooks(&allocatorCount);
        if (isSharedMemoryLibrary(path) &&
            !(state.sharedPatched.find(key, &seen) && seen == hash) &&
            patchModuleImports(info, shared, sharedCount, nullptr, &state.slots) > 0)
            state.sharedPatched.insert(key, hash);
        if (isAllocatorLibrary(path) && !(state.allocatorPatched.find(key, &seen) && seen == hash))
            patchAllocator(info, path, allocator, allocatorCount, key, hash, scan);
        state.checked.insert(key, hash);
    }
    if (state.described.find(key, &seen) && seen == hash) return;
    ModuleEntry e{};
    e.key = key;
    e.hash = hash;
    e.info.path = scan.keep(path, pathLen);
    e.info.pathBytes = pathLen;
    e.info.loadBias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum && e.info.rangeCount < 8; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        e.ranges[e.info.rangeCount][0] = info->dlpi_addr + ph.p_vaddr;
        e.ranges[e.info.rangeCount][1] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
        ++e.info.rangeCount;
    }
    if (e.info.path) scan.modules.push(e);
}

// libc10's CPU allocator calls posix_memalign and free through its own imports in
// every torch memtool knows (1.13 to 2.14). One that does not (another major version,
// another allocator) would leave its storages uncounted without a word: the trace
// says so instead, naming the torch. Each hook is patched on its own, to know which.
void ModuleScan::patchAllocator(dl_phdr_info* info, const char* path, const GotHook* hooks,
                                size_t count, uint64_t key, uint64_t hash, Scan& scan) {
    const char* missing = nullptr;
    for (size_t i = 0; i < count && !missing; ++i)
        if (patchModuleImports(info, &hooks[i], 1, nullptr, &state_.slots) == 0)
            missing = hooks[i].symbol;
    if (!missing) {
        state_.allocatorPatched.insert(key, hash);
        scan.patchedNew = true;
        if (debugLogOn()) DebugLine().add("allocator hooked in ").add(path);
        return;
    }
    if (allocatorWarningPending_.load()) return;  // one is enough
    char version[64];
    if (!torchVersionOf(path, version, sizeof version)) std::strcpy(version, "of unknown version");
    std::snprintf(
        allocatorWarning_, sizeof allocatorWarning_,
        "%s (torch %s) does not call %s through its imports, as the libc10 of every torch "
        "memtool knows (1.13 to 2.14) does: its CPU storages are not counted",
        path, version, missing);
    allocatorWarningPending_.store(true);
}

void ModuleScan::refresh() {
    if (!stream_.configured()) return;
    Engine& e = engine_;
    pthread_mutex_lock(&lock_);
    ScanState& state = state_;
    Scan& scan = scans_[0];
    scan.restart();
    // Nothing loaded or unloaded since a scan whose every object was announced (a
    // fork child's new stream, which continues its parent's): nothing to scan.
    LoaderCounts counts;
    dl_iterate_phdr(readLoaderCounts, &counts);
    const bool settled =
        counts.known && counts.adds == state.settledAdds && counts.subs == state.settledSubs;
    Visit first{this, &scan};
    if (!settled) dl_iterate_phdr(visitModule, &first);
    if (!settled && aclLoaded_.load()) {
        AclVisit visit{this, 0};
        dl_iterate_phdr(patchAclModule, &visit);
    }
    const bool anyPatched = state.allocatorPatched.size() > 0 || allocatorWarningPending_.load();
    const bool wasActive = e.active();
    if (anyPatched || cudaAttached_ || cudaHooked_ || aclHooked_) stream_.ensureConnected();
    const bool active = e.active();
    // A stream that starts afresh, after an earlier one of this process that it
    // does not continue, knows no module yet: every one is announced again.
    Scan& again = scans_[1];
    Scan* found = &scan;
    if (active && !wasActive && !e.continuesIds() && state.described.size() > 0) {
        state.described.clear();
        again.restart();
        Visit second{this, &again};
        dl_iterate_phdr(visitModule, &second);
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
    pthread_mutex_unlock(&lock_);
    if (!active) return;
    if (allocatorWarningPending_.load() && !allocatorWarningNoted_.exchange(true))
        e.note(core::kNoteWarning, allocatorWarning_);
    if (cudaHooked_ && !runtimeSourceNoted_.exchange(true))
        e.note(core::kNoteCudaSource, "runtime-hooks");
    if (pythonDeferred_.load()) return;
    if (e.options().pythonStacks) PythonTracker::tryInstall(e);
    programEnd::tryInstallPython(e);
}

int ModuleScan::patchAclModule(dl_phdr_info* info, size_t, void* data) {
    auto* visit = static_cast<AclVisit*>(data);
    ModuleScan* self = visit->self;
    ScanState& state = self->state_;
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    const uint64_t key = info->dlpi_addr + 1;
    uint64_t seen = 0;
    // The program (the first entry) has an empty name, and is patched; the vDSO
    // may have one too, and no imports.
    const bool program = visit->index++ == 0;
    if ((!*name && !program) || skipForAclHooks(name) || state.aclPatched.find(key, &seen) ||
        !state.aclPatched.insert(key, 1))
        return 0;
    size_t count = 0;
    const GotHook* imports = aclImportHooks(&count);
    const size_t allocations =
        patchModuleImports(info, imports, count, "libascendcl", &state.slots);
    const size_t lookups = patchModuleImports(info, aclDlsymHook(), 1, nullptr, &state.slots);
    if (allocations > 0 || lookups > 0) {
        self->aclHooked_ = true;
        if (debugLogOn()) DebugLine().add("acl hooks in ").add(*name ? name : "the program");
    }
    return 0;
}

int ModuleScan::restoreModule(dl_phdr_info* info, size_t, void* data) {
    auto* self = static_cast<ModuleScan*>(data);
    self->restored_ += restoreModuleImports(info, self->state_.slots);
    return self->state_.slots.size() == 0 ? 1 : 0;  // all of them back: the walk can stop
}

size_t ModuleScan::detach() {
    pthread_mutex_lock(&lock_);
    ScanState& state = state_;
    restored_ = 0;
    if (state.slots.size() > 0) dl_iterate_phdr(restoreModule, this);
    // Slots of objects unloaded since went with them.
    state.slots.clear();
    state.allocatorPatched.clear();
    state.sharedPatched.clear();
    state.runtimePatched.clear();
    state.regionPatched.clear();
    state.aclPatched.clear();
    state.described.clear();
    state.checked.clear();
    state.lastSubs = 0;
    state.settledAdds = state.settledSubs = 0;
    cudaHooked_ = false;
    aclHooked_ = false;
    runtimeSourceNoted_ = false;
    allocatorWarningNoted_ = false;
    const size_t restored = restored_;
    pthread_mutex_unlock(&lock_);
    return restored;
}

bool ModuleScan::attachCuda() {
    if (!stream_.configured()) return false;
    cudaAttached_ = true;
    if (debugLogOn()) DebugLine().add("cuda memory through CUPTI");
    refresh();  // announce modules, install Python tracking if due
    engine_.note(core::kNoteCudaSource, "cupti");
    return engine_.active();
}

void ModuleScan::fallBackToRuntimeHooks(const char* why) {
    if (!stream_.configured()) return;
    setCudaRuntimeRecording(true);
    if (debugLogOn())
        DebugLine().add("cuda memory through the runtime hooks: ").add(why ? why : "asked");
    refresh();
    if (why) engine_.note(core::kNoteWarning, why);
}

}  // namespace memtool::collectors
