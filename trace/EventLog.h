#pragma once
// The event log (memtool run --events N|all): every allocation, free and refused
// request of a process, in order, with its stack, beside the folded trace that
// keeps only totals per stack. The model, and the compact encoding of its events
// that memtool run writes as they arrive and the reporters read back
// (trace/EventLogFile.h has the file; docs/events.md the format).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/Frame.h"
#include "core/Protocol.h"

namespace memtool::core {

inline constexpr const char* kEventsSchema = "memtool.events/1";

enum class EventKind : uint8_t {
    Alloc = 0,
    Free = 1,  // size and stack: the freed block's (0: it was not live, unmatched)
    Oom = 2,   // a request the device refused: size requested, no address
};

// One event as the log keeps it. stack indexes ProcessEvents::stacks; 0: none.
struct Event {
    uint64_t timeNs = 0;  // on the process's clock (since its stream started)
    uint64_t address = 0;
    uint64_t size = 0;
    uint32_t stack = 0;
    EventKind kind = EventKind::Alloc;
    uint8_t device = kDeviceCpu;  // a wire device code ("cpu", "cuda:0", "cuda:0.active", ...)
};

// A block live when the log ended (the process's stream ended, or a snapshot):
// with the events, what was live at any moment the log covers.
struct EndBlock {
    uint64_t address = 0;
    uint64_t size = 0;
    uint32_t stack = 0;
    uint8_t device = kDeviceCpu;
};

// How a process's events were kept.
inline constexpr const char* kEventsLast = "last";  // a ring: the last `limit`
inline constexpr const char* kEventsAll = "all";

struct ProcessEvents {
    int64_t pid = 0;
    std::optional<double> startUnixS;  // as the process's trace entry has it
    std::string mode = kEventsAll;
    uint64_t limit = 0;  // mode "last": how many were kept at most
    uint64_t seen = 0;   // events that arrived (kept or not)
    // Events the collector folded into windows before sending (it does not, under
    // --events, unless MEMTOOL_FOLD=2 says so): not in the log, counted here.
    uint64_t folded = 0;
    std::vector<Event> events;  // the kept ones, in order
    // Mode "last": the ring's last N up to the first refused request are kept
    // whole, then the last N of what followed; where events between them were
    // not kept, events[gapAt] is the first after the gap (0: no gap inside).
    uint64_t gapAt = 0;
    std::vector<EndBlock> endBlocks;
    // Index 0 is "no stack"; each other entry's frames, innermost first, index `frames`.
    std::vector<std::vector<uint32_t>> stacks{{}};
    std::vector<Frame> frames;
};

// The log of a trace file: one entry per process of it that kept events.
struct EventLog {
    std::vector<ProcessEvents> processes;
    // The entry of (pid, startUnixS), or null.
    const ProcessEvents* find(int64_t pid, std::optional<double> startUnixS) const;
};

// Events as bytes, each against the one before it (the first against zeros):
//
//   tag (u8):  bits 0-1 kind | bit 2 device follows | bit 3 stack follows |
//              bit 4 size follows | bits 5-7 zero
//   [device (u8)]                        when it differs from the previous event's
//   time delta (varint, ns)              never negative: times only grow
//   address delta (varint, zigzag)       against the previous event's address
//   [size (varint)]                      when it differs from the previous event's
//   [stack (varint)]                     when it differs from the previous event's
//
// A loop that allocates and frees one block from one stack costs 3-4 bytes an
// event before compression; zstd takes repeats down to well under one.
class EventEncoder {
public:
    // At most this many bytes per event.
    static constexpr size_t kMaxEventBytes = 1 + 1 + 10 + 10 + 10 + 5;
    // Writes `e` at `out` (room for kMaxEventBytes); returns the end.
    uint8_t* encode(const Event& e, uint8_t* out);

private:
    Event last_;
};

class EventDecoder {
public:
    // Reads one event from [p, end) into `e`; returns where the next starts, or
    // null when the bytes are not an event (cut short, a bad tag, time going back,
    // a stack past `stackCount`).
    const uint8_t* decode(const uint8_t* p, const uint8_t* end, uint64_t stackCount, Event& e);

private:
    Event last_;
};

}  // namespace memtool::core
