// GotPatcher against real loaded objects: a target library that calls a provider
// library's function through a RELRO-protected GOT slot.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <string>

#include "collectors/preload/GotPatcher.h"
#include "tests/collectors/got/GotProvider.h"

using namespace memtool::collectors;

namespace {

int replacement() { return 2; }

struct Found {
    const char* suffix;
    dl_phdr_info info{};
    bool found = false;
};

// The loaded module whose path ends with `suffix`.
dl_phdr_info moduleNamed(const char* suffix) {
    Found f{suffix};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto* f = static_cast<Found*>(data);
            std::string name = info->dlpi_name ? info->dlpi_name : "";
            if (name.size() >= std::strlen(f->suffix) &&
                name.compare(name.size() - std::strlen(f->suffix), std::string::npos, f->suffix) ==
                    0) {
                f->info = *info;
                f->found = true;
                return 1;
            }
            return 0;
        },
        &f);
    EXPECT_TRUE(f.found) << suffix;
    return f.info;
}

// Whether the module's dynamic section has an entry tagged `tag`.
bool hasDynamicTag(const dl_phdr_info& info, ElfW(Sxword) tag) {
    for (int i = 0; i < info.dlpi_phnum; ++i) {
        if (info.dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const auto* d =
            reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
        for (; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == tag) return true;
    }
    return false;
}

}  // namespace

// That a hook of another type does not compile is checked by the CTest
// got_hook_type_is_checked (got/HookTypes.cpp).

TEST(GotPatcher, RedirectsOneModulesImportAndRestoresIt) {
    void* target = dlopen(GOT_TARGET_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(target, nullptr) << dlerror();
    auto call = reinterpret_cast<int (*)()>(dlsym(target, "got_target_call"));
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(call(), 1);

    dl_phdr_info info = moduleNamed("libgot_target.so");
    const GotHook hooks[] = {MEMTOOL_GOT_HOOK(got_provider_value, &replacement)};
    MappedArray<PatchedSlot> log;
    EXPECT_EQ(patchModuleImports(&info, hooks, 1, nullptr, &log), 1u);
    EXPECT_EQ(call(), 2);
    ASSERT_EQ(log.size(), 1u);
    // Patching again finds the slot already pointing at the hook: nothing to log twice.
    EXPECT_EQ(patchModuleImports(&info, hooks, 1, nullptr, &log), 0u);
    EXPECT_EQ(log.size(), 1u);
    // The provider itself calls nothing of that name.
    dl_phdr_info provider = moduleNamed("libgot_provider.so");
    EXPECT_EQ(patchModuleImports(&provider, hooks, 1, nullptr, &log), 0u);

    EXPECT_EQ(restoreModuleImports(&info, log), 1u);
    EXPECT_EQ(call(), 1);
    EXPECT_EQ(log.size(), 0u);
    dlclose(target);
}

TEST(GotPatcher, NeedsFiltersByDtNeeded) {
    void* target = dlopen(GOT_TARGET_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(target, nullptr) << dlerror();
    auto call = reinterpret_cast<int (*)()>(dlsym(target, "got_target_call"));
    dl_phdr_info info = moduleNamed("libgot_target.so");
    const GotHook hooks[] = {MEMTOOL_GOT_HOOK(got_provider_value, &replacement)};
    EXPECT_EQ(patchModuleImports(&info, hooks, 1, "libcudart"),
              0u);  // does not link it: not even looked at
    EXPECT_EQ(call(), 1);
    MappedArray<PatchedSlot> log;
    EXPECT_EQ(patchModuleImports(&info, hooks, 1, "libgot_provider", &log), 1u);
    EXPECT_EQ(call(), 2);
    EXPECT_EQ(restoreModuleImports(&info, log), 1u);
    EXPECT_EQ(call(), 1);
    dlclose(target);
}

// The hooked name is found through whichever hash table the module has: its
// imports are read before DT_GNU_HASH's symoffset, or through DT_HASH's chains.
TEST(GotPatcher, FindsAnImportThroughEitherHashTable) {
    const struct {
        const char* path;
        const char* suffix;
        ElfW(Sxword) has, lacks;
    } builds[] = {{GOT_WIDE_GNU_LIB, "libgot_wide_gnu.so", DT_GNU_HASH, DT_HASH},
                  {GOT_WIDE_SYSV_LIB, "libgot_wide_sysv.so", DT_HASH, DT_GNU_HASH}};
    for (const auto& b : builds) {
        SCOPED_TRACE(b.suffix);
        void* lib = dlopen(b.path, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(lib, nullptr) << dlerror();
        auto call = reinterpret_cast<int (*)()>(dlsym(lib, "got_wide_call"));
        auto pointer = reinterpret_cast<int (*(*)())()>(dlsym(lib, "got_wide_pointer"));
        ASSERT_NE(call, nullptr);
        ASSERT_NE(pointer, nullptr);
        dl_phdr_info info = moduleNamed(b.suffix);
        EXPECT_TRUE(hasDynamicTag(info, b.has));
        EXPECT_FALSE(hasDynamicTag(info, b.lacks));
        const GotHook hooks[] = {MEMTOOL_GOT_HOOK(got_target_call, &replacement),
                                 MEMTOOL_GOT_HOOK(got_provider_value, &replacement)};
        MappedArray<PatchedSlot> log;
        EXPECT_EQ(patchModuleImports(&info, hooks, 2, nullptr, &log), 1u);  // one GLOB_DAT
        EXPECT_EQ(call(), 2);
        EXPECT_EQ(pointer(), &replacement);
        EXPECT_EQ(restoreModuleImports(&info, log), 1u);
        EXPECT_EQ(call(), 1);
        EXPECT_EQ(pointer(), &got_provider_value);
        dlclose(lib);
    }
}

// A function the module exports and calls through its own PLT is found in the GNU
// hash table's chains, among ninety other exports.
TEST(GotPatcher, FindsAnExportTheModuleCallsItself) {
    void* lib = dlopen(GOT_SELF_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto call = reinterpret_cast<int (*)()>(dlsym(lib, "got_self_call"));
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(call(), 1);
    dl_phdr_info info = moduleNamed("libgot_self.so");
    ASSERT_TRUE(hasDynamicTag(info, DT_GNU_HASH));
    const GotHook hooks[] = {{"got_self_value", reinterpret_cast<void*>(&replacement)}};
    MappedArray<PatchedSlot> log;
    EXPECT_EQ(patchModuleImports(&info, hooks, 1, nullptr, &log), 1u);
    EXPECT_EQ(call(), 2);
    // A name the module neither imports nor exports patches nothing.
    const GotHook absent[] = {{"got_self_absent", reinterpret_cast<void*>(&replacement)}};
    EXPECT_EQ(patchModuleImports(&info, absent, 1, nullptr, &log), 0u);
    EXPECT_EQ(restoreModuleImports(&info, log), 1u);
    EXPECT_EQ(call(), 1);
    dlclose(lib);
}

TEST(GotPatcher, FindsTypedOriginals) {
    auto original = MEMTOOL_ORIGINAL(got_provider_value);
    EXPECT_EQ(original, &got_provider_value);  // typed as declared: comparable without a cast
    EXPECT_EQ(original(), 1);
}
