// A stand-in for Ascend's ACL runtime (libascendcl.so, built under that name so
// that memtool recognizes it as the runtime) where no NPU is: "device" memory is
// host memory, so that the NPU VMM backend of pausable regions
// (collectors/control/AclVmmBackend.cpp) and the allocation hooks
// (collectors/ascend/AclHooks.cpp) run their real code paths.
//
//   aclrtReserveMemAddress  an anonymous PROT_NONE mapping (addresses only)
//   aclrtMallocPhysical     a memfd of the size: "physical" memory, counted as used
//   aclrtMapMem             that memfd mapped read/write at the reserved address
//   aclrtUnmapMem           the range back to PROT_NONE (addresses kept)
//   aclrtFreePhysical       the memfd closed: no longer used
//   aclrtMalloc & co.       a pool of device memory: a mapping per block, counted
//                           as used with the documented rounding (aclrtMalloc: up
//                           to 32 bytes, plus 32; aclrtMallocAlign32: up to 32)
//   copies                  memcpy, refused (ACL_ERROR_RT_PARAM_INVALID) when the
//                           device side is not wholly mapped device memory: a
//                           paused region's range, or a freed block
//   aclrtMallocHost         host memory, counted as pinned
//   contexts, streams       tokens; like the runtime, memory calls need a device
//                           set (aclrtSetDevice) or a context current on the thread
//
// Test controls: fake_npu_used_bytes() is the device memory held (what
// aclrtGetMemInfo says is used); FAKE_NPU_CAPACITY caps it (allocations then fail
// with ACL_ERROR_RT_MEMORY_ALLOCATION); fake_npu_set_capacity() changes it at run
// time; fake_npu_host_bytes() is the pinned host memory held. FAKE_NPU_DEVICES
// devices (default 1).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "collectors/ascend/AclDecls.h"

namespace {

constexpr size_t kGranularity = 2u << 20;
constexpr int kMaxDevices = 16;

struct Physical {
    int fd;
    size_t size;
};

std::mutex mu;
std::unordered_map<uintptr_t, Physical>& physical() {
    static std::unordered_map<uintptr_t, Physical> p;
    return p;
}
// Device ranges: start -> size, for reservations, mappings and pool blocks.
std::map<uintptr_t, size_t>& reserved() {
    static std::map<uintptr_t, size_t> r;
    return r;
}
std::map<uintptr_t, size_t>& mapped() {
    static std::map<uintptr_t, size_t> m;
    return m;
}
struct Block {
    size_t mappedBytes, countedBytes;
};
std::map<uintptr_t, Block>& blocks() {
    static std::map<uintptr_t, Block> b;
    return b;
}
std::unordered_map<void*, size_t>& hostBlocks() {
    static std::unordered_map<void*, size_t> h;
    return h;
}
std::atomic<size_t> used{0};
std::atomic<size_t> capacity{0};  // 0: unlimited
uintptr_t nextHandle = 1;
bool initialized = false;
int contextTokens[kMaxDevices];
int streamToken = 0;
thread_local int currentDevice = -1;  // set by aclrtSetDevice or a context
thread_local const char* lastError = "";

int envInt(const char* name, int fallback) {
    const char* text = std::getenv(name);
    return text && *text ? std::atoi(text) : fallback;
}

aclError fail(aclError rc, const char* text) {
    lastError = text;
    return rc;
}

bool hasDevice() { return currentDevice >= 0; }

bool takes(size_t size) {
    const size_t cap = capacity.load();
    return !cap || used.load() + size <= cap;
}

// Whether [p, p + n) lies inside one range of `ranges` (held under mu).
bool inside(const std::map<uintptr_t, size_t>& ranges, uintptr_t p, size_t n) {
    auto it = ranges.upper_bound(p);
    if (it == ranges.begin()) return false;
    --it;
    return p >= it->first && p + n <= it->first + it->second;
}

bool deviceRange(const void* p, size_t n) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu);
    if (inside(mapped(), at, n)) return true;
    auto it = blocks().upper_bound(at);
    if (it == blocks().begin()) return false;
    --it;
    return at >= it->first && at + n <= it->first + it->second.mappedBytes;
}

