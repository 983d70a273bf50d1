#pragma once
// The event log's file, beside the trace that names it (trace.json's "events"):
// a run of zstd frames that decompress, one after another, to
//
//   header: one line of JSON (schema memtool.events/1): per process its pid,
//           start_unix_s, mode, limit, seen, folded, its stacks (frame ids) and
//           frames, and how many events and end blocks follow and in how many bytes
//   per process, in the header's order: its events, then its end blocks (as
//           Alloc events), EventEncoder's bytes
//
// memtool run compresses each process's events as they come (CompressedEvents),
// so a log of every event costs the CLI bytes on disk, not memory; the header is
// written last, in front. `zstd -d` reads the file whole. docs/events.md.

#include <zstd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trace/EventLog.h"

namespace memtool::reporters {

// One process's events as they are encoded and compressed: into memory, or into
// a file no name points to in `spillDir` (a log of every event of a long run).
class CompressedEvents {
public:
    // Empty `spillDir`: in memory. Throws core::Error (125) when no file can be
    // made there.
    explicit CompressedEvents(const std::string& spillDir = {});
    ~CompressedEvents();
    CompressedEvents(const CompressedEvents&) = delete;
    CompressedEvents& operator=(const CompressedEvents&) = delete;

    void add(const core::Event& e);
    // Ends the frame; nothing can be added after.
    void finish();
    uint64_t count() const { return count_; }
    uint64_t rawBytes() const { return rawBytes_; }
    // Compressed, after finish(): the bytes (a view of memory or of the mapped file).
    std::string_view bytes() const;

private:
    void flush(ZSTD_EndDirective how);
    void writeOut(const uint8_t* data, size_t len);

    ZSTD_CCtx* ctx_ = nullptr;
    core::EventEncoder encoder_;
    std::vector<uint8_t> raw_;  // encoded, not yet compressed
    std::vector<uint8_t> out_;  // one compression step's output
    std::string memory_;        // compressed, when not spilled
    int fd_ = -1;               // compressed, when spilled
    uint64_t fileBytes_ = 0;
    void* mapped_ = nullptr;
    uint64_t count_ = 0, rawBytes_ = 0;
    bool finished_ = false;
};

// What one process puts in a log: its entry (events left empty: they are in
// `events`, with the end blocks after them).
struct EventSection {
    core::ProcessEvents process;
    const CompressedEvents* events = nullptr;
    uint64_t eventCount = 0;  // of events (the rest of events->count() are end blocks)
};

// Writes the log of `sections` to `path` (atomically, as replaceFile). Throws
// core::Error (`exitCode`) when it cannot.
void writeEventLog(const std::string& path, const std::vector<const EventSection*>& sections,
                   int exitCode);

// The log's file: at most this many events (the model takes 32 bytes for each);
// MEMTOOL_MAX_EVENTS sets another limit.
inline constexpr uint64_t kDefaultMaxEvents = uint64_t{1} << 27;
// Reads and checks a log (core::Error, 2, with a one-line message for anything
// that is not one: a missing or non-regular file, bad frames, a header or event
// that does not parse, more events than the limit, frame ids out of range).
core::EventLog loadEventLog(const std::string& path);
// The same from the file's bytes; `origin` names them in messages.
core::EventLog eventLogFromBytes(const void* data, size_t size, const std::string& origin);

// The file a trace names beside itself: `name` in the directory of `tracePath`.
// Throws core::Error (2) for a name that is not a plain file name (a trace
// cannot make memtool read a file elsewhere).
std::string eventLogPath(const std::string& tracePath, const std::string& name);
// The name memtool run gives the log of `tracePath`: its base name with ".json"
// (if it ends so) replaced by ".events.zst".
std::string eventLogName(const std::string& tracePath);

}  // namespace memtool::reporters
