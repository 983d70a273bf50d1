#pragma once
// Native return addresses -> function, file, line, with elfutils libdwfl over the
// target's module map (as the collector announces it, module by module); code
// inlined at the address gives a frame per inlined function (DWARF's inlined
// subroutine scopes). Results are cached per address, so each distinct address's
// debug info is read once; one ElfSymbolizer serves one process. Only the modules
// a stack touches are opened, and each one's symbols are sorted once
// (ModuleSymbols): naming an address is then a binary search.

#include <cstdint>
#include <memory>
#include <vector>

#include "cli/Symbolizer.h"
#include "core/Records.h"

namespace memtool::cli {

class ElfSymbolizer : public Symbolizer {
public:
    ElfSymbolizer();
    explicit ElfSymbolizer(const std::vector<core::ModuleRecord>& modules);
    ~ElfSymbolizer() override;
    ElfSymbolizer(const ElfSymbolizer&) = delete;
    ElfSymbolizer& operator=(const ElfSymbolizer&) = delete;

    void addModule(const core::ModuleRecord& module);
    const std::vector<core::Frame>& symbolize(uint64_t ip) override;
    // `ip` was symbolized already (its frames are kept).
    bool known(uint64_t ip) const;
    // Lets go of the object files it opened (and what it read from them); the
    // frames named so far stay, and an address named later opens what it needs.
    void closeFiles();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace memtool::cli
