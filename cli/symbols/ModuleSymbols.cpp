#include "cli/symbols/ModuleSymbols.h"

#include <elf.h>
#include <gelf.h>

#include <algorithm>

namespace memtool::cli {

namespace {

uint8_t bindingRank(unsigned char info) {
    switch (GELF_ST_BIND(info)) {
        case STB_GLOBAL:
            return 3;
        case STB_WEAK:
            return 2;
        case STB_LOCAL:
            return 1;
        default:
            return 0;
    }
}

}  // namespace

// What libdw's scan (libdwfl/dwfl_module_addrsym.c, __libdwfl_addrsym) keeps
// between symbols: the best sized symbol containing the address, the sizeless
// fallback, and the lowest address a sizeless label may have (the end of every
// symbol that starts at or below the address).
struct ModuleSymbols::Search {
    uint64_t address;
    const Symbol* closest = nullptr;
    const Symbol* sizeless = nullptr;
    uint64_t minLabel = 0;
};

void ModuleSymbols::seal(Table& table) const {
    std::vector<Symbol>& symbols = table.symbols;
    // By start, ties in table order (the order they were added): a stable radix
    // sort of their positions, 11 bits of (start - lowest start) a pass. A
    // comparison sort of libtorch_cpu's 34,000 symbols was a third of its cost.
    const size_t n = symbols.size();
    if (n == 0) return;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const Symbol& s : symbols) lo = std::min(lo, s.start), hi = std::max(hi, s.start);
    // The order and the radix passes' other buffer, as many bytes as maxEndUpTo
    // below, which takes them again once they are given back: pages that are
    // already the process's cost nothing more.
    std::vector<uint32_t> scratch(2 * n);
    uint32_t* order = scratch.data();
    uint32_t* next = order + n;
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    constexpr unsigned kBits = 11;
    for (unsigned shift = 0; shift < 64 && ((hi - lo) >> shift) != 0; shift += kBits) {
        size_t counts[(1u << kBits) + 1] = {};
        auto digit = [&](uint32_t i) {
            return ((symbols[i].start - lo) >> shift) & ((1u << kBits) - 1);
        };
        for (size_t k = 0; k < n; ++k) ++counts[digit(order[k]) + 1];
        for (size_t d = 1; d <= (1u << kBits); ++d) counts[d] += counts[d - 1];
        for (size_t k = 0; k < n; ++k) next[counts[digit(order[k])]++] = order[k];
        std::swap(order, next);
    }
    // Moved into that order in place, a cycle of the permutation at a time (`next`
    // marks the places done): a sorted copy would take as many new pages again.
    constexpr uint32_t kDone = UINT32_MAX;
    std::fill(next, next + n, 0);
    for (size_t start = 0; start < n; ++start) {
        if (next[start] == kDone) continue;
        const Symbol first = symbols[start];
        size_t at = start;
        for (;;) {
            next[at] = kDone;
            const size_t from = order[at];
            if (from == start) {
                symbols[at] = first;
                break;
            }
            symbols[at] = symbols[from];
            at = from;
        }
    }
    std::vector<uint32_t>().swap(scratch);
    table.maxEndUpTo.resize(symbols.size());
    uint64_t maxEnd = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
        maxEnd = std::max(maxEnd, symbols[i].start + sizeOf(symbols[i]));
        table.maxEndUpTo[i] = maxEnd;
    }
}

ModuleSymbols::ModuleSymbols(Dwfl_Module* module) : module_(module) {
    const int count = dwfl_module_getsymtab(module);
    const int firstGlobal = dwfl_module_getsymtab_first_global(module);
    if (count <= 0 || firstGlobal < 0) return;
    // Locals come first in the table; 0 means a dynsym read from program headers,
    // all of it searched as globals.
    const int globalsFrom = firstGlobal == 0 ? 1 : firstGlobal;
    hasLocalPass_ = firstGlobal > 1;
    globals_.symbols.reserve(static_cast<size_t>(count - globalsFrom));
    if (hasLocalPass_) locals_.symbols.reserve(static_cast<size_t>(globalsFrom));
    for (int i = 1; i < count; ++i) {
        GElf_Sym sym;
        GElf_Addr address = 0;
        GElf_Word section = 0;
        const char* name =
            dwfl_module_getsym_info(module, i, &sym, &address, &section, nullptr, nullptr);
        // A name's bytes are not read here: 34,000 names spread over megabytes
        // of string table would be a cache miss each. Index 0 is the empty name;
        // another empty one is skipped where a search meets it.
        if (!name || sym.st_name == 0 || sym.st_shndx == SHN_UNDEF) continue;
        const int type = GELF_ST_TYPE(sym.st_info);
        if (type == STT_SECTION || type == STT_FILE || type == STT_TLS) continue;
        if (static_cast<uint32_t>(i) > (UINT32_MAX >> 3)) break;  // 536 million: no real file
        const bool big = sym.st_size >= kBigSize;
        if (big) bigSizes_.emplace_back(static_cast<uint32_t>(i), sym.st_size);
        const Symbol s{address, big ? kBigSize : static_cast<uint32_t>(sym.st_size),
                       static_cast<uint32_t>(i) << 3 | uint32_t{bindingRank(sym.st_info)} << 1 |
                           (section >= SHN_LORESERVE ? 1u : 0u)};
        (i >= globalsFrom ? globals_ : locals_).symbols.push_back(s);
    }
    seal(globals_);
    seal(locals_);
}

