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

struct NoteRecord {
    std::string key;  // kNote* in Protocol.h
    std::string text;
};

struct ThreadNameRecord {
    uint64_t tid = 0;
    std::string name;
};

// Handshake bytes (preamble included), built once at collector start-up.
std::vector<uint8_t> encodeHandshake(const Handshake& h);

}  // namespace memtool::core