void* mapAligned(size_t size, size_t align, int prot) {
    void* p = mmap(nullptr, size + align, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (start + align - 1) / align * align;
    if (aligned > start) munmap(p, aligned - start);
    const uintptr_t end = start + size + align;
    if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
    return reinterpret_cast<void*>(aligned);
}

aclError poolMalloc(void** out, size_t size, size_t counted) {
    if (!out || size == 0) return fail(ACL_ERROR_INVALID_PARAM, "invalid parameter");
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no device set on this thread");
    if (!takes(counted)) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of device memory");
    const size_t page = 4096;
    const size_t bytes = (counted + page - 1) / page * page;
    void* p = mapAligned(bytes, 512, PROT_READ | PROT_WRITE);
    if (!p) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of device memory");
    std::lock_guard<std::mutex> lock(mu);
    blocks()[reinterpret_cast<uintptr_t>(p)] = Block{bytes, counted};
    used += counted;
    *out = p;
    return ACL_SUCCESS;
}

size_t roundUp32(size_t n) { return (n + 31) / 32 * 32; }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) size_t fake_npu_used_bytes() { return used.load(); }
__attribute__((visibility("default"))) void fake_npu_set_capacity(size_t bytes) {
    capacity.store(bytes);
}
__attribute__((visibility("default"))) size_t fake_npu_host_bytes() {
    std::lock_guard<std::mutex> lock(mu);
    size_t bytes = 0;
    for (const auto& [p, n] : hostBlocks()) bytes += n;
    return bytes;
}

aclError aclInit(const char*) {
    std::lock_guard<std::mutex> lock(mu);
    if (initialized) return fail(ACL_ERROR_REPEAT_INITIALIZE, "repeated initialization");
    initialized = true;
    const char* cap = std::getenv("FAKE_NPU_CAPACITY");
    if (cap && !capacity.load()) capacity.store(std::strtoull(cap, nullptr, 10));
    return ACL_SUCCESS;
}

const char* aclGetRecentErrMsg() { return lastError; }

aclError aclrtGetDeviceCount(uint32_t* count) {
    *count = static_cast<uint32_t>(envInt("FAKE_NPU_DEVICES", 1));
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t id) {
    if (id < 0 || id >= envInt("FAKE_NPU_DEVICES", 1) || id >= kMaxDevices)
        return fail(ACL_ERROR_RT_PARAM_INVALID, "invalid device id");
    currentDevice = id;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t* id) {
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no device set on this thread");
    *id = currentDevice;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
    *context = &contextTokens[currentDevice];
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    auto* token = static_cast<int*>(context);
    if (token < contextTokens || token >= contextTokens + kMaxDevices)
        return fail(ACL_ERROR_RT_PARAM_INVALID, "invalid context");
    currentDevice = static_cast<int>(token - contextTokens);
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
    *stream = &streamToken;
    return ACL_SUCCESS;
}
aclError aclrtSynchronizeStream(aclrtStream) { return ACL_SUCCESS; }
aclError aclrtSynchronizeDevice() {
    return hasDevice() ? ACL_SUCCESS : fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
}

aclError aclrtMalloc(void** p, size_t size, aclrtMemMallocPolicy) {
    return poolMalloc(p, size, roundUp32(size) + 32);
}
aclError aclrtMallocAlign32(void** p, size_t size, aclrtMemMallocPolicy) {
    return poolMalloc(p, size, roundUp32(size));
}
aclError aclrtMallocCached(void** p, size_t size, aclrtMemMallocPolicy) {
    return poolMalloc(p, size, roundUp32(size) + 32);
}

aclError aclrtFree(void* p) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = blocks().find(reinterpret_cast<uintptr_t>(p));
    if (it == blocks().end()) return fail(ACL_ERROR_RT_PARAM_INVALID, "not a device block");
    munmap(p, it->second.mappedBytes);
    used -= it->second.countedBytes;
    blocks().erase(it);
    return ACL_SUCCESS;
}

aclError aclrtMallocHost(void** p, size_t bytes) {
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
    *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*p == MAP_FAILED) return fail(ACL_ERROR_BAD_ALLOC, "out of host memory");
    std::lock_guard<std::mutex> lock(mu);
    hostBlocks()[*p] = bytes;
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void* p) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = hostBlocks().find(p);
    if (it == hostBlocks().end()) return fail(ACL_ERROR_INVALID_PARAM, "not pinned host memory");
    munmap(p, it->second);
    hostBlocks().erase(it);
    return ACL_SUCCESS;
}

