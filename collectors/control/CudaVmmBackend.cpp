#include "collectors/control/CudaVmmBackend.h"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collectors/control/AlignedMapping.h"
#include "collectors/cuda/ChecksumKernelPtx.h"
#include "collectors/engine/RecursionGuard.h"
#include "collectors/stacks/NativeUnwinder.h"
#include "core/Protocol.h"

namespace memtool::collectors::control {

// cuda.h maps names to their current versions (cuMemcpyDtoHAsync is
// cuMemcpyDtoHAsync_v2); the symbol looked up must be the mapped one.
#define MEMTOOL_CU_STRINGIFY2(x) #x
#define MEMTOOL_CU_STRINGIFY(x) MEMTOOL_CU_STRINGIFY2(x)
#define MEMTOOL_CU_FN(name) decltype(&name) name##_ = nullptr

struct CudaVmmBackend::Api {
    MEMTOOL_CU_FN(cuInit);
    MEMTOOL_CU_FN(cuGetErrorString);
    MEMTOOL_CU_FN(cuDeviceGet);
    MEMTOOL_CU_FN(cuDeviceGetCount);
    MEMTOOL_CU_FN(cuDeviceCanAccessPeer);
    MEMTOOL_CU_FN(cuDevicePrimaryCtxRetain);
    MEMTOOL_CU_FN(cuCtxPushCurrent);
    MEMTOOL_CU_FN(cuCtxPopCurrent);
    MEMTOOL_CU_FN(cuCtxSynchronize);
    MEMTOOL_CU_FN(cuStreamCreate);
    MEMTOOL_CU_FN(cuStreamSynchronize);
    MEMTOOL_CU_FN(cuMemGetAllocationGranularity);
    MEMTOOL_CU_FN(cuMemAddressReserve);
    MEMTOOL_CU_FN(cuMemAddressFree);
    MEMTOOL_CU_FN(cuMemCreate);
    MEMTOOL_CU_FN(cuMemRelease);
    MEMTOOL_CU_FN(cuMemMap);
    MEMTOOL_CU_FN(cuMemUnmap);
    MEMTOOL_CU_FN(cuMemSetAccess);
    MEMTOOL_CU_FN(cuMemcpyDtoHAsync);
    MEMTOOL_CU_FN(cuMemcpyHtoDAsync);
    MEMTOOL_CU_FN(cuMemHostAlloc);
    MEMTOOL_CU_FN(cuMemFreeHost);
    MEMTOOL_CU_FN(cuMemHostRegister);
    MEMTOOL_CU_FN(cuMemHostUnregister);
    MEMTOOL_CU_FN(cuMemGetInfo);
    // The checksum kernel's (verified pauses), resolved apart: a driver without
    // them still serves regions.
    MEMTOOL_CU_FN(cuModuleLoadData);
    MEMTOOL_CU_FN(cuModuleGetFunction);
    MEMTOOL_CU_FN(cuLaunchKernel);
    MEMTOOL_CU_FN(cuMemAlloc);
};

namespace {

#define MEMTOOL_CU_RESOLVE(lib, api, name)                  \
    (api.name##_ = reinterpret_cast<decltype(api.name##_)>( \
         dlsym(lib, MEMTOOL_CU_STRINGIFY(name)))) != nullptr

CudaVmmBackend::Api gApi;  // plain pointers: constant-initialized, never destroyed

bool check(CUresult rc, const char* what, Failure& why) {
    if (rc == CUDA_SUCCESS) return true;
    const char* text = nullptr;
    if (gApi.cuGetErrorString_) gApi.cuGetErrorString_(rc, &text);
    char code[32];
    std::snprintf(code, sizeof code, " (CUresult %d)", static_cast<int>(rc));
    why.set(what, ": ", text ? text : "unknown error", code);
    return false;
}

CUmemAllocationProp deviceProp(int ordinal) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    return prop;
}

}  // namespace

