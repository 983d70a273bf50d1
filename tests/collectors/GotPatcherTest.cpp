// GotPatcher against real loaded objects: a target library that calls a provider
// library's function through a RELRO-protected GOT slot.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <string>

#include "collectors/GotPatcher.h"
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

TEST(GotPatcher, FindsTypedOriginals) {
    auto original = MEMTOOL_ORIGINAL(got_provider_value);
    EXPECT_EQ(original, &got_provider_value);  // typed as declared: comparable without a cast
    EXPECT_EQ(original(), 1);
}
