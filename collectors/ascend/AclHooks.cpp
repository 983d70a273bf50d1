#include "collectors/ascend/AclHooks.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "collectors/ascend/AclDecls.h"
#include "collectors/control/Regions.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/ModuleName.h"
#include "core/Protocol.h"

namespace memtool::collectors {
namespace {

// What the hooks record into and serve from (bindAclHooks, before any slot is
// patched). Plain data, constant-initialized.
Engine* gEngine = nullptr;
control::Regions* gRegions = nullptr;

// The engine the hooks record into: bound before any slot is patched, so never
// null here (said to the compiler, whose whole-program view otherwise warns of
// the null it starts as).
Engine& engine() {
    if (!gEngine) __builtin_unreachable();
    return *gEngine;
}

// The runtime's own function for each served name: the one the dlsym hook saw
// (torch_npu's lookup), else found in the loaded libascendcl, whichever scope the
// program loaded it into (torch_npu's import is local to it).
enum Served { kMalloc, kMallocAlign32, kMallocCached, kFree, kMallocHost, kFreeHost, kServed };
constexpr const char* kServedNames[kServed] = {"aclrtMalloc",       "aclrtMallocAlign32",
                                               "aclrtMallocCached", "aclrtFree",
                                               "aclrtMallocHost",   "aclrtFreeHost"};
std::atomic<void*> gOriginal[kServed] = {};

void* searchRuntime(const char* symbol) { return findInLoaded("libascendcl.so", symbol); }

template <typename Fn>
Fn original(Served which) {
    void* p = gOriginal[which].load(std::memory_order_acquire);
    if (!p) {
        p = searchRuntime(kServedNames[which]);
        gOriginal[which].store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
}

// The calling thread's current device, where aclrtMalloc & co. allocate.
uint8_t currentDevice() {
    static auto getDevice =
        reinterpret_cast<decltype(&::aclrtGetDevice)>(searchRuntime("aclrtGetDevice"));
    int32_t ordinal = -1;
    if (!getDevice || getDevice(&ordinal) != ACL_SUCCESS) ordinal = -1;
    return core::npuDeviceOrFirst(ordinal);
}

bool outOfMemory(aclError rc) {
    return rc == ACL_ERROR_RT_MEMORY_ALLOCATION || rc == ACL_ERROR_BAD_ALLOC;
}

void recordDevice(aclError rc, void** out, size_t size) {
    if (rc == ACL_SUCCESS && out && *out)
        engine().alloc(currentDevice(), reinterpret_cast<uint64_t>(*out), size);
    else if (outOfMemory(rc))
        engine().oom(currentDevice(), size, core::OomSource::Allocator);
}

// Before the memory is released (see core/PROTOCOL.md, Frees).
void recordFree(void* p) {
    if (p) engine().free(reinterpret_cast<uint64_t>(p));
}

// NPU memory for a thread inside a region: VMM memory a pause can release. The
// caller (torch_npu's caching allocator) sees an ordinary aclrtMalloc result.
constexpr uint64_t kAlignment = 512;  // what aclrtMalloc's blocks keep, at least

aclError serveRegion(void** out, size_t size) {
    control::Failure why;
    void* p = gRegions->serve(currentDevice(), size, kAlignment, why);
    if (!p) {
        engine().oom(currentDevice(), size, core::OomSource::Allocator);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *out = p;
    return ACL_SUCCESS;
}

template <Served kWhich>
aclError hookDeviceMalloc(void** out, size_t size, aclrtMemMallocPolicy policy) {
    if (gRegions->threadInRegion()) return serveRegion(out, size);
    auto real = original<decltype(&::aclrtMalloc)>(kWhich);
    if (!real) return ACL_ERROR_RT_PARAM_INVALID;
    const aclError rc = real(out, size, policy);
    recordDevice(rc, out, size);
    return rc;
}

aclError hookFree(void* p) {
    if (p && gRegions->release(reinterpret_cast<uint64_t>(p))) return ACL_SUCCESS;
    auto real = original<decltype(&::aclrtFree)>(kFree);
    recordFree(p);
    return real ? real(p) : ACL_ERROR_RT_PARAM_INVALID;
}

aclError hookMallocHost(void** out, size_t size) {
    auto real = original<decltype(&::aclrtMallocHost)>(kMallocHost);
    if (!real) return ACL_ERROR_RT_PARAM_INVALID;
    const aclError rc = real(out, size);
    if (rc == ACL_SUCCESS && out && *out)
        engine().alloc(core::kDevicePinnedHost, reinterpret_cast<uint64_t>(*out), size);
    else if (outOfMemory(rc))
        engine().oom(core::kDevicePinnedHost, size, core::OomSource::Allocator);
    return rc;
}

aclError hookFreeHost(void* p) {
    auto real = original<decltype(&::aclrtFreeHost)>(kFreeHost);
    recordFree(p);
    return real ? real(p) : ACL_ERROR_RT_PARAM_INVALID;
}

void* const kHookFor[kServed] = {
    reinterpret_cast<void*>(static_cast<decltype(&::aclrtMalloc)>(&hookDeviceMalloc<kMalloc>)),
    reinterpret_cast<void*>(
        static_cast<decltype(&::aclrtMallocAlign32)>(&hookDeviceMalloc<kMallocAlign32>)),
    reinterpret_cast<void*>(
        static_cast<decltype(&::aclrtMallocCached)>(&hookDeviceMalloc<kMallocCached>)),
    reinterpret_cast<void*>(static_cast<decltype(&::aclrtFree)>(&hookFree)),
    reinterpret_cast<void*>(static_cast<decltype(&::aclrtMallocHost)>(&hookMallocHost)),
    reinterpret_cast<void*>(static_cast<decltype(&::aclrtFreeHost)>(&hookFreeHost)),
};

const GotHook kImportHooks[] = {
    MEMTOOL_GOT_HOOK(aclrtMalloc, &hookDeviceMalloc<kMalloc>),
    MEMTOOL_GOT_HOOK(aclrtMallocAlign32, &hookDeviceMalloc<kMallocAlign32>),
    MEMTOOL_GOT_HOOK(aclrtMallocCached, &hookDeviceMalloc<kMallocCached>),
    MEMTOOL_GOT_HOOK(aclrtFree, &hookFree),
    MEMTOOL_GOT_HOOK(aclrtMallocHost, &hookMallocHost),
    MEMTOOL_GOT_HOOK(aclrtFreeHost, &hookFreeHost),
};

int servedIndex(const char* name) {
    if (std::strncmp(name, "aclrt", 5) != 0) return -1;
    for (int i = 0; i < kServed; ++i)
        if (std::strcmp(name, kServedNames[i]) == 0) return i;
    return -1;
}

}  // namespace
}  // namespace memtool::collectors

// The dlsym hook's two halves. The entry (assembly below) asks whether the lookup
// is one memtool serves; if not, it jumps to the C library's dlsym with the
// caller's own return address on the stack, which dlsym reads to resolve
// RTLD_NEXT and RTLD_DEFAULT in the caller's scope: the lookup is the caller's,
// exactly. A served lookup with a handle (or RTLD_DEFAULT) is answered by
// memtool_acl_dlsym_served, which asks dlsym itself and swaps libascendcl's
// function for the hook. RTLD_NEXT is never served: from memtool's frame it
// would mean another library.
// Referenced only from the assembly: kept, and kept by their names through GCC's
// link-time optimization (clang keeps a used symbol's name and knows no
// externally_visible).
#if defined(__clang__)
#define MEMTOOL_ASM_CALLEE gnu::visibility("hidden"), gnu::used
#else
#define MEMTOOL_ASM_CALLEE gnu::visibility("hidden"), gnu::used, gnu::externally_visible
#endif
extern "C" {
[[MEMTOOL_ASM_CALLEE]] void* (*memtool_acl_real_dlsym)(void*, const char*) = &dlsym;

[[MEMTOOL_ASM_CALLEE]] bool memtool_acl_dlsym_serves(void* handle, const char* name) {
    return handle != RTLD_NEXT && name && memtool::collectors::servedIndex(name) >= 0;
}

[[MEMTOOL_ASM_CALLEE]] void* memtool_acl_dlsym_served(void* handle, const char* name) {
    using namespace memtool::collectors;
    void* found = dlsym(handle, name);
    Dl_info info;
    if (!found || !dladdr(found, &info) || !info.dli_fname || !isAclRuntime(info.dli_fname))
        return found;
    const int i = servedIndex(name);
    gOriginal[i].store(found, std::memory_order_release);
    return kHookFor[i];
}

// x86-64 only (GotPatcher.h refuses other targets). On entry the stack is 8
// bytes past a 16-byte boundary; two pushes and 8 more align the call.
[[gnu::naked, gnu::visibility("hidden")]] void* memtool_acl_dlsym_hook(void*,
                                                                       const char*) noexcept {
    asm(R"(
    pushq %rdi
    pushq %rsi
    subq $8, %rsp
    call memtool_acl_dlsym_serves
    addq $8, %rsp
    popq %rsi
    popq %rdi
    testb %al, %al
    jz 1f
    jmp memtool_acl_dlsym_served
1:
    jmpq *memtool_acl_real_dlsym(%rip)
)");
}
}

namespace memtool::collectors {

namespace {
const GotHook kDlsymHook = MEMTOOL_GOT_HOOK(dlsym, &memtool_acl_dlsym_hook);
}  // namespace

void bindAclHooks(Engine& engine, control::Regions& regions) {
    gEngine = &engine;
    gRegions = &regions;
}

const GotHook* aclImportHooks(size_t* count) {
    *count = sizeof kImportHooks / sizeof kImportHooks[0];
    return kImportHooks;
}

const GotHook* aclDlsymHook() { return &kDlsymHook; }

bool isAclRuntime(const char* path) { return fileNameStartsWith(path, "libascendcl.so"); }

bool skipForAclHooks(const char* path) {
    return isAclRuntime(path) || fileNameStartsWith(path, "libmemtool_") ||
           fileNameStartsWith(path, "libc.so") || fileNameStartsWith(path, "libdl.so") ||
           fileNameStartsWith(path, "ld-linux");
}

void* aclPluggableMalloc(size_t size, int device, void*) {
    if (gRegions->threadInRegion()) {
        control::Failure why;
        return gRegions->serve(core::npuDeviceOrFirst(device), size, kAlignment, why);
    }
    // Outside a region: the runtime's memory, recorded here (torch_npu's caching
    // allocator then calls no runtime function memtool's hooks would see).
    auto real = original<decltype(&::aclrtMalloc)>(kMalloc);
    void* p = nullptr;
    const aclError rc =
        real ? real(&p, size, ACL_MEM_MALLOC_HUGE_FIRST) : ACL_ERROR_RT_PARAM_INVALID;
    if (rc == ACL_SUCCESS && p)
        engine().alloc(core::npuDeviceOrFirst(device), reinterpret_cast<uint64_t>(p), size);
    else if (outOfMemory(rc))
        engine().oom(core::npuDeviceOrFirst(device), size, core::OomSource::Allocator);
    return rc == ACL_SUCCESS ? p : nullptr;
}

void aclPluggableFree(void* p, size_t, int, void*) {
    if (!p || gRegions->release(reinterpret_cast<uint64_t>(p))) return;
    recordFree(p);
    if (auto real = original<decltype(&::aclrtFree)>(kFree)) real(p);
}

}  // namespace memtool::collectors
