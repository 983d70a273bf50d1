#pragma once
// Which torch a loaded libc10 belongs to, for the warnings that name it: from the
// library's own file name (Debian's libc10.so.1.13) or the package's version.py
// beside its lib/ (pip's torch/lib/libc10.so, torch/version.py). No heap: it runs
// in the module scan, inside dlopen hooks.

#include <cstddef>

namespace memtool::collectors {

// Writes the version ("2.14.1+cu130", "1.13") into `out` (NUL-terminated, cut to
// fit); false, with `out` empty, when neither tells it.
bool torchVersionOf(const char* libraryPath, char* out, size_t outSize);

}  // namespace memtool::collectors