// Pushes the device's primary context for the scope: the control thread (and a
// hook on a thread that has none yet) must not depend on what is current.
class CudaVmmBackend::DeviceScope {
public:
    DeviceScope(CudaVmmBackend& b, int ordinal, Failure& why) : api_(*b.api_) {
        ok_ = b.enter(ordinal, why) &&
              check(api_.cuCtxPushCurrent_(static_cast<CUcontext>(b.contexts_[ordinal])),
                    "cuCtxPushCurrent", why);
    }
    ~DeviceScope() {
        CUcontext ignored;
        if (ok_) api_.cuCtxPopCurrent_(&ignored);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
    bool ok() const { return ok_; }

private:
    Api& api_;
    bool ok_ = false;
};

// The device's context current and the backend's stream for it: what a copy needs.
struct CudaVmmBackend::CopyScope {
    DeviceScope device;
    CUstream stream = nullptr;
    bool ok = false;
    CopyScope(CudaVmmBackend& b, uint8_t code, Failure& why)
        : device(b, core::cudaOrdinal(code), why) {
        void* s = nullptr;
        ok = device.ok() && b.stream(core::cudaOrdinal(code), &s, why);
        stream = static_cast<CUstream>(s);
    }
};

bool CudaVmmBackend::load(Failure& why) {
    if (api_) return true;
    const char* override = std::getenv("MEMTOOL_CUDA_DRIVER");  // tests: the fake driver
    const char* path = override && *override ? override : "libcuda.so.1";
    void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = realDlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        why.set("the CUDA driver (", path, ") is not loaded in this process");
        return false;
    }
    Api& a = gApi;
    const bool ok =
        MEMTOOL_CU_RESOLVE(lib, a, cuInit) && MEMTOOL_CU_RESOLVE(lib, a, cuGetErrorString) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuDeviceGet) && MEMTOOL_CU_RESOLVE(lib, a, cuDeviceGetCount) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuDeviceCanAccessPeer) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuDevicePrimaryCtxRetain) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuCtxPushCurrent) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuCtxPopCurrent) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuCtxSynchronize) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuStreamCreate) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuStreamSynchronize) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemGetAllocationGranularity) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemAddressReserve) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemAddressFree) && MEMTOOL_CU_RESOLVE(lib, a, cuMemCreate) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemRelease) && MEMTOOL_CU_RESOLVE(lib, a, cuMemMap) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemUnmap) && MEMTOOL_CU_RESOLVE(lib, a, cuMemSetAccess) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemcpyDtoHAsync) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemcpyHtoDAsync) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemHostAlloc) && MEMTOOL_CU_RESOLVE(lib, a, cuMemFreeHost) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemHostRegister) &&
        MEMTOOL_CU_RESOLVE(lib, a, cuMemHostUnregister) && MEMTOOL_CU_RESOLVE(lib, a, cuMemGetInfo);
    if (!ok) {
        why.set("the CUDA driver at ", path,
                " lacks the virtual-memory API (CUDA 10.2 or later is needed)");
        return false;
    }
    kernelApi_ = MEMTOOL_CU_RESOLVE(lib, a, cuModuleLoadData) &&
                 MEMTOOL_CU_RESOLVE(lib, a, cuModuleGetFunction) &&
                 MEMTOOL_CU_RESOLVE(lib, a, cuLaunchKernel) &&
                 MEMTOOL_CU_RESOLVE(lib, a, cuMemAlloc);
    if (!check(a.cuInit_(0), "cuInit", why)) return false;
    api_ = &a;
    return true;
}

bool CudaVmmBackend::enter(int ordinal, Failure& why) {
    if (!api_) {
        why.set("the CUDA driver is not loaded");
        return false;
    }
    if (ordinal < 0 || ordinal >= kMaxDevices) {
        why.set("a CUDA device ordinal out of range");
        return false;
    }
    LockGuard lock(mu_);
    if (contexts_[ordinal]) return true;
    CUdevice dev;
    CUcontext ctx;
    if (!check(api_->cuDeviceGet_(&dev, ordinal), "cuDeviceGet", why) ||
        !check(api_->cuDevicePrimaryCtxRetain_(&ctx, dev), "cuDevicePrimaryCtxRetain", why))
        return false;
    contexts_[ordinal] = ctx;
    return true;
}

