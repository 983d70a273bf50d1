#pragma once
// What `memtool ctl` commands take, one rule on both sides: ctl checks a command's
// words before sending it (a usage error, exit 2), and the collector reads them in
// the program again before anything is done. A value that does not read whole is
// refused. Header-only: the collector links no compiled part of core.

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace memtool::core {

// One request: a command and 64 tags, each word 4096 bytes at most.
inline constexpr size_t kMaxRequestWords = 65;
inline constexpr size_t kMaxRequestTags = kMaxRequestWords - 1;
inline constexpr size_t kMaxWordBytes = 4096;

// Plain decimal: digits with at most one point ("10", "0.5", ".5"), none of what
// strtod also reads (0x10, 1e3, inf, a sign or a space in front).
inline bool isDecimalText(const char* text) {
    bool digit = false, point = false;
    for (const char* c = text; *c; ++c) {
        if (*c >= '0' && *c <= '9')
            digit = true;
        else if (*c == '.' && !point)
            point = true;
        else
            return false;
    }
    return digit;
}

// Seconds above 0, at most 10,000,000, written whole in plain decimal: a value that
// does not read whole is refused, never taken in part (atof read "inf" as forever,
// "5s" as 5). ctl's --timeout, and the --wait of tensors and yield.
inline bool parseWaitSeconds(const char* text, double* seconds) {
    if (!isDecimalText(text)) return false;
    char* end = nullptr;
    const double s = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(s > 0 && s <= 1e7)) return false;
    *seconds = s;
    return true;
}

// A device as PyTorch names a tensor's: cpu, cuda:N, or npu:N (torch_npu's).
inline bool isTensorDevice(const char* text) {
    if (std::strcmp(text, "cpu") == 0) return true;
    const size_t prefix = std::strncmp(text, "cuda:", 5) == 0  ? 5
                          : std::strncmp(text, "npu:", 4) == 0 ? 4
                                                               : 0;
    if (prefix == 0) return false;
    const char* digits = text + prefix;
    const size_t n = std::strspn(digits, "0123456789");
    return n > 0 && n <= 3 && digits[n] == '\0';
}

}  // namespace memtool::core
