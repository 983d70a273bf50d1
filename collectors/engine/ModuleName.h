#pragma once
// Loaded objects are recognized by their file name (libc10.so.2.1, libcudart.so.12).

#include <cstring>

namespace memtool::collectors {

// True when the last component of `path` starts with `prefix`.
inline bool fileNameStartsWith(const char* path, const char* prefix) {
    const char* slash = std::strrchr(path, '/');
    return std::strncmp(slash ? slash + 1 : path, prefix, std::strlen(prefix)) == 0;
}

}  // namespace memtool::collectors
