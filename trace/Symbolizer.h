#pragma once
// The seam between the trace builder and native symbolization: the builder asks
// for the frames of a return address; ElfSymbolizer answers from the target's ELF
// files with libdw, tests answer with frames of their own.

#include <cstdint>
#include <vector>

#include "core/Frame.h"

namespace memtool::cli {

class Symbolizer {
public:
    virtual ~Symbolizer() = default;
    // The native frames return address `ip` stands for (the call instruction,
    // ip - 1, is what is looked up), innermost first: the functions inlined at
    // that instruction, each at its own line, then the function the symbol names,
    // at the line where it made the (outermost inlined) call; as `addr2line -i`
    // prints them. Never empty: one frame when nothing was inlined. Each has a
    // function, file, line, module and offset; `user` is the trace builder's to
    // decide. The reference stays valid for the symbolizer's life.
    virtual const std::vector<core::Frame>& symbolize(uint64_t ip) = 0;
};

}  // namespace memtool::cli
