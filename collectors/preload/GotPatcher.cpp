#include "collectors/preload/GotPatcher.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "collectors/engine/ModuleName.h"
#include "collectors/stacks/NativeUnwinder.h"

namespace memtool::collectors {

namespace {

struct DynamicInfo {
    const ElfW(Sym) * symtab = nullptr;
    size_t symbolCount = 0;  // from DT_HASH or DT_GNU_HASH; 0: unknown (nothing is patched)
    const char* strtab = nullptr;
    size_t strtabBytes = 0;
    const ElfW(Rela) * jmprel = nullptr;
    size_t jmprelBytes = 0;
    const ElfW(Rela) * rela = nullptr;
    size_t relaBytes = 0;
    // DT_RELACOUNT: how many of DT_RELA's entries, from its start, are relative
    // relocations (the static linker sorts them first; glibc's loader relies on it
    // too). They name no symbol: libtorch_cpu has 113,896 of them, 2.7 MB to read.
    size_t relativeCount = 0;
    const uint32_t* hash = nullptr;
    const uint32_t* gnuHash = nullptr;
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

// DT_GNU_HASH's parts: symbols from symoffset on are hashed, bucket b holds the
// first of its chain, and chain[i - symoffset] is symbol i's hash with bit 0
// set on the last of a chain.
struct GnuHashTable {
    uint32_t nbuckets, symoffset;
    const uint32_t* buckets;
    const uint32_t* chain;
};

GnuHashTable gnuHashTable(const uint32_t* table) {
    const uint32_t bloomWords = table[2];
    const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(table + 4);
    const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloomWords);
    return {table[0], table[1], buckets, buckets + table[0]};
}

// The number of dynamic symbols. DT_HASH says it outright (nchain); DT_GNU_HASH
// only through its chains: the highest hashed symbol ends the table, and the
// unhashed ones (imports) come before symoffset.
size_t countSymbols(const DynamicInfo& dyn) {
    if (dyn.hash) return dyn.hash[1];
    if (!dyn.gnuHash) return 0;
    const GnuHashTable t = gnuHashTable(dyn.gnuHash);
    uint32_t last = 0;
    for (uint32_t b = 0; b < t.nbuckets; ++b)
        if (t.buckets[b] > last) last = t.buckets[b];
    if (last < t.symoffset) return t.symoffset;
    while (!(t.chain[last - t.symoffset] & 1)) ++last;
    return last + 1;
}

bool readDynamic(const dl_phdr_info* info, DynamicInfo& dyn) {
    const ElfW(Dyn)* dynamic = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dynamic =
                reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
    if (!dynamic) return false;
    for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
            case DT_NEEDED:
                if (dyn.neededCount < DynamicInfo::kMaxNeeded)
                    dyn.needed[dyn.neededCount++] = d->d_un.d_val;
                break;
            case DT_SYMTAB:
                dyn.symtab = reinterpret_cast<const ElfW(Sym)*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_STRTAB:
                dyn.strtab = reinterpret_cast<const char*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_STRSZ:
                dyn.strtabBytes = d->d_un.d_val;
                break;
            case DT_HASH:
                dyn.hash = reinterpret_cast<const uint32_t*>(absolute(info, d->d_un.d_ptr));
                break;
            case DT_GNU_HASH:
                dyn.gnuHash = reinterpret_cast<const uint32_t*>(absolute(info, d->d_un.d_ptr));
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
            case DT_RELACOUNT:
                dyn.relativeCount = d->d_un.d_val;
                break;
            default:
                break;
        }
    }
    if (!dyn.symtab || !dyn.strtab || dyn.strtabBytes == 0) return false;
    dyn.symbolCount = countSymbols(dyn);
    return dyn.symbolCount > 0;
}

// The name at a string-table offset, or null when it does not lie wholly inside.
const char* stringAt(const DynamicInfo& dyn, size_t offset) {
    if (offset >= dyn.strtabBytes) return nullptr;
    const char* s = dyn.strtab + offset;
    return memchr(s, '\0', dyn.strtabBytes - offset) ? s : nullptr;
}

// The name of dynamic symbol `index`; null for the null symbol, an index past the
// table, or a name that does not lie whole in the string table.
const char* symbolName(const DynamicInfo& dyn, size_t index) {
    if (index == 0 || index >= dyn.symbolCount) return nullptr;
    return stringAt(dyn, dyn.symtab[index].st_name);
}

// Where a GOT slot may legitimately be: inside one of the module's writable or
// RELRO load segments.
struct SlotPlace {
    bool valid = false;
    bool relro = false;
};