// A device of the capacity set (or 64 GiB), of which this process is the only user.
aclError aclrtGetMemInfo(aclrtMemAttr, size_t* free, size_t* total) {
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
    const size_t cap = capacity.load() ? capacity.load() : size_t{64} << 30;
    *total = cap;
    *free = cap - used.load();
    return ACL_SUCCESS;
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp*, aclrtMemGranularityOptions,
                                          size_t* granularity) {
    *granularity = kGranularity;
    return ACL_SUCCESS;
}

aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment, void*, uint64_t) {
    if (size % kGranularity) return fail(ACL_ERROR_RT_PARAM_INVALID, "size not aligned");
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
    void* p = mapAligned(size, alignment > kGranularity ? alignment : kGranularity, PROT_NONE);
    if (!p) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of address space");
    std::lock_guard<std::mutex> lock(mu);
    reserved()[reinterpret_cast<uintptr_t>(p)] = size;
    *virPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtReleaseMemAddress(void* virPtr) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = reserved().find(reinterpret_cast<uintptr_t>(virPtr));
    if (it == reserved().end()) return fail(ACL_ERROR_RT_PARAM_INVALID, "not a reservation");
    munmap(virPtr, it->second);
    reserved().erase(it);
    return ACL_SUCCESS;
}

aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                             const aclrtPhysicalMemProp* prop, uint64_t flags) {
    if (size % kGranularity || !prop || flags != 0 ||
        prop->location.type != ACL_MEM_LOCATION_TYPE_DEVICE ||
        prop->allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED)
        return fail(ACL_ERROR_RT_PARAM_INVALID, "invalid physical memory properties");
    if (!hasDevice()) return fail(ACL_ERROR_RT_CONTEXT_NULL, "no context on this thread");
    if (!takes(size)) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of device memory");
    int fd = memfd_create("fake-npu-physical", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0)
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of device memory");
    std::lock_guard<std::mutex> lock(mu);
    const uintptr_t h = nextHandle++;
    physical()[h] = Physical{fd, size};
    used += size;
    *handle = reinterpret_cast<aclrtDrvMemHandle>(h);
    return ACL_SUCCESS;
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = physical().find(reinterpret_cast<uintptr_t>(handle));
    if (it == physical().end()) return fail(ACL_ERROR_RT_PARAM_INVALID, "not a physical handle");
    close(it->second.fd);
    used -= it->second.size;
    physical().erase(it);
    return ACL_SUCCESS;
}

aclError aclrtMapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = physical().find(reinterpret_cast<uintptr_t>(handle));
    const auto at = reinterpret_cast<uintptr_t>(virPtr);
    // As documented: the whole physical allocation, at offset 0, inside a reservation.
    if (it == physical().end() || offset != 0 || flags != 0 || size != it->second.size ||
        !inside(reserved(), at, size) || inside(mapped(), at, 1))
        return fail(ACL_ERROR_RT_PARAM_INVALID, "invalid mapping");
    void* p = mmap(virPtr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, it->second.fd, 0);
    if (p == MAP_FAILED) return fail(ACL_ERROR_RT_PARAM_INVALID, "mapping failed");
    mapped()[at] = size;
    return ACL_SUCCESS;
}

aclError aclrtUnmapMem(void* virPtr) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = mapped().find(reinterpret_cast<uintptr_t>(virPtr));
    if (it == mapped().end()) return fail(ACL_ERROR_RT_PARAM_INVALID, "not mapped");
    // The addresses stay reserved, as the runtime keeps them.
    void* p = mmap(virPtr, it->second, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    mapped().erase(it);
    return p == MAP_FAILED ? fail(ACL_ERROR_RT_PARAM_INVALID, "unmap failed") : ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind) {
    if (count > destMax) return fail(ACL_ERROR_INVALID_PARAM, "count exceeds destMax");
    const bool dstDevice = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    const bool srcDevice = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    if ((dstDevice && !deviceRange(dst, count)) || (srcDevice && !deviceRange(src, count)))
        return fail(ACL_ERROR_RT_PARAM_INVALID, "device memory not mapped");
    std::memcpy(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream) {
    return aclrtMemcpy(dst, destMax, src, count, kind);
}
}
