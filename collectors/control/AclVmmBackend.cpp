#include "collectors/control/AclVmmBackend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "collectors/ascend/AclDecls.h"
#include "collectors/engine/RecursionGuard.h"
#include "core/Protocol.h"

namespace memtool::collectors::control {

#define MEMTOOL_ACL_FN(name) decltype(&::name) name##_ = nullptr

struct AclVmmBackend::Api {
    MEMTOOL_ACL_FN(aclInit);
    MEMTOOL_ACL_FN(aclGetRecentErrMsg);
    MEMTOOL_ACL_FN(aclrtSetDevice);
    MEMTOOL_ACL_FN(aclrtGetCurrentContext);
    MEMTOOL_ACL_FN(aclrtSetCurrentContext);
    MEMTOOL_ACL_FN(aclrtCreateStream);
    MEMTOOL_ACL_FN(aclrtSynchronizeStream);
    MEMTOOL_ACL_FN(aclrtSynchronizeDevice);
    MEMTOOL_ACL_FN(aclrtReserveMemAddress);
    MEMTOOL_ACL_FN(aclrtReleaseMemAddress);
    MEMTOOL_ACL_FN(aclrtMallocPhysical);
    MEMTOOL_ACL_FN(aclrtFreePhysical);
    MEMTOOL_ACL_FN(aclrtMapMem);
    MEMTOOL_ACL_FN(aclrtUnmapMem);
    MEMTOOL_ACL_FN(aclrtMemGetAllocationGranularity);
    MEMTOOL_ACL_FN(aclrtMemcpy);
    MEMTOOL_ACL_FN(aclrtMemcpyAsync);
    MEMTOOL_ACL_FN(aclrtMallocHost);
    MEMTOOL_ACL_FN(aclrtFreeHost);
    MEMTOOL_ACL_FN(aclrtGetMemInfo);
};

namespace {

#define MEMTOOL_ACL_RESOLVE(lib, api, name) \
    (api.name##_ = reinterpret_cast<decltype(api.name##_)>(dlsym(lib, #name))) != nullptr

AclVmmBackend::Api gAclApi;  // plain pointers: constant-initialized, never destroyed

bool check(aclError rc, const char* what, Failure& why) {
    if (rc == ACL_SUCCESS) return true;
    const char* text = gAclApi.aclGetRecentErrMsg_ ? gAclApi.aclGetRecentErrMsg_() : nullptr;
    char code[32];
    std::snprintf(code, sizeof code, " (aclError %d)", rc);
    why.set(what, ": ",
            text && *text                          ? text
            : rc == ACL_ERROR_RT_MEMORY_ALLOCATION ? "out of device memory"
                                                   : "error",
            code);
    return false;
}

aclrtPhysicalMemProp deviceProp(int ordinal) {
    aclrtPhysicalMemProp prop{};
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<uint32_t>(ordinal);
    return prop;
}

}  // namespace

// Makes the device's default context current for the scope and puts back the one
// the thread had (the control thread, and a hook's thread, must not depend on
// what is current; ACL has no context stack to push onto).
class AclVmmBackend::DeviceScope {
public:
    DeviceScope(AclVmmBackend& b, int ordinal, Failure& why) : api_(*b.api_) {
        if (!b.enter(ordinal, why)) return;
        if (api_.aclrtGetCurrentContext_(&previous_) != ACL_SUCCESS) previous_ = nullptr;
        ok_ = check(api_.aclrtSetCurrentContext_(b.contexts_[ordinal]), "aclrtSetCurrentContext",
                    why);
    }
    ~DeviceScope() {
        if (ok_ && previous_) api_.aclrtSetCurrentContext_(previous_);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
    bool ok() const { return ok_; }

private:
    Api& api_;
    aclrtContext previous_ = nullptr;
    bool ok_ = false;
};

bool AclVmmBackend::load(Failure& why) {
    if (api_) return true;
    const char* override = std::getenv("MEMTOOL_ACL_LIBRARY");  // tests: the fake runtime
    const char* path = override && *override ? override : "libascendcl.so";
    // Only the program's own: a process that never loaded it has no NPU memory to
    // serve, and loading CANN would initialize devices it does not use.
    void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) {
        why.set("the Ascend runtime (", path, ") is not loaded in this process");
        return false;
    }
    Api& a = gAclApi;
    const bool ok =
        MEMTOOL_ACL_RESOLVE(lib, a, aclInit) && MEMTOOL_ACL_RESOLVE(lib, a, aclrtSetDevice) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtGetCurrentContext) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtSetCurrentContext) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtCreateStream) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtSynchronizeStream) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtSynchronizeDevice) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtReserveMemAddress) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtReleaseMemAddress) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtMallocPhysical) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtFreePhysical) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtMapMem) && MEMTOOL_ACL_RESOLVE(lib, a, aclrtUnmapMem) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtMemcpy) && MEMTOOL_ACL_RESOLVE(lib, a, aclrtMemcpyAsync) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtMallocHost) &&
        MEMTOOL_ACL_RESOLVE(lib, a, aclrtFreeHost) && MEMTOOL_ACL_RESOLVE(lib, a, aclrtGetMemInfo);
    if (!ok) {
        why.set("the Ascend runtime at ", path,
                " lacks the virtual-memory API (aclrtReserveMemAddress: CANN 7.0 or later)");
        return false;
    }
    // Optional: older runtimes (ACL 1.15's headers) lack the granularity query,
    // whose answer is then the documented 2 MiB.
    static_cast<void>(MEMTOOL_ACL_RESOLVE(lib, a, aclGetRecentErrMsg));
    static_cast<void>(MEMTOOL_ACL_RESOLVE(lib, a, aclrtMemGetAllocationGranularity));
    // torch_npu initialized it already; a second aclInit says so, which is no failure.
    const aclError rc = a.aclInit_(nullptr);
    if (rc != ACL_ERROR_REPEAT_INITIALIZE && !check(rc, "aclInit", why)) return false;
    api_ = &a;
    return true;
}

