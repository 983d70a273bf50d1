#pragma once
// The hash trace.json keeps of each source file it quotes (ProcessTrace::sources):
// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3, see
// http://www.isthe.com/chongo/tech/comp/fnv/) over the file's bytes as read,
// written as 16 lowercase hex digits. Not cryptographic: it tells a file that
// changed since the run from the one that was read, nothing more.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memtool::core {

// Inline, so that the collectors (which link no core library) fold with it too.
inline uint64_t fnv1a64(std::string_view bytes) {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char c : bytes) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ULL;
    }
    return hash;
}
// 16 lowercase hex digits, zeros in front included.
std::string hashText(uint64_t hash);
// The hash hashText wrote; nullopt for anything else (another length, upper case,
// a sign or a space).
std::optional<uint64_t> parseHashText(std::string_view text);

}  // namespace memtool::core
