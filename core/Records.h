#pragma once
// Decoded wire records, as the CLI sees them. The collector encodes with the
// allocation-free functions in Protocol.h; these are the reader's plain-data mirror.

#include <cstdint>
#include <memory>
#include <optional>
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
    bool forked = false;  // a fork child: what it inherited is its parent's
    bool notice = false;  // not a stream: says why the stream of (pid, startUnixNs) stopped
    std::vector<std::string> command;
    // The launcher's variables (kRankVariables) that were set, in that order.
    std::vector<std::pair<std::string, std::string>> environment;
    std::optional<StreamContinuation> continues;
};

struct ModuleRecord {
    uint64_t id = 0;
    std::string path;
    uint64_t loadBias = 0;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [start, start+length)
};
// A module as the CLI keeps it: one copy for its stream, the streams that
// continue it (a fork child takes over its parent's ~300) and their symbolizers.
using SharedModule = std::shared_ptr<const ModuleRecord>;

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

// A Window record (Protocol.h, RecordTag::Window), decoded: node ids mapped as an
// Alloc's, times on the stream's clock.
struct WindowRecord {
    struct Device {
        uint8_t device = kDeviceCpu;
        uint64_t allocs = 0, allocatedBytes = 0;
        uint64_t frees = 0, freedBytes = 0;  // of blocks allocated in the window
        uint64_t peakBytes = 0;              // a new peak in the window; 0: none
        uint64_t peakTimeNs = 0;
        std::vector<std::pair<uint64_t, uint64_t>> points;  // time, live bytes
    };
    struct Stack {
        uint8_t device = kDeviceCpu;
        uint64_t nativeNode = 0, pyNode = 0;
        uint64_t allocs = 0, allocatedBytes = 0;
        uint64_t maxDeviceBytesAtAlloc = 0;
        uint64_t liveAtPeak = 0;  // of its blocks allocated in the window
    };
    struct Block {           // allocated in the window and live at its end
        uint32_t stack = 0;  // index into stacks
        uint64_t address = 0, size = 0;
    };
    struct OldFree {  // a block allocated before the window, freed in it
        uint8_t device = kDeviceCpu;
        uint64_t address = 0;
        bool beforePeak = false;
    };
    uint64_t startNs = 0, endNs = 0;
    std::vector<Device> devices;
    std::vector<Stack> stacks;
    std::vector<Block> blocks;
    std::vector<OldFree> oldFrees;
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
    size_t argBytes = 0, envBytes = 0;
    for (const auto& a : h.command) argBytes += a.size();
    for (const auto& [name, value] : h.environment) envBytes += name.size() + value.size();
    std::vector<uint8_t> out(
        handshakeBytes(h.command.size(), argBytes, h.environment.size(), envBytes));
    const uint64_t flags = (h.nativeStacks ? kHandshakeNativeStacks : 0) |
                           (h.pythonStacks ? kHandshakePythonStacks : 0) |
                           (h.continues ? kHandshakeContinues : 0) |
                           (h.forked ? kHandshakeForked : 0) | (h.notice ? kHandshakeNotice : 0);
    uint8_t* p =
        encodeHandshakeHead(out.data(), static_cast<uint64_t>(h.pid), static_cast<uint64_t>(h.ppid),
                            h.startUnixNs, flags, h.command.size());
    for (const auto& a : h.command) p = putString(p, a.data(), a.size());
    p = encodeHandshakeEnvCount(p, h.environment.size());
    for (const auto& [name, value] : h.environment) {
        p = putString(p, name.data(), name.size());
        p = putString(p, value.data(), value.size());
    }
    if (h.continues) p = encodeHandshakeContinuation(p, *h.continues);
    out.resize(static_cast<size_t>(p - out.data()));
    return out;
}

}  // namespace memtool::core
