#pragma once
// How long a `memtool ctl` command may wait: its --timeout (read by the CLI) and
// the --wait of tensors and yield (read in the program by the collector), one
// rule for both. Header-only: the collector links no compiled part of core.

#include <cstdlib>

namespace memtool::core {

// Seconds above 0, at most 10,000,000, written whole: a value that does not read
// whole is refused, never taken in part (atof read "inf" as forever, "5s" as 5).
inline bool parseWaitSeconds(const char* text, double* seconds) {
    char* end = nullptr;
    const double s = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(s > 0 && s <= 1e7)) return false;
    *seconds = s;
    return true;
}

}  // namespace memtool::core