uint64_t ModuleSymbols::sizeOf(const Symbol& s) const {
    if (s.size != kBigSize) return s.size;
    auto it = std::lower_bound(bigSizes_.begin(), bigSizes_.end(),
                               std::make_pair(s.index(), uint64_t{0}));
    return it != bigSizes_.end() && it->first == s.index() ? it->second : kBigSize;
}

// As the constructor read it: a name, for a symbol it kept.
const char* ModuleSymbols::nameOf(const Symbol& s) const {
    GElf_Sym sym;
    GElf_Addr address = 0;
    GElf_Word section = 0;
    const char* name = dwfl_module_getsym_info(module_, static_cast<int>(s.index()), &sym, &address,
                                               &section, nullptr, nullptr);
    return name ? name : "";
}

uint32_t ModuleSymbols::sectionOf(uint64_t address) const {
    Dwarf_Addr a = address, bias = 0;
    Elf_Scn* scn = dwfl_module_address_section(module_, &a, &bias);
    return scn ? static_cast<uint32_t>(elf_ndxscn(scn)) : SHN_UNDEF;
}

void ModuleSymbols::searchTable(const Table& t, Search& s) const {
    const uint64_t address = s.address;
    auto above = std::upper_bound(t.symbols.begin(), t.symbols.end(), address,
                                  [](uint64_t a, const Symbol& sym) { return a < sym.start; });
    const size_t end = static_cast<size_t>(above - t.symbols.begin());
    if (end == 0) return;
    s.minLabel = std::max(s.minLabel, t.maxEndUpTo[end - 1]);

    // Sized symbols containing the address, taken in table order as libdw does:
    // a closer start wins, or a stronger binding; at the same start a smaller
    // size of no weaker binding, or a stronger binding of no larger size.
    std::vector<const Symbol*> containing;
    for (size_t k = end; k-- > 0 && t.maxEndUpTo[k] > address;) {
        const Symbol& sym = t.symbols[k];
        if (sym.size != 0 && address - sym.start < sizeOf(sym) && *nameOf(sym))
            containing.push_back(&sym);
    }
    std::sort(containing.begin(), containing.end(),
              [](const Symbol* a, const Symbol* b) { return a->index() < b->index(); });
    for (const Symbol* c : containing) {
        const Symbol* best = s.closest;
        if (!best || best->start < c->start || best->binding() < c->binding()) {
            s.closest = c;
        } else if (best->start == c->start &&
                   ((sizeOf(*best) > sizeOf(*c) && best->binding() <= c->binding()) ||
                    (sizeOf(*best) >= sizeOf(*c) && best->binding() < c->binding()))) {
            s.closest = c;
        }
    }
    if (s.closest) return;

    // No sized symbol: an assembly label without a size, at or above every end
    // below the address, in the address's section; the last one libdw meets.
    const Symbol* label = nullptr;
    uint32_t addressSection = 0;
    bool sectionKnown = false;
    for (size_t k = end; k-- > 0 && t.symbols[k].start >= s.minLabel;) {
        const Symbol& sym = t.symbols[k];
        if (sym.size != 0 || (label && label->index() > sym.index()) || !*nameOf(sym)) continue;
        bool sameSection;
        if (sym.special()) {
            sameSection = sym.start == address;
        } else {
            if (!sectionKnown) {
                addressSection = sectionOf(address);
                sectionKnown = true;
            }
            sameSection = sectionOf(sym.start) == addressSection;
        }
        if (sameSection) label = &sym;
    }
    if (label) s.sizeless = label;
}

const char* ModuleSymbols::name(uint64_t address) const {
    Search s{address};
    searchTable(globals_, s);
    if (!s.closest && hasLocalPass_ && (!s.sizeless || s.sizeless->start != address))
        searchTable(locals_, s);
    if (s.closest) return nameOf(*s.closest);
    if (s.sizeless && s.sizeless->start >= s.minLabel) return nameOf(*s.sizeless);
    return nullptr;
}

}  // namespace memtool::cli
