#pragma once
// The values `memtool ctl` commands take, read in the program before anything is
// done: a value that does not read whole is refused. Seconds to wait for the
// program's main thread are core::parseWaitSeconds, the rule of ctl's --timeout.

#include <cstring>

#include "core/WaitSeconds.h"

namespace memtool::collectors::control {

using core::parseWaitSeconds;

// A device as PyTorch names a tensor's: cpu, or cuda:N.
inline bool isTensorDevice(const char* text) {
    if (std::strcmp(text, "cpu") == 0) return true;
    if (std::strncmp(text, "cuda:", 5) != 0) return false;
    const char* digits = text + 5;
    const size_t n = std::strspn(digits, "0123456789");
    return n > 0 && n <= 3 && digits[n] == '\0';
}

}  // namespace memtool::collectors::control
