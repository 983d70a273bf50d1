#pragma once
// Two numbers as a note's text, "A B" in decimal (core::kNoteChildEnded,
// core::kNoteCollectorLock): written by the collector without stdio (its hooks
// and engine may not call it), read back by the CLI as strictly as it is written.

#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace memtool::core {

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

// Exactly what decimalPair writes: digits, one space, digits, nothing else (no
// sign, no other space, nothing past 2^64 - 1). False for any other text.
inline bool readDecimalPair(std::string_view text, uint64_t* a, uint64_t* b) {
    const char* const end = text.data() + text.size();
    const auto first = std::from_chars(text.data(), end, *a);
    if (first.ec != std::errc() || first.ptr == end || *first.ptr != ' ') return false;
    const auto second = std::from_chars(first.ptr + 1, end, *b);
    return second.ec == std::errc() && second.ptr == end;
}

}  // namespace memtool::core
