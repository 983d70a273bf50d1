// The LD_PRELOAD front end: library constructor/destructor, dlopen and _exit
// interposition, and the GOT hooks that libc10's CPU allocator is routed through.
// Everything else lives in the Tracker.

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "collectors/CudaRuntimeHooks.h"
#include "collectors/GotPatcher.h"
#include "collectors/ModuleName.h"
#include "collectors/NativeUnwinder.h"
#include "collectors/PythonTracker.h"
#include "collectors/TorchBridgeLoader.h"
#include "collectors/Tracker.h"

namespace memtool::collectors {
namespace {

// libc10's DefaultCPUAllocator calls posix_memalign and free itself, through its
// own GOT: hooking exactly those slots sees every CPU storage of any torch, and
// no other allocation or free in the process.
int hookPosixMemalign(void** out, size_t alignment, size_t size) {
    int rc = posix_memalign(out, alignment, size);
    Tracker& t = Tracker::instance();
    if (rc == 0 && t.active()) t.recordAlloc(core::kDeviceCpu, reinterpret_cast<uint64_t>(*out), size);
    return rc;
}

void hookFree(void* p) {
    Tracker& t = Tracker::instance();
    // Reported before the memory is released, so that a reuse of the address by
    // another thread cannot reach the stream ahead of this free.
    if (p && t.active()) t.recordFree(reinterpret_cast<uint64_t>(p));
    free(p);
}

const GotHook kAllocatorHooks[] = {
    {"posix_memalign", reinterpret_cast<void*>(&hookPosixMemalign)},
    {"free", reinterpret_cast<void*>(&hookFree)},
};

bool isAllocatorLibrary(const char* path) { return fileNameStartsWith(path, "libc10.so"); }

struct Scan {
    std::vector<Tracker::Module> modules;
    bool patchedNew = false;
    size_t visited = 0;  // dl_iterate_phdr reports the main program first
};

std::vector<uint64_t>* patchedBiases = nullptr;  // under gScanMutex
std::atomic<bool> cudaAttached{false};            // the CUDA injection asked to record
// CUDA runtime hooks (the fallback route): every module's cudaMalloc & co. slots
// are patched once runtimeHooks is on; cudaHooked once any slot was.
std::atomic<bool> runtimeHooks{false};
std::atomic<bool> cudaHooked{false};
std::atomic<bool> runtimeSourceNoted{false};
std::unordered_set<uint64_t>* runtimePatchedBiases = nullptr;  // under gScanMutex
// Objects already described to the tracker, by load bias: `import torch` dlopens
// hundreds of extension modules, and each dlopen should cost only the new ones.
std::unordered_set<uint64_t>* describedBiases = nullptr;  // under gScanMutex
pthread_mutex_t gScanMutex = PTHREAD_MUTEX_INITIALIZER;

std::string mainExecutable() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

int scanModule(dl_phdr_info* info, size_t, void* data) {
    auto* scan = static_cast<Scan*>(data);
    bool mainProgram = scan->visited++ == 0;
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    if (runtimeHooks && (*name || mainProgram) && !skipForCudaRuntimeHooks(name) &&
        runtimePatchedBiases->insert(info->dlpi_addr).second) {
        size_t count = 0;
        const GotHook* hooks = cudaRuntimeHooks(&count);
        if (patchModuleImports(info, hooks, count, "libcudart") > 0) cudaHooked = true;
    }
    if (describedBiases->count(info->dlpi_addr)) return 0;
    Tracker::Module m;
    m.path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "";
    if (m.path.empty()) {
        if (!mainProgram) return 0;  // the vDSO: no file to read symbols from
        m.path = mainExecutable();
    }
    m.loadBias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            m.ranges.emplace_back(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    }
    if (isAllocatorLibrary(m.path.c_str())) {
        bool seen = false;
        for (uint64_t b : *patchedBiases) seen |= b == m.loadBias;
        if (!seen && patchModuleImports(info, kAllocatorHooks, 2) > 0) {
            patchedBiases->push_back(m.loadBias);
            scan->patchedNew = true;
        }
    }
    scan->modules.push_back(std::move(m));
    return 0;
}

// Until the tracker connects, nothing is announced, so nothing may be marked described.
void markDescribed(const Scan& scan) {
    for (const auto& m : scan.modules) describedBiases->insert(m.loadBias);
}

// After any change to the set of loaded modules.
void refresh() {
    Tracker& t = Tracker::instance();
    if (!t.configured()) return;
    Scan scan;
    pthread_mutex_lock(&gScanMutex);
    if (!patchedBiases) patchedBiases = new std::vector<uint64_t>();
    if (!describedBiases) describedBiases = new std::unordered_set<uint64_t>();
    if (!runtimePatchedBiases) runtimePatchedBiases = new std::unordered_set<uint64_t>();
    dl_iterate_phdr(scanModule, &scan);
    bool anyPatched = !patchedBiases->empty();
    // Connect lazily: a process that never loads an allocator we track (a shell,
    // a compiler the script spawns) never appears in the trace.
    if (anyPatched || cudaAttached || cudaHooked) t.ensureConnected();
    bool active = t.active();
    if (active) {
        t.announceModules(scan.modules);
        markDescribed(scan);
    }
    pthread_mutex_unlock(&gScanMutex);
    if (!active) return;
    if (cudaHooked && !runtimeSourceNoted.exchange(true)) t.recordNote(core::kNoteCudaSource, "runtime-hooks");
    if (t.options().pythonStacks) PythonTracker::tryInstall(t);
}

void atForkPrepare() { Tracker::instance().prepareFork(); }
void atForkParent() { Tracker::instance().parentAfterFork(); }
void atForkChild() { Tracker::instance().childAfterFork(); }

__attribute__((constructor)) void collectorStart() {
    Tracker& t = Tracker::instance();
    if (!t.start()) return;
    pthread_atfork(atForkPrepare, atForkParent, atForkChild);
    configureTorchBridge();
    runtimeHooks = t.options().cudaRuntimeHooks;
    refresh();
}

__attribute__((destructor)) void collectorStop() { Tracker::instance().shutdown(0); }

}  // namespace
}  // namespace memtool::collectors