SlotPlace placeOf(const dl_phdr_info* info, uintptr_t addr) {
    SlotPlace place;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        const bool inside = addr >= start && addr + sizeof(void*) <= start + ph.p_memsz;
        if (!inside) continue;
        if (ph.p_type == PT_GNU_RELRO) place.relro = true;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W)) place.valid = true;
    }
    place.valid |= place.relro;
    return place;
}

bool writeSlot(void** slot, void* value, bool relro) {
    static const uintptr_t pageSize = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t page = reinterpret_cast<uintptr_t>(slot) & ~(pageSize - 1);
    if (relro && mprotect(reinterpret_cast<void*>(page), pageSize, PROT_READ | PROT_WRITE) != 0)
        return false;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (relro) mprotect(reinterpret_cast<void*>(page), pageSize, PROT_READ);
    return true;
}

bool isImportRelocation(uint64_t type) {
    return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT || type == R_X86_64_64;
}

// The dynamic symbols named like a hook, by index: a relocation names its symbol
// by index, so each is then one comparison of integers rather than a string
// comparison per hook (libtorch_cpu has 73,000 import relocations; comparing
// their names was ~5 ms of `import torch`). Found through the module's hash
// table: DT_HASH chains hold every symbol; DT_GNU_HASH holds those from
// symoffset on, and the ones before it (the imports) are read one by one.
// An index's hooks are added by one consider(), in the hooks' order.
struct HookSymbols {
    static constexpr size_t kMax = 64;
    uint32_t index[kMax];
    uint32_t hook[kMax];
    size_t count = 0;
    bool overflow = false;  // more than kMax: names are compared per relocation
    uint64_t bits = 0;      // bit (index % 64) of each index: most relocations fail it

    void consider(const DynamicInfo& dyn, uint32_t i, const GotHook* hooks, size_t hookCount) {
        const char* name = symbolName(dyn, i);
        if (!name) return;
        for (size_t h = 0; h < hookCount; ++h) {
            if (std::strcmp(name, hooks[h].symbol) != 0) continue;
            for (size_t k = 0; k < count; ++k)
                if (index[k] == i && hook[k] == h) return;  // met twice (a looping chain)
            if (count == kMax) {
                overflow = true;
                return;
            }
            index[count] = i;
            hook[count++] = static_cast<uint32_t>(h);
            bits |= uint64_t(1) << (i % 64);
        }
    }
};

uint32_t sysvHashOf(const char* s) {
    uint32_t h = 0;
    for (; *s; ++s) {
        h = (h << 4) + static_cast<unsigned char>(*s);
        const uint32_t g = h & 0xf0000000u;
        h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

uint32_t gnuHashOf(const char* s) {
    uint32_t h = 5381;
    for (; *s; ++s) h = h * 33 + static_cast<unsigned char>(*s);
    return h;
}

HookSymbols findHookSymbols(const DynamicInfo& dyn, const GotHook* hooks, size_t hookCount) {
    HookSymbols found;
    if (dyn.gnuHash) {
        const GnuHashTable t = gnuHashTable(dyn.gnuHash);
        const uint32_t unhashed = t.symoffset < dyn.symbolCount ? t.symoffset : dyn.symbolCount;
        for (uint32_t i = 1; i < unhashed; ++i) found.consider(dyn, i, hooks, hookCount);
        for (size_t h = 0; h < hookCount && t.nbuckets > 0; ++h) {
            const uint32_t want = gnuHashOf(hooks[h].symbol);
            for (uint32_t i = t.buckets[want % t.nbuckets]; i >= t.symoffset && i < dyn.symbolCount;
                 ++i) {
                const uint32_t entry = t.chain[i - t.symoffset];
                if ((entry | 1) == (want | 1)) found.consider(dyn, i, hooks, hookCount);
                if (entry & 1) break;  // the chain's last
            }
        }
    } else if (dyn.hash) {
        const uint32_t nbucket = dyn.hash[0], nchain = dyn.hash[1];
        const uint32_t* bucket = dyn.hash + 2;
        const uint32_t* chain = bucket + nbucket;
        for (size_t h = 0; h < hookCount && nbucket > 0; ++h) {
            uint32_t i = bucket[sysvHashOf(hooks[h].symbol) % nbucket];
            for (uint32_t steps = 0; i != 0 && i < nchain && steps < nchain; ++steps, i = chain[i])
                found.consider(dyn, i, hooks, hookCount);
        }
    }
    return found;
}

// Calls each(h) for every hook `r` names, in the hooks' order.
template <typename Each>
void forHooksOf(const DynamicInfo& dyn, const HookSymbols& symbols, const ElfW(Rela) & r,
                const GotHook* hooks, size_t hookCount, Each each) {
    const size_t symbol = ELF64_R_SYM(r.r_info);
    if (!symbols.overflow) {
        if (!((symbols.bits >> (symbol % 64)) & 1)) return;
        for (size_t k = 0; k < symbols.count; ++k)
            if (symbols.index[k] == symbol) each(symbols.hook[k]);
        return;
    }
    const char* name = symbolName(dyn, symbol);
    if (!name) return;
    for (size_t h = 0; h < hookCount; ++h)
        if (std::strcmp(name, hooks[h].symbol) == 0) each(h);
}

size_t patchTable(const dl_phdr_info* info, const DynamicInfo& dyn, const HookSymbols& symbols,
                  const ElfW(Rela) * table, size_t bytes, const GotHook* hooks, size_t hookCount,
                  MappedArray<PatchedSlot>* log) {
    size_t patched = 0;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
        const ElfW(Rela)& r = table[i];
        if (!isImportRelocation(ELF64_R_TYPE(r.r_info))) continue;
        forHooksOf(dyn, symbols, r, hooks, hookCount, [&](size_t h) {
            const uintptr_t addr = info->dlpi_addr + r.r_offset;
            const SlotPlace place = placeOf(info, addr);
            if (!place.valid) return;
            auto** slot = reinterpret_cast<void**>(addr);
            void* previous = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (previous == hooks[h].replacement) return;  // patched already
            if (!writeSlot(slot, hooks[h].replacement, place.relro)) return;
            ++patched;
            if (log) log->push(PatchedSlot{slot, previous});
        });
    }
    return patched;
}

}  // namespace

