#pragma once
// Redirects one loaded module's own imports (its GOT slots) to hooks, so that
// only that module's calls are seen: libc10's posix_memalign and free are the
// CPU storages' allocator, while every other free in the process stays untouched.

#include <link.h>

#include <cstddef>

namespace memtool::collectors {

struct GotHook {
    const char* symbol;
    void* replacement;
};

// Writes each hook into every JUMP_SLOT / GLOB_DAT / 64 relocation of `info`'s
// module that names the symbol (lifting RELRO protection for the write and
// restoring it). With `needs`, only a module with a DT_NEEDED entry starting with
// it is looked at. Returns the number of slots written.
size_t patchModuleImports(const dl_phdr_info* info, const GotHook* hooks, size_t hookCount,
                          const char* needs = nullptr);

}  // namespace memtool::collectors