extern "C" {

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
    void* handle = memtool::collectors::realDlopen(file, mode);
    if (handle) memtool::collectors::refresh();
    return handle;
}

// os._exit() and friends skip destructors; end the stream first so that the trace
// is complete and nothing buffered is lost.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    using Fn = void (*)(int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "_exit"));
    memtool::collectors::Tracker::instance().shutdown(1);
    real(status);
    __builtin_unreachable();
}

__attribute__((visibility("default"))) const char* memtool_collector_version() { return "1"; }

// The surface the CUDA injection library (collectors/cuda) records through, so
// that CPU and CUDA events of a process share one tracker and one stream.
__attribute__((visibility("default"))) int memtool_cuda_attach() {
    memtool::collectors::Tracker& t = memtool::collectors::Tracker::instance();
    if (!t.configured()) return 0;
    memtool::collectors::cudaAttached = true;
    memtool::collectors::refresh();  // announce modules, install Python tracking if due
    if (t.active()) t.recordNote(memtool::core::kNoteCudaSource, "cupti");
    return t.active() ? 1 : 0;
}

// The CUDA injection could not subscribe to CUPTI (another subscriber holds it):
// CUDA memory is recorded through the runtime hooks instead, from now on.
__attribute__((visibility("default"))) void memtool_cuda_fallback(const char* why) {
    using namespace memtool::collectors;
    Tracker& t = Tracker::instance();
    if (!t.configured()) return;
    runtimeHooks = true;
    refresh();
    if (t.active() && why) t.recordNote(memtool::core::kNoteWarning, why);
}

// Before each CUDA device allocation the injection sees, until it is settled.
__attribute__((visibility("default"))) void memtool_torch_bridge_try() {
    memtool::collectors::tryAttachTorchBridge();
}

__attribute__((visibility("default"))) void memtool_record_alloc(uint8_t device, uint64_t key, uint64_t size) {
    memtool::collectors::Tracker& t = memtool::collectors::Tracker::instance();
    if (t.active()) t.recordAlloc(device, key, size);
}

__attribute__((visibility("default"))) void memtool_record_free(uint64_t key) {
    memtool::collectors::Tracker& t = memtool::collectors::Tracker::instance();
    if (t.active()) t.recordFree(key);
}
}
