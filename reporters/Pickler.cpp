#include "reporters/Pickler.h"

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

namespace memtool::reporters {

namespace {

// `s` with what is not UTF-8 replaced by U+FFFD: nlohmann's checked decoder
// (overlong forms and surrogates refused, as Python's are) does the work.
std::string validUtf8(std::string_view s) {
    bool ascii = true;
    for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(s);
    const std::string quoted = nlohmann::json(std::string(s))
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return nlohmann::json::parse(quoted).get<std::string>();
}

}  // namespace

void Pickler::put32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
}

void Pickler::integer(int64_t v) {
    if (v >= 0 && v < 256) {
        out_ += 'K';
        out_ += static_cast<char>(v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        out_ += 'J';
        put32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
        out_ += '\x8a';
        out_ += '\x08';
        for (int i = 0; i < 8; ++i)
            out_ += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    }
}

void Pickler::unsignedInteger(uint64_t v) {
    if (v <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(v));
    // Nine bytes: the eighth's top bit set, so a zero byte keeps it positive.
    out_ += '\x8a';
    out_ += '\x09';
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
    out_ += '\0';
}

void Pickler::real(double v) {
    out_ += 'G';
    const auto bits = std::bit_cast<uint64_t>(v);
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
}

void Pickler::text(std::string_view s) {
    const std::string utf8 = validUtf8(s);
    out_ += 'X';
    put32(static_cast<uint32_t>(utf8.size()));
    out_ += utf8;
}

uint32_t Pickler::remember() {
    out_ += 'r';
    put32(memo_);
    return memo_++;
}

void Pickler::recall(uint32_t id) {
    out_ += 'j';
    put32(id);
}

}  // namespace memtool::reporters
