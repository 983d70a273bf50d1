#pragma once
// Two numbers as a note's text, "A B" in decimal, without stdio (the hooks and
// the engine may not call it).

#include <cstdint>

namespace memtool::collectors {

// Room for two 20-digit numbers, the space and the NUL.
inline constexpr int kDecimalPairBytes = 48;

// Written into the end of `out`, NUL-terminated; returns where it starts.
inline char* decimalPair(char (&out)[kDecimalPairBytes], uint64_t a, uint64_t b) {
    char* p = out + kDecimalPairBytes;
    *--p = '\0';
    auto prepend = [&p](uint64_t v) {
        do *--p = static_cast<char>('0' + v % 10);
        while (v /= 10);
    };
    prepend(b);
    *--p = ' ';
    prepend(a);
    return p;
}

}  // namespace memtool::collectors
