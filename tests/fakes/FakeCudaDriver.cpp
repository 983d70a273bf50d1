// A stand-in for the CUDA driver's virtual-memory API (libcuda.so.1) where no GPU
// is: "device" memory is host memory, so that the CUDA VMM backend of pausable
// regions (collectors/control/CudaVmmBackend.cpp) runs its real code paths.
//
//   cuMemAddressReserve  an anonymous PROT_NONE mapping (addresses only)
//   cuMemCreate          a memfd of the size: "physical" memory, counted as used
//   cuMemMap             that memfd mapped at the reserved address
//   cuMemSetAccess       mprotect read/write
//   cuMemUnmap           the range back to PROT_NONE (addresses kept)
//   cuMemRelease         the memfd closed: no longer used
//   copies               memcpy; streams and contexts are tokens
//   cuMemHostAlloc       host memory; like the driver, only with a context current
//                        on the calling thread (pushed and not yet popped)
//   cuMemHostRegister    the caller's memory counted as pinned (same condition)
//
// Test controls: fake_cuda_used_bytes() is the device memory held (what NVML or
// cudaMemGetInfo would say); FAKE_CUDA_CAPACITY caps it (cuMemCreate then fails
// with CUDA_ERROR_OUT_OF_MEMORY); fake_cuda_set_capacity() changes it at run time;
// fake_cuda_host_bytes() is the pinned host memory held (cuMemHostAlloc's and
// cuMemHostRegister's).
// cuModuleLoadData takes the checksum kernel's PTX (collectors/cuda/ChecksumKernel.cu)
// and cuLaunchKernel runs it as the host would (core/Checksum.h's sum of the
// "device" memory its parameters name); fake_cuda_spoil_next_copy_in() flips the
// first byte the next host-to-device copy writes (a restore that comes back wrong),
// fake_cuda_kernel_launches() counts the launches.
// FAKE_CUDA_DEVICES devices (default 1) reach each other's memory, except the one
// FAKE_CUDA_PEERLESS names; fake_cuda_access_devices(address) is the devices (bits
// by ordinal) the last cuMemSetAccess at that address granted.
#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/Checksum.h"

namespace {

constexpr size_t kGranularity = 2u << 20;

struct Physical {
    int fd;
    size_t size;
};

std::mutex mu;
std::unordered_map<CUmemGenericAllocationHandle, Physical> physical;
std::atomic<size_t> used{0};
std::atomic<size_t> capacity{0};       // 0: unlimited
std::atomic<size_t> usedElsewhere{0};  // fake_cuda_set_used_elsewhere
CUmemGenericAllocationHandle nextHandle = 1;
int contextToken = 0;
int streamToken = 0;
thread_local int contextsPushed = 0;  // this thread's context stack
std::atomic<bool> spoilNextCopyIn{false};
std::atomic<int> launches{0};
int moduleToken = 0;
int functionToken = 0;

int envInt(const char* name, int fallback) {
    const char* text = std::getenv(name);
    return text && *text ? std::atoi(text) : fallback;
}
std::unordered_map<CUdeviceptr, unsigned long long>& accessGranted() {
    static std::unordered_map<CUdeviceptr, unsigned long long> granted;
    return granted;
}

std::unordered_map<void*, size_t>& hostBlocks() {
    static std::unordered_map<void*, size_t> blocks;
    return blocks;
}

size_t configuredCapacity() {
    const char* cap = std::getenv("FAKE_CUDA_CAPACITY");
    return cap ? std::strtoull(cap, nullptr, 10) : 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) size_t fake_cuda_used_bytes() { return used.load(); }
__attribute__((visibility("default"))) void fake_cuda_set_capacity(size_t bytes) {
    capacity.store(bytes);
}
// Bytes the device holds besides what this driver hands out (a CUDA context, other
// processes): used, as cuMemGetInfo says, and never anyone's allocation.
__attribute__((visibility("default"))) void fake_cuda_set_used_elsewhere(size_t bytes) {
    usedElsewhere.store(bytes);
}
__attribute__((visibility("default"))) unsigned long long fake_cuda_access_devices(
    CUdeviceptr address) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = accessGranted().find(address);
    return it == accessGranted().end() ? 0 : it->second;
}

CUresult cuDeviceGetCount(int* count) {
    *count = envInt("FAKE_CUDA_DEVICES", 1);
    return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice device, CUdevice peer) {
    const int peerless = envInt("FAKE_CUDA_PEERLESS", -1);
    *can = device != peer && device != peerless && peer != peerless;
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) size_t fake_cuda_host_bytes() {
    std::lock_guard<std::mutex> lock(mu);
    size_t bytes = 0;
    for (const auto& [p, n] : hostBlocks()) bytes += n;
    return bytes;
}

