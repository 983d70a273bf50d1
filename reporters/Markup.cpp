#include "reporters/Markup.h"

#include <fmt/format.h>

#include <cstdint>

namespace memtool::reporters {

std::string escapeMarkup(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&apos;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

namespace {

// The length of the UTF-8 sequence at text[i], 0 where none starts there (a
// stray continuation byte, a cut sequence, an overlong or surrogate form).
size_t utf8Length(const std::string& text, size_t i, uint32_t* codePoint) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (lead >= 0xC2 && lead <= 0xDF)
        n = 2, cp = lead & 0x1F, min = 0x80;
    else if (lead >= 0xE0 && lead <= 0xEF)
        n = 3, cp = lead & 0x0F, min = 0x800;
    else if (lead >= 0xF0 && lead <= 0xF4)
        n = 4, cp = lead & 0x07, min = 0x10000;
    else
        return 0;
    if (i + n > text.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    *codePoint = cp;
    return n;
}

}  // namespace

std::string escapeTerminal(const std::string& text, bool keepNewlines) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && !(keepNewlines && c == '\n')) || c == 0x7F)
                out += fmt::format("\\x{:02x}", c);
            else
                out += static_cast<char>(c);
            ++i;
            continue;
        }
        uint32_t cp = 0;
        const size_t n = utf8Length(text, i, &cp);
        if (n == 0) {
            out += fmt::format("\\x{:02x}", c);
            ++i;
        } else if (cp <= 0x9F) {
            out += fmt::format("\\u{:04x}", cp);
            i += n;
        } else {
            out.append(text, i, n);
            i += n;
        }
    }
    return out;
}

}  // namespace memtool::reporters
