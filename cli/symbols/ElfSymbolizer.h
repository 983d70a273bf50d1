#pragma once
// Native return addresses -> function, file, line, with elfutils libdwfl over the
// target's module map (as the collector announces it, module by module); code
// inlined at the address gives a frame per inlined function (DWARF's inlined
// subroutine scopes). Results are cached per address; one ElfSymbolizer serves
// one process. The object files themselves are the run's (ObjectFiles): only the
// ones a stack touches are opened, once for every process that maps them, and an
// address in one is named once for all of them.

#include <cstdint>
#include <memory>
#include <vector>

#include "cli/symbols/ObjectFiles.h"
#include "core/Records.h"
#include "trace/Symbolizer.h"

namespace memtool::cli {

class ElfSymbolizer : public Symbolizer {
public:
    ElfSymbolizer();  // over the run's store of object files
    explicit ElfSymbolizer(ObjectFiles& store);
    explicit ElfSymbolizer(const std::vector<core::ModuleRecord>& modules);
    ~ElfSymbolizer() override;
    ElfSymbolizer(const ElfSymbolizer&) = delete;
    ElfSymbolizer& operator=(const ElfSymbolizer&) = delete;

    void addModule(core::SharedModule module);
    void addModule(const core::ModuleRecord& module);  // a copy
    const std::vector<core::Frame>& symbolize(uint64_t ip) override;
    // `ip` was symbolized already (its frames are kept).
    bool known(uint64_t ip) const;
    // Lets go of the object files it holds (ObjectFiles::closeAll lets the store
    // go of them too); the frames named so far stay, and an address named later
    // opens what it needs.
    void closeFiles();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace memtool::cli
