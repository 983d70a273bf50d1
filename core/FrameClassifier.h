#pragma once
// Which frames are the user's own code: a hotspot's site is the innermost one,
// and the line report shows only these files unless asked for others.

#include <string>

namespace memtool::core {

// Python files of the standard library, site-/dist-packages, or frozen/synthetic code.
bool isLibraryPythonFile(const std::string& file);
// ELF objects from system directories, Python packages, the interpreter, memtool.
bool isLibraryModule(const std::string& modulePath);
// Sources under system include and library directories (headers inlined into user code).
bool isSystemSource(const std::string& file);
// python3.11, libpython3.12.so.1.0, ...
bool isInterpreterModule(const std::string& modulePath);
// memtool's own libraries (collector, CUDA injection, torch bridge): how an event
// was seen, never who asked for the memory.
bool isMemtoolModule(const std::string& modulePath);
// The allocation machinery itself: memtool's libraries, libc, libc10. A hotspot
// with no user frame is named after the first frame outside it.
bool isAllocatorModule(const std::string& modulePath);

}  // namespace memtool::core
