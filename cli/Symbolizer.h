#pragma once
// Native return addresses -> function, file, line, with elfutils libdwfl over the
// target's module map (as the collector announces it, module by module). Results
// are cached per address; one Symbolizer serves one process. `memtool run` feeds
// it while the target runs, so little is left to do once the target exits.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/Records.h"

namespace memtool::cli {

struct NativeFrame {
    std::string function;  // demangled; empty when unknown
    std::string file;      // source file when debug info exists
    uint64_t line = 0;
    std::string module;    // path of the ELF object
    uint64_t offset = 0;   // address relative to the module's load bias
};

class Symbolizer {
public:
    Symbolizer();
    explicit Symbolizer(const std::vector<core::ModuleRecord>& modules);
    void addModule(const core::ModuleRecord& module);
    ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    // `ip` is a return address: the call instruction is looked up (ip - 1).
    const NativeFrame& symbolize(uint64_t ip);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace memtool::cli