bool AclVmmBackend::enter(int ordinal, Failure& why) {
    if (!api_) {
        why.set("the Ascend runtime is not loaded");
        return false;
    }
    if (ordinal < 0 || ordinal >= kMaxDevices) {
        why.set("an NPU ordinal out of range");
        return false;
    }
    LockGuard lock(mu_);
    if (contexts_[ordinal]) return true;
    // aclrtSetDevice makes the device's default context current on this thread;
    // the context is what later scopes set, on any thread.
    aclrtContext previous = nullptr;
    if (api_->aclrtGetCurrentContext_(&previous) != ACL_SUCCESS) previous = nullptr;
    aclrtContext ctx = nullptr;
    if (!check(api_->aclrtSetDevice_(ordinal), "aclrtSetDevice", why) ||
        !check(api_->aclrtGetCurrentContext_(&ctx), "aclrtGetCurrentContext", why))
        return false;
    if (previous) api_->aclrtSetCurrentContext_(previous);
    contexts_[ordinal] = ctx;
    return true;
}

uint64_t AclVmmBackend::granularity(uint8_t device) {
    const int ordinal = core::npuOrdinal(device);
    if (ordinal < 0 || !api_) return 2ull << 20;
    {
        LockGuard lock(mu_);
        if (granularity_[ordinal]) return granularity_[ordinal];
    }
    aclrtPhysicalMemProp prop = deviceProp(ordinal);
    size_t g = 0;
    if (!api_->aclrtMemGetAllocationGranularity_ ||
        api_->aclrtMemGetAllocationGranularity_(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g) !=
            ACL_SUCCESS ||
        g == 0)
        g = 2ull << 20;  // what the documentation gives for current NPUs
    LockGuard lock(mu_);
    granularity_[ordinal] = g;
    return g;
}

bool AclVmmBackend::reserve(uint8_t device, uint64_t bytes, uint64_t alignment, uint64_t* address,
                            Failure& why) {
    DeviceScope scope(*this, core::npuOrdinal(device), why);
    if (!scope.ok()) return false;
    void* p = nullptr;
    const uint64_t g = granularity(device);
    if (!check(api_->aclrtReserveMemAddress_(&p, bytes, alignment > g ? alignment : g, nullptr, 0),
               "aclrtReserveMemAddress", why))
        return false;
    *address = reinterpret_cast<uint64_t>(p);
    return true;
}

bool AclVmmBackend::map(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) {
    const int ordinal = core::npuOrdinal(device);
    DeviceScope scope(*this, ordinal, why);
    if (!scope.ok()) return false;
    OwnDeviceCalls ours;  // the region's allocation is recorded itself
    aclrtPhysicalMemProp prop = deviceProp(ordinal);
    aclrtDrvMemHandle handle = nullptr;
    if (!check(api_->aclrtMallocPhysical_(&handle, bytes, &prop, 0), "aclrtMallocPhysical", why))
        return false;
    void* at = reinterpret_cast<void*>(address);
    if (!check(api_->aclrtMapMem_(at, bytes, 0, handle, 0), "aclrtMapMem", why)) {
        api_->aclrtFreePhysical_(handle);
        return false;
    }
    LockGuard lock(mu_);
    if (!handles_.insert(address, reinterpret_cast<uint64_t>(handle))) {
        api_->aclrtUnmapMem_(at);
        api_->aclrtFreePhysical_(handle);
        why.set("out of memory for the table of mappings");
        return false;
    }
    return true;
}

bool AclVmmBackend::unmap(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) {
    uint64_t handle = 0;
    {
        LockGuard lock(mu_);
        if (!handles_.erase(address, &handle)) return true;  // not mapped
    }
    DeviceScope scope(*this, core::npuOrdinal(device), why);
    if (!scope.ok()) return false;
    OwnDeviceCalls ours;
    return check(api_->aclrtUnmapMem_(reinterpret_cast<void*>(address)), "aclrtUnmapMem", why) &&
           check(api_->aclrtFreePhysical_(reinterpret_cast<aclrtDrvMemHandle>(handle)),
                 "aclrtFreePhysical", why);
}