CUresult cuInit(unsigned int) {
    if (!capacity.load()) capacity.store(configuredCapacity());
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** str) {
    *str = error == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "fake driver error";
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
    *ctx = reinterpret_cast<CUcontext>(&contextToken);
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext) {
    ++contextsPushed;
    return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    --contextsPushed;
    if (ctx) *ctx = reinterpret_cast<CUcontext>(&contextToken);
    return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
    *stream = reinterpret_cast<CUstream>(&streamToken);
    return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp*,
                                       CUmemAllocationGranularity_flags) {
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr,
                             unsigned long long) {
    if (size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
    const size_t align = alignment > kGranularity ? alignment : kGranularity;
    void* p =
        mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (start + align - 1) / align * align;
    if (aligned > start) munmap(p, aligned - start);
    const uintptr_t end = start + size + align;
    if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
    *ptr = aligned;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return munmap(reinterpret_cast<void*>(ptr), size) == 0 ? CUDA_SUCCESS
                                                           : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long) {
    if (size % kGranularity || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    const size_t cap = capacity.load();
    if (cap && used.load() + size > cap) return CUDA_ERROR_OUT_OF_MEMORY;
    int fd = memfd_create("fake-cuda-physical", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> lock(mu);
    *handle = nextHandle++;
    physical[*handle] = Physical{fd, size};
    used += size;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = physical.find(handle);
    if (it == physical.end()) return CUDA_ERROR_INVALID_VALUE;
    close(it->second.fd);
    used -= it->second.size;
    physical.erase(it);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = physical.find(handle);
    if (it == physical.end() || offset + size > it->second.size) return CUDA_ERROR_INVALID_VALUE;
    void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                   it->second.fd, static_cast<off_t>(offset));
    return p == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    unsigned long long devices = 0;
    for (size_t i = 0; i < count; ++i)
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
            desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            devices |= 1ull << desc[i].location.id;
    {
        std::lock_guard<std::mutex> lock(mu);
        accessGranted()[ptr] = devices;
    }
    return mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE) == 0
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    // The addresses stay reserved, as the real driver keeps them.
    void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// A "device" of the capacity set (or 80 GiB), of which memtool's allocations are
// the only users.
CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    const size_t cap = capacity.load() ? capacity.load() : size_t{80} << 30;
    *total = cap;
    *free = cap - used.load() - usedElsewhere.load();
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream) {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream) {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    if (bytes && spoilNextCopyIn.exchange(false)) *reinterpret_cast<unsigned char*>(dst) ^= 0xff;
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) void fake_cuda_spoil_next_copy_in() {
    spoilNextCopyIn.store(true);
}
__attribute__((visibility("default"))) int fake_cuda_kernel_launches() { return launches.load(); }

// The one module there is: the checksum kernel's, known by its entry's name.
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!std::strstr(static_cast<const char*>(image), ".entry memtool_checksum("))
        return CUDA_ERROR_INVALID_PTX;
    *module = reinterpret_cast<CUmodule>(&moduleToken);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
    if (module != reinterpret_cast<CUmodule>(&moduleToken) ||
        std::strcmp(name, "memtool_checksum") != 0)
        return CUDA_ERROR_NOT_FOUND;
    *function = reinterpret_cast<CUfunction>(&functionToken);
    return CUDA_SUCCESS;
}

// memtool_checksum(data, words, out): *out += the sum, as every block's warps add theirs.
CUresult cuLaunchKernel(CUfunction function, unsigned gridX, unsigned, unsigned, unsigned blockX,
                        unsigned, unsigned, unsigned, CUstream, void** params, void**) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (function != reinterpret_cast<CUfunction>(&functionToken) || !params || gridX == 0 ||
        blockX == 0 || blockX > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    const auto* data = *static_cast<const uint64_t* const*>(params[0]);
    const auto words = *static_cast<const unsigned long long*>(params[1]);
    auto* out = *static_cast<uint64_t* const*>(params[2]);
    *out += memtool::core::checksumWordsScalar(data, words);
    ++launches;
    return CUDA_SUCCESS;
}

// Plain device memory (cuMemAlloc): mapped host memory here too, as the VMM
// calls' is. A backend keeps its checksum word for the process's life, as it
// would on a device: not heap memory, which a leak checker would count at exit.
CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned int) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> lock(mu);
    hostBlocks()[*p] = bytes;
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(mu);
    if (hostBlocks().count(p)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    hostBlocks()[p] = bytes;
    return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* p) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(mu);
    if (!hostBlocks().erase(p)) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
    if (contextsPushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> lock(mu);
    auto it = hostBlocks().find(p);
    if (it == hostBlocks().end()) return CUDA_ERROR_INVALID_VALUE;
    munmap(p, it->second);
    hostBlocks().erase(it);
    return CUDA_SUCCESS;
}
}
