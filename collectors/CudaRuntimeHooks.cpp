#include "collectors/CudaRuntimeHooks.h"

#include <dlfcn.h>

#include <cstdint>

#include "collectors/ModuleName.h"
#include "collectors/TorchBridgeLoader.h"
#include "collectors/Tracker.h"
#include "core/Protocol.h"

namespace memtool::collectors {
namespace {

// The runtime's types, without its headers: cudaError_t is an enum (0 is
// cudaSuccess), streams are opaque pointers.
using CudaError = int;
using Stream = void*;

template <typename Fn>
Fn real(const char* name) {
    // The collector defines none of these names, so the first definition is the runtime's.
    return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// The calling thread's current device, where cudaMalloc & co. allocate.
uint8_t currentDevice() {
    using Fn = CudaError (*)(int*);
    static Fn getDevice = real<Fn>("cudaGetDevice");
    int ordinal = -1;
    if (getDevice && getDevice(&ordinal) != 0) ordinal = -1;
    return core::cudaDeviceOrFirst(ordinal);
}

// Before a device allocation: the torch bridge attaches at the first one, so that
// the caching allocator's segment for it is already traced.
void beforeDeviceAlloc() { tryAttachTorchBridge(); }

enum class Where { CurrentDevice, PinnedHost };

void recordAlloc(CudaError rc, void** out, size_t size, Where where) {
    Tracker& t = Tracker::instance();
    if (rc == 0 && out && *out && t.active())
        t.recordAlloc(where == Where::PinnedHost ? core::kDevicePinnedHost : currentDevice(),
                      reinterpret_cast<uint64_t>(*out), size);
}

// Before the memory is released (see core/PROTOCOL.md, Frees).
void recordFree(void* p) {
    Tracker& t = Tracker::instance();
    if (p && t.active()) t.recordFree(reinterpret_cast<uint64_t>(p));
}

CudaError hookMalloc(void** out, size_t size) {
    using Fn = CudaError (*)(void**, size_t);
    static Fn fn = real<Fn>("cudaMalloc");
    beforeDeviceAlloc();
    CudaError rc = fn(out, size);
    recordAlloc(rc, out, size, Where::CurrentDevice);
    return rc;
}

CudaError hookMallocAsync(void** out, size_t size, Stream stream) {
    using Fn = CudaError (*)(void**, size_t, Stream);
    static Fn fn = real<Fn>("cudaMallocAsync");
    beforeDeviceAlloc();
    CudaError rc = fn(out, size, stream);
    recordAlloc(rc, out, size, Where::CurrentDevice);
    return rc;
}

CudaError hookMallocManaged(void** out, size_t size, unsigned flags) {
    using Fn = CudaError (*)(void**, size_t, unsigned);
    static Fn fn = real<Fn>("cudaMallocManaged");
    CudaError rc = fn(out, size, flags);
    recordAlloc(rc, out, size, Where::CurrentDevice);
    return rc;
}

CudaError hookMallocPitch(void** out, size_t* pitch, size_t width, size_t height) {
    using Fn = CudaError (*)(void**, size_t*, size_t, size_t);
    static Fn fn = real<Fn>("cudaMallocPitch");
    CudaError rc = fn(out, pitch, width, height);
    if (rc == 0 && pitch) recordAlloc(rc, out, *pitch * height, Where::CurrentDevice);
    return rc;
}

CudaError hookFree(void* p) {
    using Fn = CudaError (*)(void*);
    static Fn fn = real<Fn>("cudaFree");
    recordFree(p);
    return fn(p);
}

CudaError hookFreeAsync(void* p, Stream stream) {
    using Fn = CudaError (*)(void*, Stream);
    static Fn fn = real<Fn>("cudaFreeAsync");
    recordFree(p);
    return fn(p, stream);
}

CudaError hookMallocHost(void** out, size_t size) {
    using Fn = CudaError (*)(void**, size_t);
    static Fn fn = real<Fn>("cudaMallocHost");
    CudaError rc = fn(out, size);
    recordAlloc(rc, out, size, Where::PinnedHost);
    return rc;
}

CudaError hookHostAlloc(void** out, size_t size, unsigned flags) {
    using Fn = CudaError (*)(void**, size_t, unsigned);
    static Fn fn = real<Fn>("cudaHostAlloc");
    CudaError rc = fn(out, size, flags);
    recordAlloc(rc, out, size, Where::PinnedHost);
    return rc;
}

CudaError hookFreeHost(void* p) {
    using Fn = CudaError (*)(void*);
    static Fn fn = real<Fn>("cudaFreeHost");
    recordFree(p);
    return fn(p);
}

const GotHook kHooks[] = {
    {"cudaMalloc", reinterpret_cast<void*>(&hookMalloc)},
    {"cudaMallocAsync", reinterpret_cast<void*>(&hookMallocAsync)},
    {"cudaMallocManaged", reinterpret_cast<void*>(&hookMallocManaged)},
    {"cudaMallocPitch", reinterpret_cast<void*>(&hookMallocPitch)},
    {"cudaFree", reinterpret_cast<void*>(&hookFree)},
    {"cudaFreeAsync", reinterpret_cast<void*>(&hookFreeAsync)},
    {"cudaMallocHost", reinterpret_cast<void*>(&hookMallocHost)},
    {"cudaHostAlloc", reinterpret_cast<void*>(&hookHostAlloc)},
    {"cudaFreeHost", reinterpret_cast<void*>(&hookFreeHost)},
};

}  // namespace

const GotHook* cudaRuntimeHooks(size_t* count) {
    *count = sizeof kHooks / sizeof kHooks[0];
    return kHooks;
}

bool skipForCudaRuntimeHooks(const char* path) {
    return fileNameStartsWith(path, "libcudart") || fileNameStartsWith(path, "libmemtool_");
}

}  // namespace memtool::collectors