void* findOriginal(const char* symbol) { return dlsym(RTLD_DEFAULT, symbol); }

void* findInLoaded(const char* fileName, const char* symbol) {
    struct Search {
        const char* fileName;
        const char* symbol;
        void* found;
    } search{fileName, symbol, nullptr};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* arg) {
            auto* s = static_cast<Search*>(arg);
            const char* path = info->dlpi_name ? info->dlpi_name : "";
            if (!fileNameStartsWith(path, s->fileName)) return 0;
            // The handle is kept: its functions are called for as long as the process runs.
            void* lib = realDlopen(path, RTLD_LAZY | RTLD_NOLOAD);
            s->found = lib ? dlsym(lib, s->symbol) : nullptr;
            return s->found ? 1 : 0;
        },
        &search);
    return search.found;
}

size_t patchModuleImports(const dl_phdr_info* info, const GotHook* hooks, size_t hookCount,
                          const char* needs, MappedArray<PatchedSlot>* log) {
    DynamicInfo dyn;
    if (!readDynamic(info, dyn)) return 0;
    if (needs) {
        // Imports resolve to libraries the module names (the static linker put the
        // provider in DT_NEEDED), so one that names none of `needs` imports nothing
        // of it: skip its relocations, which run to tens of thousands in libtorch.
        bool found = false;
        for (size_t i = 0; i < dyn.neededCount && !found; ++i) {
            const char* name = stringAt(dyn, dyn.needed[i]);
            found = name && std::strncmp(name, needs, std::strlen(needs)) == 0;
        }
        if (!found) return 0;
    }
    const HookSymbols symbols = findHookSymbols(dyn, hooks, hookCount);
    if (!symbols.overflow && symbols.count == 0) return 0;  // it names none of them
    size_t n = 0;
    if (dyn.jmprel)
        n += patchTable(info, dyn, symbols, dyn.jmprel, dyn.jmprelBytes, hooks, hookCount, log);
    if (dyn.rela) {
        const size_t entries = dyn.relaBytes / sizeof(ElfW(Rela));
        const size_t skip = dyn.relativeCount < entries ? dyn.relativeCount : entries;
        n += patchTable(info, dyn, symbols, dyn.rela + skip, (entries - skip) * sizeof(ElfW(Rela)),
                        hooks, hookCount, log);
    }
    return n;
}

size_t restoreModuleImports(const dl_phdr_info* info, MappedArray<PatchedSlot>& log) {
    size_t restored = 0, kept = 0;
    for (size_t i = 0; i < log.size(); ++i) {
        const PatchedSlot s = log[i];
        const SlotPlace place = placeOf(info, reinterpret_cast<uintptr_t>(s.slot));
        if (place.valid && writeSlot(s.slot, s.previous, place.relro)) {
            ++restored;
            continue;
        }
        log[kept++] = s;
    }
    log.truncate(kept);
    return restored;
}

}  // namespace memtool::collectors
