#pragma once
// One module's ELF symbols, sorted once, so that naming an address is a binary
// search. libdw's dwfl_module_addrinfo scans the whole symbol table on every call:
// libtorch_cpu has ~250,000 symbols, and a training run's few hundred distinct
// return addresses cost the CLI most of a CPU-second that way. The answer is the
// same as dwfl_module_addrinfo's (its preference rules are reproduced here:
// globals before locals, the closest start, binding, size; sizeless assembly labels
// last), which tests/cli/ModuleSymbolsTest.cpp checks against libdw itself. One
// difference, on files no linker writes: a sized symbol with an empty name that
// is not the string table's first byte still bounds where a sizeless label may
// start (names are read only for the symbols a search picks).

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace memtool::cli {

class ModuleSymbols {
public:
    // Reads the module's symbol table (.symtab where there is one, else .dynsym).
    explicit ModuleSymbols(Dwfl_Module* module);
    ModuleSymbols(const ModuleSymbols&) = delete;
    ModuleSymbols& operator=(const ModuleSymbols&) = delete;

    // The symbol dwfl_module_addrinfo names for `address` (an adjusted address,
    // as libdwfl's): its name, valid while the Dwfl lives, or null.
    const char* name(uint64_t address) const;

private:
    // 16 bytes: tens of thousands of them are written once a run (libtorch_cpu's
    // 34,000), and on a VM each new page they take costs more than filling it.
    // The name is read from the symbol table by index, for the few a search meets.
    struct Symbol {
        uint64_t start;
        uint32_t size;  // kBigSize: in bigSizes_, by index
        uint32_t bits;  // index << 3 | binding << 1 | special
        // In the symbol table: ties go to the earlier one.
        uint32_t index() const { return bits >> 3; }
        // 3 global, 2 weak, 1 local, 0 other (libdw's order).
        uint8_t binding() const { return static_cast<uint8_t>((bits >> 1) & 3); }
        // In no section of the file (SHN_ABS and the like): for labels.
        bool special() const { return bits & 1; }
    };
    static constexpr uint32_t kBigSize = UINT32_MAX;
    // Global or local symbols by start, with the largest end of any symbol at or
    // before each position (so a backward walk knows when nothing further back
    // can contain an address).
    struct Table {
        std::vector<Symbol> symbols;
        std::vector<uint64_t> maxEndUpTo;
    };
    struct Search;  // one lookup's state, as libdw's scan keeps it

    void seal(Table& table) const;
    void searchTable(const Table& table, Search& s) const;
    uint32_t sectionOf(uint64_t address) const;
    uint64_t sizeOf(const Symbol& s) const;
    const char* nameOf(const Symbol& s) const;

    Dwfl_Module* module_;
    Table globals_;
    Table locals_;
    std::vector<std::pair<uint32_t, uint64_t>> bigSizes_;  // (index, size), by index
    bool hasLocalPass_ = false;  // libdw scans locals only when there are globals apart
};

}  // namespace memtool::cli
