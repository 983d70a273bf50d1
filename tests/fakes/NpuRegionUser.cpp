// An Ascend runtime user that allocates as torch_npu's caching allocator does:
// aclrtMallocAlign32 resolved through dlopen("libascendcl.so") + dlsym(handle)
// (torch_npu's FunctionLoader), aclrtFree and aclrtMalloc through its own
// imports. Linked against the test double of the runtime (FakeAscendCl.cpp).
//
//   npu_region_user: 1,000,000 bytes (the dlsym route) and 500,000 (aclrtMalloc)
//   outside any region, the second freed; then 3,000,000 bytes in region "kv"
//   (host backup) through the collector's C surface, filled, paused, resumed and
//   freed; then the first freed. Prints what the "device" held at each step,
//   whether the content survived, and the pinned host memory held at the end.
//   npu_region_user lookups: the files two other dlsym lookups resolve into.
//   npu_region_user oom: an allocation larger than the device (FAKE_NPU_CAPACITY)
//   through the dlsym route; prints its return code.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "collectors/ascend/AclDecls.h"

extern "C" {
size_t fake_npu_used_bytes();
size_t fake_npu_host_bytes();
}

namespace {

template <typename Fn>
Fn find(void* lib, const char* name) {
    return reinterpret_cast<Fn>(dlsym(lib, name));
}

// torch_npu's way: the library by name, each function from its handle.
decltype(&::aclrtMallocAlign32) loadMallocAlign32() {
    void* handle = dlopen("libascendcl.so", RTLD_LAZY);
    return handle ? find<decltype(&::aclrtMallocAlign32)>(handle, "aclrtMallocAlign32") : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    auto mallocAlign32 = loadMallocAlign32();
    if (!mallocAlign32 || aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        std::printf("no runtime\n");
        return 2;
    }
    if (argc > 1 && std::strcmp(argv[1], "lookups") == 0) {
        // What other lookups get under memtool: RTLD_NEXT from here finds the
        // next object's definition after this program (dlopen: the preloaded
        // collector's, where a lookup made from the collector would find the C
        // library's), and the runtime's own function; a handle's lookup of a
        // name memtool does not serve is the runtime's.
        void* handle = dlopen("libascendcl.so", RTLD_LAZY);
        Dl_info loader{}, next{}, other{};
        dladdr(dlsym(RTLD_NEXT, "dlopen"), &loader);
        dladdr(dlsym(RTLD_NEXT, "aclrtMallocAlign32"), &next);
        dladdr(dlsym(handle, "aclrtMemcpy"), &other);
        auto file = [](const Dl_info& i) {
            return i.dli_fname ? std::strrchr(i.dli_fname, '/') + 1 : "?";
        };
        std::printf("dlopen %s next %s other %s\n", file(loader), file(next), file(other));
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "oom") == 0) {
        void* p = nullptr;
        std::printf("oom rc %d\n", mallocAlign32(&p, 2000000, ACL_MEM_MALLOC_HUGE_FIRST));
        return 0;
    }
    auto enter =
        find<int (*)(const char*, int, char*, size_t)>(RTLD_DEFAULT, "memtool_region_enter");
    auto leave = find<void (*)()>(RTLD_DEFAULT, "memtool_region_exit");
    auto pause = find<int (*)(const char*, char*, size_t)>(RTLD_DEFAULT, "memtool_pause");
    auto resume = find<int (*)(const char*, char*, size_t)>(RTLD_DEFAULT, "memtool_resume");
    if (!enter || !leave || !pause || !resume) {
        std::printf("not under memtool run\n");
        return 2;
    }
    void *a = nullptr, *b = nullptr, *p = nullptr;
    if (mallocAlign32(&a, 1000000, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc(&b, 500000, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        std::printf("allocation failed\n");
        return 1;
    }
    aclrtFree(b);
    const size_t outside = fake_npu_used_bytes();
    char out[4096];
    if (enter("kv", 1, out, sizeof out) != 0) {
        std::printf("enter: %s\n", out);
        return 1;
    }
    const aclError rc = mallocAlign32(&p, 3000000, ACL_MEM_MALLOC_HUGE_FIRST);
    leave();
    if (rc != ACL_SUCCESS || !p) {
        std::printf("aclrtMallocAlign32 in the region: %d\n", rc);
        return 1;
    }
    auto* bytes = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < 3000000; ++i) bytes[i] = static_cast<uint8_t>(i * 31);
    const size_t held = fake_npu_used_bytes() - outside;
    const int paused = pause("kv", out, sizeof out);
    const size_t whilePaused = fake_npu_used_bytes() - outside;
    const int resumed = resume("kv", out, sizeof out);
    bool same = true;
    for (size_t i = 0; i < 3000000; ++i) same &= bytes[i] == static_cast<uint8_t>(i * 31);
    aclrtFree(p);
    const size_t afterFree = fake_npu_used_bytes() - outside;
    aclrtFree(a);
    std::printf("outside %zu held %zu paused %d %zu resumed %d %s freed %zu pinned %zu left %zu\n",
                outside, held, paused, whilePaused, resumed, same ? "same" : "DIFFERENT", afterFree,
                fake_npu_host_bytes(), fake_npu_used_bytes());
    return 0;
}
