#pragma once
// Which frames are the user's own code: a hotspot's site is the innermost one,
// and the line report shows only these files unless asked for others.

#include <string>

namespace memtool::core {

// Python files of the standard library, site-/dist-packages, frozen/synthetic code
// (but IPython's cells), and memtool's own code that runs the user's (track, magics).
bool isLibraryPythonFile(const std::string& file);
// A path inside a Python installation's lib/python3/ or lib/python3.N/ (or lib64/).
bool inPythonLibDir(const std::string& path);
// ELF objects from system directories, Python packages, the interpreter, memtool.
bool isLibraryModule(const std::string& modulePath);
// Source files of someone else's code that a header put into the user's binary
// (inlined, or a template's copy): system include and library directories
// (/usr/include/c++/12/bits/shared_ptr.h, Debian's /usr/include/torch/...), any
// libstdc++ tree (.../include/c++/), a Python package's (pip's torch keeps its
// headers in site-packages/torch/include/), and LibTorch's include tree wherever
// it was unpacked (/opt/libtorch/include/ATen/...). False for an empty name.
bool isLibrarySource(const std::string& file);
// python3.11, libpython3.12.so.1.0, ...
bool isInterpreterModule(const std::string& modulePath);
// memtool's own libraries (collector, CUDA injection, torch bridge): how an event
// was seen, never who asked for the memory.
bool isMemtoolModule(const std::string& modulePath);
// The allocation machinery itself: memtool's libraries, libc, libc10. A hotspot
// with no user frame is named after the first frame outside it.
bool isAllocatorModule(const std::string& modulePath);

}  // namespace memtool::core
