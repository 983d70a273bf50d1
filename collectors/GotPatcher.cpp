#include "collectors/GotPatcher.h"

#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace memtool::collectors {

namespace {

struct DynamicInfo {
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    const ElfW(Rela)* jmprel = nullptr;
    size_t jmprelBytes = 0;
    const ElfW(Rela)* rela = nullptr;
    size_t relaBytes = 0;
    // DT_NEEDED names, as string-table offsets (the first kMaxNeeded of them).
    static constexpr size_t kMaxNeeded = 128;
    ElfW(Xword) needed[kMaxNeeded];
    size_t neededCount = 0;
};

// glibc relocates d_ptr entries of the in-memory dynamic section on most
// architectures, but not all; an address below the load bias is still relative.
uintptr_t absolute(const dl_phdr_info* info, ElfW(Addr) ptr) {
    return ptr < info->dlpi_addr ? info->dlpi_addr + ptr : ptr;
}

bool inRelro(const dl_phdr_info* info, uintptr_t addr) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_GNU_RELRO) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (addr >= start && addr < start + ph.p_memsz) return true;
    }
    return false;
}

bool writeSlot(const dl_phdr_info* info, void** slot, void* value) {
    static const uintptr_t pageSize = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t page = reinterpret_cast<uintptr_t>(slot) & ~(pageSize - 1);
    bool relro = inRelro(info, reinterpret_cast<uintptr_t>(slot));
    if (relro && mprotect(reinterpret_cast<void*>(page), pageSize, PROT_READ | PROT_WRITE) != 0)
        return false;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (relro) mprotect(reinterpret_cast<void*>(page), pageSize, PROT_READ);
    return true;
}

size_t patchTable(const dl_phdr_info* info, const DynamicInfo& dyn, const ElfW(Rela)* table,
                  size_t bytes, const GotHook* hooks, size_t hookCount) {
    size_t patched = 0;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
        const ElfW(Rela)& r = table[i];
        auto type = ELF64_R_TYPE(r.r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64)
            continue;
        const char* name = dyn.strtab + dyn.symtab[ELF64_R_SYM(r.r_info)].st_name;
        for (size_t h = 0; h < hookCount; ++h) {
            if (std::strcmp(name, hooks[h].symbol) != 0) continue;
            auto** slot = reinterpret_cast<void**>(info->dlpi_addr + r.r_offset);
            if (writeSlot(info, slot, hooks[h].replacement)) ++patched;
        }
    }
    return patched;
}

bool readDynamic(const dl_phdr_info* info, DynamicInfo& dyn) {
    const ElfW(Dyn)* dynamic = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
    if (!dynamic) return false;
    for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
            case DT_NEEDED:
                if (dyn.neededCount < DynamicInfo::kMaxNeeded) dyn.needed[dyn.neededCount++] = d->d_un.d_val;
                break;
            case DT_SYMTAB:
                dyn.symtab = reinterpret_cast<const ElfW(Sym)*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_STRTAB:
                dyn.strtab = reinterpret_cast<const char*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_JMPREL:
                dyn.jmprel = reinterpret_cast<const ElfW(Rela)*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_PLTRELSZ:
                dyn.jmprelBytes = d->d_un.d_val;
                break;
            case DT_RELA:
                dyn.rela = reinterpret_cast<const ElfW(Rela)*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_RELASZ:
                dyn.relaBytes = d->d_un.d_val;
                break;
            default:
                break;
        }
    }
    return dyn.symtab && dyn.strtab;
}

}  // namespace

size_t patchModuleImports(const dl_phdr_info* info, const GotHook* hooks, size_t hookCount, const char* needs) {
    DynamicInfo dyn;
    if (!readDynamic(info, dyn)) return 0;
    if (needs) {
        // Imports resolve to libraries the module names (the static linker put the
        // provider in DT_NEEDED), so one that names none of `needs` imports nothing
        // of it: skip its relocations, which run to tens of thousands in libtorch.
        bool found = false;
        for (size_t i = 0; i < dyn.neededCount && !found; ++i)
            found = std::strncmp(dyn.strtab + dyn.needed[i], needs, std::strlen(needs)) == 0;
        if (!found) return 0;
    }
    size_t n = 0;
    if (dyn.jmprel) n += patchTable(info, dyn, dyn.jmprel, dyn.jmprelBytes, hooks, hookCount);
    if (dyn.rela) n += patchTable(info, dyn, dyn.rela, dyn.relaBytes, hooks, hookCount);
    return n;
}

}  // namespace memtool::collectors
