#pragma once
// Redirects one loaded module's own imports (its GOT slots) to hooks, so that
// only that module's calls are seen: libc10's posix_memalign and free are the
// CPU storages' allocator, while every other free in the process stays untouched.

#if !defined(__x86_64__)
#error \
    "memtool's collector patches x86-64 relocations (GotPatcher.cpp) and unwinds through libunwind's x86-64 entry points (NativeUnwinder.cpp); port both to build for this architecture"
#endif

#include <link.h>

#include <cstddef>
#include <cstdint>

#include "collectors/engine/MappedTable.h"

namespace memtool::collectors {

struct GotHook {
    const char* symbol;
    void* replacement;
};

// A hook whose replacement has exactly the type of the function it replaces, as
// a header declares it (libc's, or collectors/cuda/CudaRuntimeDecls.h): a hook with
// another signature does not compile.
#define MEMTOOL_GOT_HOOK(function, replacement)                                                \
    ::memtool::collectors::GotHook {                                                           \
#function, reinterpret_cast < void*>(static_cast <decltype(&::function)>(replacement)) \
    }

// The function a hook stands in for, found by name in the process and typed as
// declared: `static auto real = MEMTOOL_ORIGINAL(cudaMalloc);`. The collector
// defines none of these names, so the first definition is the library's.
#define MEMTOOL_ORIGINAL(function) \
    (reinterpret_cast<decltype(&::function)>(::memtool::collectors::findOriginal(#function)))
void* findOriginal(const char* symbol);
// `symbol` in the first loaded object whose file name starts with `fileName`
// (libcudart.so, libascendcl.so), whichever scope the program loaded it into: a
// library an extension module loaded RTLD_LOCAL is in no global lookup. Null
// when none has it.
void* findInLoaded(const char* fileName, const char* symbol);

// A slot patchModuleImports wrote, and what it held before.
struct PatchedSlot {
    void** slot;
    void* previous;
};

// Writes each hook into every JUMP_SLOT / GLOB_DAT / 64 relocation of `info`'s
// module that names the symbol (lifting RELRO protection for the write and
// restoring it). With `needs`, only a module with a DT_NEEDED entry starting with
// it is looked at. Malformed dynamic sections (symbol or string indices out of
// their tables, slots outside the module) are skipped, not followed. Each slot
// written goes into `log` when one is given. Returns the number of slots written.
size_t patchModuleImports(const dl_phdr_info* info, const GotHook* hooks, size_t hookCount,
                          const char* needs = nullptr, MappedArray<PatchedSlot>* log = nullptr);

// Puts back what `log` holds for slots inside `info`'s module, and drops them
// from the log. Returns the number of slots restored.
size_t restoreModuleImports(const dl_phdr_info* info, MappedArray<PatchedSlot>& log);

}  // namespace memtool::collectors
