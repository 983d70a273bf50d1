#include "core/SourceHash.h"

#include <charconv>

namespace memtool::core {

std::string hashText(uint64_t hash) {
    std::string text(16, '0');
    for (size_t i = text.size(); i-- > 0; hash >>= 4) text[i] = "0123456789abcdef"[hash & 0xf];
    return text;
}

std::optional<uint64_t> parseHashText(std::string_view text) {
    if (text.size() != 16) return std::nullopt;
    for (const char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
    uint64_t hash = 0;
    std::from_chars(text.data(), text.data() + text.size(), hash, 16);
    return hash;
}

}  // namespace memtool::core
