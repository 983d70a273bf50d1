#pragma once
// One frame of a call stack as the trace keeps it: structured, so that reporters
// never parse text back into frames. formatFrame() is the one text form of a
// frame: trace.json's `site` and `stack` strings and the reports all use it.

#include <cstdint>
#include <string>
#include <tuple>

#include "core/Protocol.h"

namespace memtool::core {

enum class FrameKind : uint8_t { Python, Native };

struct Frame {
    FrameKind kind = FrameKind::Native;
    std::string function;  // Python: co_qualname; native: demangled, empty when unknown
    std::string file;      // source file; native: from debug info, empty without it
    uint64_t line = 0;     // 0: unknown
    std::string module;    // native: path of the ELF object, empty when unknown
    // Native frames without a function name only: the address relative to the
    // module's load bias (what `addr2line -e MODULE` takes). 0 otherwise, so that
    // one function's call sites stay one frame.
    uint64_t offset = 0;
    bool user = false;  // the user's own code, not a library's (core/FrameClassifier)
    // Python frames of the user's code: the line's code, without its indentation, as
    // it was when the run ended ("" when unknown). Not part of the identity: it
    // follows from file and line. `memtool diff` matches sites by it.
    std::string source;

    bool isPython() const { return kind == FrameKind::Python; }
    // A native frame no symbol names (a stripped static function, JIT code).
    bool isUnnamed() const { return kind == FrameKind::Native && function.empty(); }

    auto identity() const { return std::tie(kind, function, file, line, module, offset, user); }
    friend bool operator==(const Frame& a, const Frame& b) { return a.identity() == b.identity(); }
    friend bool operator<(const Frame& a, const Frame& b) { return a.identity() < b.identity(); }
};

// `memtool run --modules`: a Python frame with this file is no code but the
// nn.Module instance the allocation happened in, innermost on its stack: function
// "layer1.0.conv1 (Conv2d)" (the module's path under its root, its class; the
// root's class alone), line 1 in its forward, 2 in the backward of what that
// forward made (collectors/stacks/ModuleScopes.h).
// (kModuleScopeFile and the two lines: core/Protocol.h.)
inline bool isModuleScope(const Frame& f) { return f.isPython() && f.file == kModuleScopeFile; }

// The last component of a path ("libc10.so" of "/usr/lib/libc10.so"): how a
// frame's module and file are shown.
std::string baseName(const std::string& path);

// What a frame is called in text: the function, "??" for an unnamed native frame.
std::string frameName(const Frame& f);
// Where it is: "file:line" when the source line is known, else the module's file
// name ("libtorch_cpu.so"), with "+0x1a" for an unnamed frame; "?" for an unknown module.
std::string frameLocation(const Frame& f);
// "name (location)": "step (/home/me/train.py:7)", "at::empty(...) (libtorch_cpu.so)",
// "?? (libtorch_python.so+0x48a99c)".
std::string formatFrame(const Frame& f);

// A hotspot's site when the allocation came with no stack at all.
inline constexpr const char* kNoStackSite = "(no stack)";

}  // namespace memtool::core
