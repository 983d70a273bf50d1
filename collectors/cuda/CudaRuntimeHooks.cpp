#include "collectors/cuda/CudaRuntimeHooks.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "collectors/control/Regions.h"
#include "collectors/cuda/CudaRuntimeDecls.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/ModuleName.h"
#include "collectors/engine/Warn.h"
#include "collectors/stacks/NativeUnwinder.h"
#include "collectors/torch/TorchBridgeLoader.h"
#include "core/Protocol.h"

namespace memtool::collectors {
namespace {

// What the hooks record into and serve from (bindCudaRuntimeHooks, before any
// slot is patched). Plain data: the library constructor that sets them runs
// before this file's dynamic initializers would.
Engine* gEngine = nullptr;
control::Regions* gRegions = nullptr;
// The runtime-hook route records CUDA memory (its hooks serve regions either way).
std::atomic<bool> gRecording{false};

// `text` on stderr and as a warning in the trace, the first time `said` is seen
// false (once per process for each flag).
void warnOnce(std::atomic<bool>& said, const char* text) {
    if (said.exchange(true)) return;
    warn(text);
    gEngine->note(core::kNoteWarning, text);
}

// The runtime function a hook stands in for: the global scope's, or where the
// program loaded libcudart into a local scope only (an extension module that
// links it, loaded RTLD_LOCAL as Python loads them, with no torch making the
// runtime global), the loaded libcudart's own. The handle is kept: the hooks call
// into that library for as long as the process runs.
void* runtimeOriginal(const char* symbol) {
    if (void* global = findOriginal(symbol)) return global;
    return findInLoaded("libcudart.so", symbol);
}
#define RUNTIME_ORIGINAL(function) \
    (reinterpret_cast<decltype(&::function)>(runtimeOriginal(#function)))

// The calling thread's current device, where cudaMalloc & co. allocate.
uint8_t currentDevice() {
    static auto getDevice = RUNTIME_ORIGINAL(cudaGetDevice);
    int ordinal = -1;
    if (getDevice && getDevice(&ordinal) != 0) ordinal = -1;
    return core::cudaDeviceOrFirst(ordinal);
}

// Before a device allocation: the torch bridge attaches at the first one, so that
// the caching allocator's segment for it is already traced.
void beforeDeviceAlloc() { tryAttachTorchBridge(); }

// These hooks serve two routes: recording (when CUDA memory is recorded through
// the runtime, not CUPTI) and pausable regions (libc10_cuda's cudaMalloc/cudaFree
// are always hooked, so that a thread inside memtool.region gets VMM memory).
// Recording happens only on the first route: with CUPTI, the driver calls are
// what is recorded.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorMemoryAllocation = 2;

void recordDevice(int rc, void** out, size_t size) {
    if (rc == 0 && out && *out && cudaRuntimeRecording())
        gEngine->alloc(currentDevice(), reinterpret_cast<uint64_t>(*out), size);
    else if (rc == kCudaErrorMemoryAllocation && cudaRuntimeRecording())
        gEngine->oom(currentDevice(), size, core::OomSource::Allocator);
}

void recordPinned(int rc, void** out, size_t size) {
    if (rc == 0 && out && *out && cudaRuntimeRecording())
        gEngine->alloc(core::kDevicePinnedHost, reinterpret_cast<uint64_t>(*out), size);
    else if (rc == kCudaErrorMemoryAllocation && cudaRuntimeRecording())
        gEngine->oom(core::kDevicePinnedHost, size, core::OomSource::Allocator);
}

// Before the memory is released (see core/PROTOCOL.md, Frees).
void recordFree(void* p) {
    if (p && cudaRuntimeRecording()) gEngine->free(reinterpret_cast<uint64_t>(p));
}

// Device memory for a thread inside a region: VMM memory a pause can release.
// The caching allocator (or the program) sees an ordinary cudaMalloc result.
int serveRegion(void** out, size_t size) {
    control::Failure why;
    void* p = gRegions->serve(currentDevice(), size, 256, why);
    if (!p) {
        gEngine->oom(currentDevice(), size, core::OomSource::Allocator);
        return kCudaErrorMemoryAllocation;
    }
    *out = p;
    return kCudaSuccess;
}

bool releaseRegion(void* p) { return p && gRegions->release(reinterpret_cast<uint64_t>(p)); }

// Whether `stream` is being captured into a CUDA graph. Its stream-ordered
// allocations and frees are then the graph's, done when the graph runs, and it
// must see no synchronizing call (releasing region memory synchronizes).
bool capturing(void* stream) {
    static auto isCapturing = RUNTIME_ORIGINAL(cudaStreamIsCapturing);
    int status = 0;
    return isCapturing && isCapturing(stream, &status) == kCudaSuccess && status != 0;
}

int hookMalloc(void** out, size_t size) {
    static auto real = RUNTIME_ORIGINAL(cudaMalloc);
    beforeDeviceAlloc();
    if (gRegions->threadInRegion()) return serveRegion(out, size);
    int rc = real(out, size);
    recordDevice(rc, out, size);
    return rc;
}

int hookMallocAsync(void** out, size_t size, void* stream) {
    static auto real = RUNTIME_ORIGINAL(cudaMallocAsync);
    static std::atomic<bool> said{false};
    beforeDeviceAlloc();
    if (gRegions->threadInRegion()) {
        if (!capturing(stream)) return serveRegion(out, size);
        warnOnce(said,
                 "cudaMallocAsync inside CUDA graph capture allocates the graph's memory: it is "
                 "not pausable, inside a region too");
    }
    int rc = real(out, size, stream);
    recordDevice(rc, out, size);
    return rc;
}

int hookMallocManaged(void** out, size_t size, unsigned flags) {
    static auto real = RUNTIME_ORIGINAL(cudaMallocManaged);
    int rc = real(out, size, flags);
    recordDevice(rc, out, size);
    return rc;
}

int hookMallocPitch(void** out, size_t* pitch, size_t width, size_t height) {
    static auto real = RUNTIME_ORIGINAL(cudaMallocPitch);
    int rc = real(out, pitch, width, height);
    if (rc == 0 && pitch) recordDevice(rc, out, *pitch * height);
    return rc;
}

int hookFree(void* p) {
    static auto real = RUNTIME_ORIGINAL(cudaFree);
    if (releaseRegion(p)) return kCudaSuccess;
    recordFree(p);
    return real(p);
}

int hookFreeAsync(void* p, void* stream) {
    static auto real = RUNTIME_ORIGINAL(cudaFreeAsync);
    static std::atomic<bool> said{false};
    if (p && gRegions->holds(reinterpret_cast<uint64_t>(p))) {
        if (!capturing(stream)) {
            releaseRegion(p);  // once the device is idle (the backend synchronizes)
            return kCudaSuccess;
        }
        // The graph frees it when it runs, maybe many times, maybe never: the
        // memory stays the region's.
        warnOnce(said,
                 "pausable memory freed by cudaFreeAsync inside CUDA graph capture stays "
                 "allocated (the graph may use it when it runs) until the process ends");
        return kCudaSuccess;
    }
    recordFree(p);
    return real(p, stream);
}

int hookMallocHost(void** out, size_t size) {
    static auto real = RUNTIME_ORIGINAL(cudaMallocHost);
    int rc = real(out, size);
    recordPinned(rc, out, size);
    return rc;
}

int hookHostAlloc(void** out, size_t size, unsigned flags) {
    static auto real = RUNTIME_ORIGINAL(cudaHostAlloc);
    int rc = real(out, size, flags);
    recordPinned(rc, out, size);
    return rc;
}

int hookFreeHost(void* p) {
    static auto real = RUNTIME_ORIGINAL(cudaFreeHost);
    recordFree(p);
    return real(p);
}

const GotHook kHooks[] = {
    MEMTOOL_GOT_HOOK(cudaMalloc, &hookMalloc),
    MEMTOOL_GOT_HOOK(cudaMallocAsync, &hookMallocAsync),
    MEMTOOL_GOT_HOOK(cudaMallocManaged, &hookMallocManaged),
    MEMTOOL_GOT_HOOK(cudaMallocPitch, &hookMallocPitch),
    MEMTOOL_GOT_HOOK(cudaFree, &hookFree),
    MEMTOOL_GOT_HOOK(cudaFreeAsync, &hookFreeAsync),
    MEMTOOL_GOT_HOOK(cudaMallocHost, &hookMallocHost),
    MEMTOOL_GOT_HOOK(cudaHostAlloc, &hookHostAlloc),
    MEMTOOL_GOT_HOOK(cudaFreeHost, &hookFreeHost),
};

// What a region needs in libc10_cuda.so: its device allocations and frees.
const GotHook kRegionHooks[] = {
    MEMTOOL_GOT_HOOK(cudaMalloc, &hookMalloc),
    MEMTOOL_GOT_HOOK(cudaMallocAsync, &hookMallocAsync),
    MEMTOOL_GOT_HOOK(cudaFree, &hookFree),
    MEMTOOL_GOT_HOOK(cudaFreeAsync, &hookFreeAsync),
};

}  // namespace

void bindCudaRuntimeHooks(Engine& engine, control::Regions& regions) {
    gEngine = &engine;
    gRegions = &regions;
}

void setCudaRuntimeRecording(bool on) { gRecording = on; }

bool cudaRuntimeRecording() { return gRecording.load(std::memory_order_relaxed); }

void regionMemoryReferenced(uint64_t address) {
    if (OwnDeviceCalls::active) return;  // the region backend's own calls
    static std::atomic<bool> said{false};
    char tag[core::kMaxTagBytes + 1];
    if (said.load(std::memory_order_relaxed) || !gRegions->tagOf(address, tag, sizeof tag)) return;
    char text[640];
    std::snprintf(text, sizeof text,
                  "region '%s' memory at 0x%llx got a reference from outside memtool "
                  "(cuMemRetainAllocationHandle), as NCCL takes one when it registers a buffer "
                  "(ncclCommRegister, or a collective captured in a CUDA graph): a pause gives "
                  "that memory back and a resume maps new memory at the same address, which the "
                  "registration does not follow; keep buffers NCCL registers out of regions, or "
                  "set NCCL_GRAPH_REGISTER=0",
                  tag, static_cast<unsigned long long>(address));
    warnOnce(said, text);
}

const GotHook* cudaRuntimeHooks(size_t* count) {
    *count = sizeof kHooks / sizeof kHooks[0];
    return kHooks;
}

void* pluggableMalloc(size_t size, int device) {
    static auto realMalloc = RUNTIME_ORIGINAL(cudaMalloc);
    if (gRegions->threadInRegion()) {
        control::Failure why;
        return gRegions->serve(core::cudaDeviceOrFirst(device), size, 256, why);
    }
    void* p = nullptr;
    return realMalloc && realMalloc(&p, size) == kCudaSuccess ? p : nullptr;
}

void pluggableFree(void* p) {
    static auto realFree = RUNTIME_ORIGINAL(cudaFree);
    if (!releaseRegion(p) && p && realFree) realFree(p);
}

const GotHook* cudaRegionHooks(size_t* count) {
    *count = sizeof kRegionHooks / sizeof kRegionHooks[0];
    return kRegionHooks;
}

bool skipForCudaRuntimeHooks(const char* path) {
    return fileNameStartsWith(path, "libcudart") || fileNameStartsWith(path, "libmemtool_");
}

}  // namespace memtool::collectors
