#pragma once
// Folds the Alloc, Free and ShortLived records of a send buffer into Window
// records (core/PROTOCOL.md) before it goes: what `memtool run` then does per
// window, it did per record. A loop that allocates by the million costs the
// reader a few dozen items a buffer instead of two records an iteration, and
// the reader ends with exactly the state the records would have left.
//
// The buffer itself is never rewritten: it stays what `memtool run` reads back
// after a kill. The records go, folded, into a second buffer of the same size
// (a window is sent only where it is smaller than its records, so the output
// never outgrows the input), and the writer sends that one.
//
// The writer folds nothing where a window could not carry it (a block of a
// region, an address allocated again while live); a window that would not be
// smaller than its records goes as its records.
//
// Heap-free, as the rest of the collector: its tables come from mmap, once.

#include <cstddef>
#include <cstdint>

namespace memtool::collectors {

// What the records of a stretch of the buffer are.
enum class SpanKind : uint8_t {
    Events,       // Alloc, Free, ShortLived: folded
    Definitions,  // stack nodes, code objects, modules: ids a later record may use
    Others,       // anything else (a note, a region, an end): a window ends before it
};

struct Span {
    uint32_t end;      // offset in the buffer after its last record
    uint32_t records;  // how many
    uint64_t clockNs;  // the stream's clock after its last record
    SpanKind kind;
};

// What the writer knows of each event record of the buffer as it commits it,
// in order: what folding needs, without decoding the record again.
struct EventFacts {
    enum Kind : uint8_t { Alloc, Free, ShortLived };
    uint64_t address;
    uint64_t size;           // an Alloc's or ShortLived's
    uint64_t deltaNs;        // the record's time delta (a ShortLived's allocation's)
    uint64_t freeDeltaNs;    // a ShortLived's free's, after its allocation
    uint64_t liveAfter;      // the device's live bytes after it, as the reader counts them
    uint64_t liveAfterFree;  // a ShortLived's, after its free
    uint32_t nativeNode, pyNode;
    // A Free's block's Alloc, where it is in this buffer: its index here plus
    // one; 0 for a block allocated before the buffer.
    uint32_t allocRecord;
    uint8_t device;
    Kind kind;
};

class WindowCompactor {
public:
    // Event records one buffer can hold: a Free takes at least 4 bytes.
    static constexpr size_t kMaxEvents = 1 << 16;
    static constexpr size_t kMaxSpans = 1 << 13;

    WindowCompactor() = default;
    WindowCompactor(const WindowCompactor&) = delete;
    WindowCompactor& operator=(const WindowCompactor&) = delete;
    ~WindowCompactor();

    // Maps the tables (once); false when memory ran out (then nothing is folded).
    bool ready();

    struct Input {
        const uint8_t* records = nullptr;
        const Span* spans = nullptr;  // covering the records in order
        size_t spanCount = 0;
        uint64_t startClockNs = 0;          // the stream's clock before the first record
        const EventFacts* facts = nullptr;  // one per record of the Events spans
        // Per device code, the most it held before the first record.
        const uint64_t* highBefore = nullptr;
    };
    // Writes the buffer's records, folded, to `out` (room for as many bytes as
    // the records take); returns the bytes and, in *records, how many records
    // they are. Where nothing could be folded, the bytes are the records.
    size_t compact(const Input& in, uint8_t* out, uint64_t* records);

private:
    struct Block;
    struct Stack;
    struct Device;
    struct Point;
    struct OldFree;
    // The stack table's entry: a stack by (device, native node a, Python node b).
    struct Slot {
        uint64_t a, b;
        uint32_t generation;  // the window it was filled in; any other: empty
        uint32_t index;
        uint8_t device;
    };

    // Starts a window of at most `events` records, the first of them facts[first].
    void begin(size_t events, size_t first);
    // Ends the window, writing it (or its records) at out_; the window's events
    // are the Events spans in [firstSpan, lastSpan).
    void end(const Input& in, size_t firstSpan, size_t lastSpan);
    // Folds the event record facts[index] into the window.
    void fold(const EventFacts* facts, size_t index);
    // The device's state in this window, from its first event (at `timeNs`) on.
    Device& device(uint8_t code, uint64_t timeNs);
    uint32_t stack(uint8_t device, uint64_t nativeNode, uint64_t pyNode);
    void allocated(Device& d, uint32_t stack, uint64_t size, uint64_t liveAfter, uint64_t timeNs);
    void released(Device& d, uint32_t stack, uint64_t size);
    void sample(Device& d, uint64_t timeNs, uint64_t bytes);
    void closeBucket(Device& d);
    void touch(Stack& s, const Device& d);
    // The window's record, as bytes to `out` (CountBytes measures, WriteBytes writes).
    template <typename Out>
    void emit(Out& out, const EventFacts* facts) const;

    bool mapped_ = false;
    bool failed_ = false;
    Block* blocks_ = nullptr;
    uint32_t* liveIndex_ = nullptr;  // the window's live blocks at its end: record indices
    size_t liveCount_ = 0;
    Stack* stacks_ = nullptr;
    OldFree* oldFrees_ = nullptr;
    Point* points_ = nullptr;
    Slot* stackSlots_ = nullptr;
    Device* devices_ = nullptr;  // 256, by code
    uint8_t deviceOrder_[256] = {};
    size_t deviceCount_ = 0;
    size_t stackCount_ = 0, oldFreeCount_ = 0, pointCount_ = 0;
    size_t firstRecord_ = 0, endRecord_ = 0;  // the window's facts: [first, end)
    uint32_t generation_ = 0;                 // of the tables' slots: a window starts with none
    size_t mask_ = 0;                         // the part of the tables this window uses
    static constexpr size_t kRecent = 8;
    Slot recent_[kRecent] = {};  // stacks looked up last, by their hash's low bits
    uint64_t seq_ = 0;           // samples taken: their order
    uint64_t windowStartNs_ = 0, clockNs_ = 0;
    uint8_t* out_ = nullptr;
    uint64_t outRecords_ = 0;
    uint64_t high_[256] = {};  // per device: the most it held, as of clockNs_
};

}  // namespace memtool::collectors
