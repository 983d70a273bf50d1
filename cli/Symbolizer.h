#pragma once
// The seam between the trace builder and native symbolization: the builder asks
// for the frame of a return address; ElfSymbolizer answers from the target's ELF
// files with libdw, tests answer with frames of their own.

#include <cstdint>

#include "core/Frame.h"

namespace memtool::cli {

class Symbolizer {
public:
    virtual ~Symbolizer() = default;
    // The native frame of return address `ip` (the call instruction, ip - 1, is
    // what is looked up): function, file, line, module and offset. `user` is the
    // trace builder's to decide. The reference stays valid for the symbolizer's life.
    virtual const core::Frame& symbolize(uint64_t ip) = 0;
};

}  // namespace memtool::cli
