#pragma once
// Decoded wire records, as the CLI sees them. The collector encodes with the
// allocation-free functions in Protocol.h; these are the reader's plain-data mirror.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/Protocol.h"

namespace memtool::core {

struct Handshake {
    uint32_t protocolVersion = 0;
    int64_t pid = 0;
    int64_t ppid = 0;
    uint64_t startUnixNs = 0;
    bool nativeStacks = true;
    bool pythonStacks = true;
    std::vector<std::string> command;
};

struct ModuleRecord {
    uint64_t id = 0;
    std::string path;
    uint64_t loadBias = 0;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [start, start+length)
};

struct PyCodeRecord {
    uint64_t id = 0;  // implicit, 1-based
    std::string file;
    std::string name;
    uint64_t firstLine = 0;
};

struct NativeNodeRecord {
    uint64_t id = 0;  // implicit, 1-based
    uint64_t parent = 0;
    uint64_t ip = 0;
};

struct PyNodeRecord {
    uint64_t id = 0;  // implicit, 1-based
    uint64_t parent = 0;
    uint64_t codeId = 0;
    uint64_t line = 0;
};

struct AllocRecord {
    AllocFields f;
    uint64_t timeNs = 0;  // since stream start (sum of deltas)
};

struct FreeRecord {
    FreeFields f;
    uint64_t timeNs = 0;
};

struct OomRecord {
    OomFields f;
    uint64_t timeNs = 0;  // since stream start, on the Alloc/Free clock
};

struct RegionRecord {
    uint64_t id = 0;
    std::string tag;
    uint8_t device = kDeviceCpu;
    BackupKind backup = BackupKind::None;
};

struct ControlRecord {
    ControlFields f;
    std::string message;
    uint64_t timeNs = 0;  // since stream start, on the Alloc/Free clock
};

struct ReplyRecord {
    uint64_t id = 0;
    ReplyStatus status = ReplyStatus::Ok;
    std::string body;  // JSON
};

struct NoteRecord {
    std::string key;  // kNote* in Protocol.h
    std::string text;
};

// Handshake bytes (preamble included) for a reader-side Handshake: tests and tools
// that write streams. The collector encodes with Protocol.h's functions directly.
inline std::vector<uint8_t> encodeHandshake(const Handshake& h) {
    size_t argBytes = 0;
    for (const auto& a : h.command) argBytes += a.size();
    std::vector<uint8_t> out(handshakeBytes(h.command.size(), argBytes));
    const uint64_t flags = (h.nativeStacks ? kHandshakeNativeStacks : 0) |
                           (h.pythonStacks ? kHandshakePythonStacks : 0);
    uint8_t* p =
        encodeHandshakeHead(out.data(), static_cast<uint64_t>(h.pid), static_cast<uint64_t>(h.ppid),
                            h.startUnixNs, flags, h.command.size());
    for (const auto& a : h.command) p = putString(p, a.data(), a.size());
    out.resize(static_cast<size_t>(p - out.data()));
    return out;
}

}  // namespace memtool::core