uint64_t CudaVmmBackend::granularity(uint8_t device) {
    const int ordinal = core::cudaOrdinal(device);
    if (ordinal < 0 || ordinal >= kMaxDevices || !api_) return 2ull << 20;
    {
        LockGuard lock(mu_);
        if (granularity_[ordinal]) return granularity_[ordinal];
    }
    CUmemAllocationProp prop = deviceProp(ordinal);
    size_t g = 0;
    if (api_->cuMemGetAllocationGranularity_(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS ||
        g == 0)
        g = 2ull << 20;  // what every current GPU reports
    LockGuard lock(mu_);
    granularity_[ordinal] = g;
    return g;
}

bool CudaVmmBackend::reserve(uint8_t device, uint64_t bytes, uint64_t alignment, uint64_t* address,
                             Failure& why) {
    DeviceScope scope(*this, core::cudaOrdinal(device), why);
    if (!scope.ok()) return false;
    CUdeviceptr ptr = 0;
    const uint64_t g = granularity(device);
    if (!check(api_->cuMemAddressReserve_(&ptr, bytes, alignment > g ? alignment : g, 0, 0),
               "cuMemAddressReserve", why))
        return false;
    *address = static_cast<uint64_t>(ptr);
    return true;
}

bool CudaVmmBackend::map(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) {
    const int ordinal = core::cudaOrdinal(device);
    DeviceScope scope(*this, ordinal, why);
    if (!scope.ok()) return false;
    OwnDeviceCalls ours;  // the region's allocation is recorded itself
    CUmemAllocationProp prop = deviceProp(ordinal);
    CUmemGenericAllocationHandle handle = 0;
    if (!check(api_->cuMemCreate_(&handle, bytes, &prop, 0), "cuMemCreate", why)) return false;
    // The device's own, and every device that can reach it (peers): cudaMalloc
    // memory is theirs once the program enables peer access, VMM memory only
    // through access granted to them here.
    CUmemAccessDesc access[kMaxDevices] = {};
    const uint64_t devices = (uint64_t{1} << ordinal) | peersOf(ordinal);
    size_t n = 0;
    for (int d = 0; d < kMaxDevices; ++d) {
        if (!(devices >> d & 1)) continue;
        access[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[n].location.id = d;
        access[n++].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    if (!check(api_->cuMemMap_(address, bytes, 0, handle, 0), "cuMemMap", why)) {
        api_->cuMemRelease_(handle);
        return false;
    }
    if (!check(api_->cuMemSetAccess_(address, bytes, access, n), "cuMemSetAccess", why)) {
        api_->cuMemUnmap_(address, bytes);
        api_->cuMemRelease_(handle);
        return false;
    }
    LockGuard lock(mu_);
    if (!handles_.insert(address, static_cast<uint64_t>(handle))) {
        api_->cuMemUnmap_(address, bytes);
        api_->cuMemRelease_(handle);
        why.set("out of memory for the table of mappings");
        return false;
    }
    return true;
}

uint64_t CudaVmmBackend::peersOf(int ordinal) {
    {
        LockGuard lock(mu_);
        if (peersKnown_ >> ordinal & 1) return peers_[ordinal];
    }
    int count = 0;
    uint64_t peers = 0;
    CUdevice owner;
    if (api_->cuDeviceGetCount_(&count) == CUDA_SUCCESS &&
        api_->cuDeviceGet_(&owner, ordinal) == CUDA_SUCCESS)
        for (int d = 0; d < count && d < kMaxDevices; ++d) {
            CUdevice other;
            int can = 0;
            if (d != ordinal && api_->cuDeviceGet_(&other, d) == CUDA_SUCCESS &&
                api_->cuDeviceCanAccessPeer_(&can, other, owner) == CUDA_SUCCESS && can)
                peers |= uint64_t{1} << d;
        }
    LockGuard lock(mu_);
    peers_[ordinal] = peers;
    peersKnown_ |= uint64_t{1} << ordinal;
    return peers;
}

bool CudaVmmBackend::unmap(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) {
    uint64_t handle = 0;
    {
        LockGuard lock(mu_);
        if (!handles_.erase(address, &handle)) return true;  // not mapped
    }
    DeviceScope scope(*this, core::cudaOrdinal(device), why);
    if (!scope.ok()) return false;
    OwnDeviceCalls ours;
    return check(api_->cuMemUnmap_(address, bytes), "cuMemUnmap", why) &&
           check(api_->cuMemRelease_(static_cast<CUmemGenericAllocationHandle>(handle)),
                 "cuMemRelease", why);
}

void CudaVmmBackend::release(uint8_t device, uint64_t address, uint64_t bytes) {
    Failure ignored;
    DeviceScope scope(*this, core::cudaOrdinal(device), ignored);
    if (!scope.ok()) return;
    // A free (cudaFree, cudaFreeAsync, the caching allocator emptying its cache)
    // may come while kernels still use the memory: let them finish first.
    api_->cuCtxSynchronize_();
    unmap(device, address, bytes, ignored);
    api_->cuMemAddressFree_(address, bytes);
}

bool CudaVmmBackend::stream(int ordinal, void** out, Failure& why) {
    LockGuard lock(mu_);
    if (!streams_[ordinal]) {
        CUstream s = nullptr;
        if (!check(api_->cuStreamCreate_(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", why))
            return false;
        streams_[ordinal] = s;
    }
    *out = streams_[ordinal];
    return true;
}

bool CudaVmmBackend::synchronize(uint8_t device, Failure& why) {
    DeviceScope scope(*this, core::cudaOrdinal(device), why);
    return scope.ok() && check(api_->cuCtxSynchronize_(), "cuCtxSynchronize", why);
}

// The checksum kernel in `ordinal`'s context (current), and its result word,
// made at the first verified pause on the device and kept.
bool CudaVmmBackend::checksumKernel(int ordinal, Failure& why) {
    LockGuard lock(mu_);
    if (kernels_[ordinal]) return true;
    if (!kernelApi_) {
        why.set("the CUDA driver lacks cuModuleLoadData, cuLaunchKernel or cuMemAlloc");
        return false;
    }
    OwnDeviceCalls ours;  // the result word is memtool's, not the program's
    CUmodule module = nullptr;
    CUfunction kernel = nullptr;
    CUdeviceptr result = 0;
    if (!check(api_->cuModuleLoadData_(&module, kChecksumKernelPtx),
               "cuModuleLoadData (the checksum kernel)", why) ||
        !check(api_->cuModuleGetFunction_(&kernel, module, "memtool_checksum"),
               "cuModuleGetFunction (memtool_checksum)", why) ||
        !check(api_->cuMemAlloc_(&result, sizeof(uint64_t)), "cuMemAlloc (checksum)", why))
        return false;
    checksumSums_[ordinal] = result;
    kernels_[ordinal] = kernel;
    return true;
}

bool CudaVmmBackend::checksum(uint8_t device, uint64_t address, uint64_t bytes, uint64_t* sum,
                              Failure& why) {
    const int ordinal = core::cudaOrdinal(device);
    CopyScope scope(*this, device, why);
    if (!scope.ok || !checksumKernel(ordinal, why)) return false;
    // One launch at a time per device: the result word is the device's.
    LockGuard lock(checksumMu_);
    CUdeviceptr data = address, result = checksumSums_[ordinal];
    unsigned long long words = bytes / 8;
    void* params[] = {&data, &words, &result};
    // Enough blocks to fill any current GPU; each thread strides over the rest.
    constexpr unsigned kThreads = 256, kMaxBlocks = 2048;
    const unsigned long long wanted = (words + kThreads - 1) / kThreads;
    const unsigned blocks =
        static_cast<unsigned>(wanted < kMaxBlocks ? (wanted ? wanted : 1) : kMaxBlocks);
    static const uint64_t zero = 0;
    uint64_t out = 0;
    OwnDeviceCalls ours;
    if (!check(api_->cuMemcpyHtoDAsync_(result, &zero, sizeof zero, scope.stream),
               "cuMemcpyHtoDAsync (checksum)", why) ||
        !check(api_->cuLaunchKernel_(static_cast<CUfunction>(kernels_[ordinal]), blocks, 1, 1,
                                     kThreads, 1, 1, 0, scope.stream, params, nullptr),
               "cuLaunchKernel (memtool_checksum)", why) ||
        !check(api_->cuMemcpyDtoHAsync_(&out, result, sizeof out, scope.stream),
               "cuMemcpyDtoHAsync (checksum)", why) ||
        !check(api_->cuStreamSynchronize_(scope.stream), "cuStreamSynchronize (checksum)", why))
        return false;
    *sum = out;
    return true;
}

bool CudaVmmBackend::staging(Failure& why) {
    for (void*& buffer : staging_) {
        if (buffer) continue;
        OwnDeviceCalls ours;
        if (!check(api_->cuMemHostAlloc_(&buffer, chunkBytes_, CU_MEMHOSTALLOC_PORTABLE),
                   "cuMemHostAlloc (staging)", why))
            return false;
    }
    return true;
}

bool CudaVmmBackend::copyOut(uint8_t device, uint64_t address, uint64_t bytes, Backup& to,
                             uint64_t offset, Failure& why) {
    CopyScope scope(*this, device, why);
    if (!scope.ok) return false;
    CUstream cs = scope.stream;
    if (void* view = to.directView(offset, bytes)) {  // pinned host backup: one copy, straight in
        return check(api_->cuMemcpyDtoHAsync_(view, address, bytes, cs), "cuMemcpyDtoHAsync",
                     why) &&
               check(api_->cuStreamSynchronize_(cs), "cuStreamSynchronize", why);
    }
    // To a file: the device copy of chunk k+1 runs while chunk k is written.
    LockGuard lock(stagingMu_);
    if (!staging(why)) return false;
    uint64_t pending = 0;  // bytes of the chunk in staging_[(k - 1) % 2] still to write
    uint64_t pendingOffset = 0;
    for (uint64_t done = 0, k = 0; done < bytes || pending; ++k) {
        const uint64_t n = bytes - done < chunkBytes_ ? bytes - done : chunkBytes_;
        if (n && !check(api_->cuMemcpyDtoHAsync_(staging_[k % 2], address + done, n, cs),
                        "cuMemcpyDtoHAsync", why))
            return false;
        if (pending && !to.write(pendingOffset, staging_[(k + 1) % 2], pending, why)) return false;
        if (n && !check(api_->cuStreamSynchronize_(cs), "cuStreamSynchronize", why)) return false;
        pending = n;
        pendingOffset = offset + done;
        done += n;
    }
    return true;
}

bool CudaVmmBackend::copyIn(uint8_t device, uint64_t address, uint64_t bytes, Backup& from,
                            uint64_t offset, Failure& why) {
    CopyScope scope(*this, device, why);
    if (!scope.ok) return false;
    CUstream cs = scope.stream;
    if (void* view = from.directView(offset, bytes)) {
        return check(api_->cuMemcpyHtoDAsync_(address, view, bytes, cs), "cuMemcpyHtoDAsync",
                     why) &&
               check(api_->cuStreamSynchronize_(cs), "cuStreamSynchronize", why);
    }
    // From a file: chunk k+1 is read while chunk k goes to the device.
    LockGuard lock(stagingMu_);
    if (!staging(why)) return false;
    for (uint64_t done = 0, k = 0; done < bytes; ++k) {
        const uint64_t n = bytes - done < chunkBytes_ ? bytes - done : chunkBytes_;
        if (!from.read(offset + done, staging_[k % 2], n, why)) return false;
        // The copy issued from the other buffer one chunk ago must be finished
        // before that buffer is read into again: synchronize after each issue.
        if (!check(api_->cuStreamSynchronize_(cs), "cuStreamSynchronize", why) ||
            !check(api_->cuMemcpyHtoDAsync_(address + done, staging_[k % 2], n, cs),
                   "cuMemcpyHtoDAsync", why))
            return false;
        done += n;
    }
    return check(api_->cuStreamSynchronize_(cs), "cuStreamSynchronize", why);
}

void* CudaVmmBackend::allocateHost(uint8_t device, uint64_t* bytes, Failure& why) {
    if (!api_) {
        why.set("the CUDA driver is not loaded");
        return nullptr;
    }
    {
        // The smallest pooled buffer that fits: pauses of the same regions repeat.
        LockGuard lock(mu_);
        int best = -1;
        for (int i = 0; i < kPoolSize; ++i)
            if (pool_[i].memory && pool_[i].bytes >= *bytes &&
                (best < 0 || pool_[i].bytes < pool_[best].bytes))
                best = i;
        if (best >= 0) {
            void* p = pool_[best].memory;
            *bytes = pool_[best].bytes;
            pool_[best].memory = nullptr;
            return p;
        }
    }
    // Pinning is most of a first pause's time. Anonymous memory the kernel may back
    // with 2 MiB pages (MADV_HUGEPAGE), then registered: on an H100's host 1 GiB
    // pinned so in 0.22-0.24 s, where cuMemHostAlloc took 0.50-0.57 s (each cost
    // the device the same 2 MiB). Where huge pages are off it is 4 KiB pages, as
    // cuMemHostAlloc's. Aligned to 2 MiB, so that every page can be a huge one.
    constexpr uint64_t kHugePage = 2ull << 20;
    const uint64_t size = (*bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = mapAligned(size, kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (p == MAP_FAILED) {
        why.set("cannot map host memory for the backup: ", std::strerror(errno));
        return nullptr;
    }
    madvise(p, size, MADV_HUGEPAGE);  // a hint: refused, the pages are small ones
    // The driver pins in the calling thread's context, which the control thread
    // (memtool ctl's pauses, a yield) has none of: the device's. Portable, it stays
    // pinned for a region of another device that reuses it.
    DeviceScope scope(*this, core::cudaOrdinal(device), why);
    OwnDeviceCalls ours;
    if (!scope.ok() || !check(api_->cuMemHostRegister_(p, size, CU_MEMHOSTREGISTER_PORTABLE),
                              "cuMemHostRegister (host backup)", why)) {
        munmap(p, size);
        return nullptr;
    }
    *bytes = size;
    return p;
}

bool CudaVmmBackend::deviceMemory(uint8_t device, uint64_t* free, uint64_t* total) {
    Failure why;
    DeviceScope scope(*this, core::cudaOrdinal(device), why);
    size_t f = 0, t = 0;
    if (!scope.ok() || api_->cuMemGetInfo_(&f, &t) != CUDA_SUCCESS) return false;
    *free = f;
    *total = t;
    return true;
}

void CudaVmmBackend::freeHost(uint8_t device, void* p, uint64_t bytes) {
    if (!p) return;
    {
        LockGuard lock(mu_);
        if (pooledLocked() + bytes <= poolLimit_)
            for (PooledBuffer& b : pool_) {
                if (b.memory) continue;
                b = PooledBuffer{p, bytes, device};
                return;
            }
    }
    freePinned(device, p, bytes);
}

uint64_t CudaVmmBackend::pooledLocked() const {
    uint64_t bytes = 0;
    for (const PooledBuffer& b : pool_)
        if (b.memory) bytes += b.bytes;
    return bytes;
}

uint64_t CudaVmmBackend::hostPoolBytes() {
    LockGuard lock(mu_);
    return pooledLocked();
}

uint64_t CudaVmmBackend::hostPoolLimit() {
    LockGuard lock(mu_);
    return poolLimit_;
}

void CudaVmmBackend::setHostPoolLimit(uint64_t bytes) {
    PooledBuffer freed[kPoolSize] = {};
    int n = 0;
    {
        LockGuard lock(mu_);
        poolLimit_ = bytes;
        // The largest go first: what stays is the most buffers for the bytes kept.
        for (uint64_t kept = pooledLocked(); kept > poolLimit_;) {
            PooledBuffer* largest = nullptr;
            for (PooledBuffer& b : pool_)
                if (b.memory && (!largest || b.bytes > largest->bytes)) largest = &b;
            kept -= largest->bytes;
            freed[n++] = *largest;
            largest->memory = nullptr;
        }
    }
    for (int i = 0; i < n; ++i) freePinned(freed[i].device, freed[i].memory, freed[i].bytes);
}

void CudaVmmBackend::freePinned(uint8_t device, void* p, uint64_t bytes) {
    Failure why;
    {
        DeviceScope scope(*this, core::cudaOrdinal(device), why);
        OwnDeviceCalls ours;
        if (scope.ok()) api_->cuMemHostUnregister_(p);
    }
    munmap(p, bytes);
}

}  // namespace memtool::collectors::control