void AclVmmBackend::release(uint8_t device, uint64_t address, uint64_t bytes) {
    Failure ignored;
    DeviceScope scope(*this, core::npuOrdinal(device), ignored);
    if (!scope.ok()) return;
    // A free may come while kernels still use the memory: let them finish first.
    api_->aclrtSynchronizeDevice_();
    unmap(device, address, bytes, ignored);
    api_->aclrtReleaseMemAddress_(reinterpret_cast<void*>(address));
}

bool AclVmmBackend::stream(int ordinal, void** out, Failure& why) {
    LockGuard lock(mu_);
    if (!streams_[ordinal]) {
        aclrtStream s = nullptr;
        if (!check(api_->aclrtCreateStream_(&s), "aclrtCreateStream", why)) return false;
        streams_[ordinal] = s;
    }
    *out = streams_[ordinal];
    return true;
}

bool AclVmmBackend::synchronize(uint8_t device, Failure& why) {
    DeviceScope scope(*this, core::npuOrdinal(device), why);
    return scope.ok() && check(api_->aclrtSynchronizeDevice_(), "aclrtSynchronizeDevice", why);
}

bool AclVmmBackend::copyOnStream(void* to, const void* from, uint64_t bytes, int kind, void* stream,
                                 Failure& why) {
    return check(api_->aclrtMemcpyAsync_(to, bytes, from, bytes, static_cast<aclrtMemcpyKind>(kind),
                                         stream),
                 "aclrtMemcpyAsync", why) &&
           check(api_->aclrtSynchronizeStream_(stream), "aclrtSynchronizeStream", why);
}

bool AclVmmBackend::staging(Failure& why) {
    return staging_ ||
           check(api_->aclrtMallocHost_(&staging_, kChunkBytes), "aclrtMallocHost (staging)", why);
}

bool AclVmmBackend::copyOut(uint8_t device, uint64_t address, uint64_t bytes, Backup& to,
                            uint64_t offset, Failure& why) {
    const int ordinal = core::npuOrdinal(device);
    DeviceScope scope(*this, ordinal, why);
    void* s = nullptr;
    if (!scope.ok() || !stream(ordinal, &s, why)) return false;
    const void* from = reinterpret_cast<const void*>(address);
    if (void* view = to.directView(offset, bytes)) {  // pinned host backup: one copy, straight in
        return copyOnStream(view, from, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s, why);
    }
    LockGuard lock(stagingMu_);
    if (!staging(why)) return false;
    for (uint64_t done = 0; done < bytes;) {
        const uint64_t n = bytes - done < kChunkBytes ? bytes - done : kChunkBytes;
        if (!check(api_->aclrtMemcpy_(staging_, n, reinterpret_cast<const char*>(from) + done, n,
                                      ACL_MEMCPY_DEVICE_TO_HOST),
                   "aclrtMemcpy", why) ||
            !to.write(offset + done, staging_, n, why))
            return false;
        done += n;
    }
    return true;
}

bool AclVmmBackend::copyIn(uint8_t device, uint64_t address, uint64_t bytes, Backup& from,
                           uint64_t offset, Failure& why) {
    const int ordinal = core::npuOrdinal(device);
    DeviceScope scope(*this, ordinal, why);
    void* s = nullptr;
    if (!scope.ok() || !stream(ordinal, &s, why)) return false;
    auto* to = reinterpret_cast<char*>(address);
    if (void* view = from.directView(offset, bytes)) {
        return copyOnStream(to, view, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s, why);
    }
    LockGuard lock(stagingMu_);
    if (!staging(why)) return false;
    for (uint64_t done = 0; done < bytes;) {
        const uint64_t n = bytes - done < kChunkBytes ? bytes - done : kChunkBytes;
        if (!from.read(offset + done, staging_, n, why) ||
            !check(api_->aclrtMemcpy_(to + done, n, staging_, n, ACL_MEMCPY_HOST_TO_DEVICE),
                   "aclrtMemcpy", why))
            return false;
        done += n;
    }
    return true;
}

void* AclVmmBackend::allocateHost(uint8_t device, uint64_t* bytes, Failure& why) {
    DeviceScope scope(*this, core::npuOrdinal(device), why);
    if (!scope.ok()) return nullptr;
    OwnDeviceCalls ours;
    void* p = nullptr;
    if (!check(api_->aclrtMallocHost_(&p, *bytes), "aclrtMallocHost (host backup)", why))
        return nullptr;
    return p;
}

void AclVmmBackend::freeHost(uint8_t device, void* p, uint64_t bytes) {
    if (!p) return;
    Failure ignored;
    DeviceScope scope(*this, core::npuOrdinal(device), ignored);
    OwnDeviceCalls ours;
    if (scope.ok()) api_->aclrtFreeHost_(p);
}

bool AclVmmBackend::deviceMemory(uint8_t device, uint64_t* free, uint64_t* total) {
    Failure why;
    DeviceScope scope(*this, core::npuOrdinal(device), why);
    size_t f = 0, t = 0;
    if (!scope.ok() || api_->aclrtGetMemInfo_(ACL_HBM_MEM, &f, &t) != ACL_SUCCESS) return false;
    *free = f;
    *total = t;
    return true;
}

}  // namespace memtool::collectors::control
