#pragma once
// Frames for tests, spelled out by what they are.

#include <cstdint>
#include <ostream>
#include <string>

#include "core/Frame.h"

namespace memtool::testing {

inline core::Frame pythonFrame(std::string function, std::string file, uint64_t line,
                               bool user = false) {
    core::Frame f;
    f.kind = core::FrameKind::Python;
    f.function = std::move(function);
    f.file = std::move(file);
    f.line = line;
    f.user = user;
    return f;
}

// A native frame as a symbolizer gives it: `function` empty when no symbol names it.
inline core::Frame nativeFrame(std::string function, std::string module, std::string file = "",
                               uint64_t line = 0, uint64_t offset = 0, bool user = false) {
    core::Frame f;
    f.function = std::move(function);
    f.module = std::move(module);
    f.file = std::move(file);
    f.line = line;
    f.offset = offset;
    f.user = user;
    return f;
}

}  // namespace memtool::testing

namespace memtool::core {
// For GoogleTest's messages.
inline void PrintTo(const Frame& f, std::ostream* os) {
    *os << (f.isPython() ? "python " : "native ") << formatFrame(f) << " module=" << f.module
        << " offset=" << f.offset << " user=" << f.user;
}
}  // namespace memtool::core
