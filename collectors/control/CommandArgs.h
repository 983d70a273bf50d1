#pragma once
// The values `memtool ctl` commands take, read in the program before anything is
// done: a value that does not read whole is refused, never taken in part (atof
// read "inf" as forever and "5s" as 5).

#include <cstdlib>
#include <cstring>

namespace memtool::collectors::control {

// Seconds to wait for the program's main thread: above 0, at most 10,000,000 (what
// `memtool ctl --timeout` takes).
inline bool parseWaitSeconds(const char* text, double* seconds) {
    char* end = nullptr;
    const double s = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(s > 0 && s <= 1e7)) return false;
    *seconds = s;
    return true;
}

// A device as PyTorch names a tensor's: cpu, or cuda:N.
inline bool isTensorDevice(const char* text) {
    if (std::strcmp(text, "cpu") == 0) return true;
    if (std::strncmp(text, "cuda:", 5) != 0) return false;
    const char* digits = text + 5;
    const size_t n = std::strspn(digits, "0123456789");
    return n > 0 && n <= 3 && digits[n] == '\0';
}

}  // namespace memtool::collectors::control
