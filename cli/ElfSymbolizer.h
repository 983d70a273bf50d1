#pragma once
// Native return addresses -> function, file, line, with elfutils libdwfl over the
// target's module map (as the collector announces it, module by module). Results
// are cached per address; one ElfSymbolizer serves one process. `memtool run` feeds
// it while the target runs, so little is left to do once the target exits.

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
    const core::Frame& symbolize(uint64_t ip) override;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace memtool::cli
