#pragma once
// dlopen on the program's behalf, searching where the program's own call would.
//
// glibc's dlopen finds a bare file name ("libcudnn.so.9") through the DT_RPATH or
// DT_RUNPATH of the object that called it, which it tells from the return
// address. The collector interposes dlopen (to see every new module) and calls
// the real one itself, so without care the search would use the collector's run
// paths instead of the caller's: a library with RUNPATH $ORIGIN/../lib that
// loads a sibling by name (pip's torch, cuDNN, triton do) would fail under
// memtool and load fine without it. This looks the name up in the caller's run
// paths, in glibc's order, and loads what it finds by path; everything else
// (an already loaded name, a path, the cache and default directories) is left
// to the real dlopen.

namespace memtool::collectors {

void* dlopenForCaller(const char* file, int mode, const void* caller);

}  // namespace memtool::collectors
