#pragma once
// Records on their way to a sink: encoded in place into one buffer and sent in
// large writes. Not thread-safe: the engine calls it under its lock.
//
// Use: p = reserve(n); p = core::encodeX(p, ...); commit(p) (or one of the
// commits that say what the record is: an event, a definition, one with a time).
// A record larger than the buffer (a huge command line) is encoded into scratch
// memory from mmap and sent on its own. No heap allocation, stdio or exception
// anywhere.
//
// Before a send, the buffer's Alloc, Free and ShortLived records are folded
// into Window records (WindowCompactor.h) where that is smaller, into the other
// half of the buffer's memory; the halves then trade places.

#include <cstddef>
#include <cstdint>

#include "collectors/engine/Sink.h"
#include "collectors/engine/WindowCompactor.h"
#include "core/Protocol.h"
#include "core/Tail.h"

namespace memtool::collectors {

enum class FlushPolicy {
    Timed,     // send at least every kFlushIntervalNs, so the CLI sees a steady stream
    WhenFull,  // send only when the buffer is full (callers under another library's lock)
};

class RecordWriter {
public:
    static constexpr size_t kBufferBytes = 256 * 1024;
    static constexpr size_t kFlushAt = kBufferBytes - 8 * 1024;
    static constexpr uint64_t kFlushIntervalNs = 50'000'000;
    static_assert(kBufferBytes == core::kTailBufferBytes, "the CLI reads back at most this much");

    constexpr RecordWriter() = default;
    // The collector's own never runs (NoDestroy); a test's engine gives its buffer back.
    ~RecordWriter();
    RecordWriter(const RecordWriter&) = delete;
    RecordWriter& operator=(const RecordWriter&) = delete;

    // How far events are folded into Window records (MEMTOOL_OPTIONS fold=).
    enum class Folding : uint8_t {
        Never = 0,
        // A buffer of at least kFoldLeastEvents event records that came faster
        // than kFoldEventsPerMs, where the one before it did too: where the
        // reader's cost per record (~50 ns) would be 10% of the program's time
        // or more. Slower ones go as they are: folding costs the program ~130
        // instructions a record, which the reader's own core takes off it
        // (small_tensors: 1.050 unfolded, 1.069 folding at 1,000 a ms,
        // bench/history/runs.md run 25), and keeping the facts for it 64 bytes a
        // record, kept only after a buffer that came fast.
        Fast = 1,
        Always = 2,
    };
    static constexpr uint64_t kFoldEventsPerMs = 2000;
    static constexpr size_t kFoldLeastEvents = 1024;
    // Whether `events` event records that took `spanNs` came fast enough to be
    // folded: at least kFoldLeastEvents, at kFoldEventsPerMs or faster, the
    // span measured to the nanosecond (a span of 12.9 ms is not 12).
    static constexpr bool cameFastOver(uint64_t events, uint64_t spanNs) {
        static_assert(1'000'000 % kFoldEventsPerMs == 0);
        return events >= kFoldLeastEvents && spanNs <= events * (1'000'000 / kFoldEventsPerMs);
    }
    // Starts a stream on `sink`: counters and buffer start empty. The buffer is
    // one `memtool run` can read after a kill (core::TailHeader), made here the
    // first time and handed to the sink; without it (no memfd), a private one.
    void open(Sink* sink, uint64_t nowNs, Folding folding = Folding::Fast);
    // Drops the sink without sending what is buffered (fork child, lost peer).
    void detach();
    // In a fork child, before anything else: the buffer it inherited is its
    // parent's, shared; it gets private memory in its place (and makes its own
    // shared buffer at its next open()).
    void leaveParentsBuffer();
    bool isOpen() const { return sink_ != nullptr; }

    // Room for a record of at most `bytes`; null when the sink has failed.
    uint8_t* reserve(size_t bytes);
    // The record reserved last ends at `end`: a record that ends a window of
    // folded events (a note, a region, an end); with `deltaNs`, one that moves
    // the stream's clock (a control, an out-of-memory).
    void commit(uint8_t* end, uint64_t deltaNs = 0) { commitAs(end, SpanKind::Others, deltaNs); }
    // A stack node, code object or module: it ends no window.
    void commitDefinition(uint8_t* end) { commitAs(end, SpanKind::Definitions, 0); }
    // Before the records of an allocation: settles a held-back Alloc and makes
    // room for one fixed record, so that the allocation's record goes into the
    // buffer as it is now. Returns the allocation's tag, for the engine to keep
    // with its block and give back at its free (commitFree).
    uint64_t prepareEvent() {
        if (!settle() || (used_ + core::kMaxFixedRecordBytes > kBufferBytes && !flush())) return 0;
        return (generation_ << 32) | (factCount_ + 1);
    }
    // An Alloc after which its device holds `liveAfter` bytes as the reader counts
    // them (its records so far, summed).
    void commitAlloc(uint8_t* end, const core::AllocFields& a, uint64_t liveAfter) {
        noteAlloc(a, liveAfter, EventFacts::Alloc);
        commitAs(end, SpanKind::Events, a.timeDeltaNs);
    }
    // A Free of the block whose allocation had `allocTag` (prepareEvent()).
    void commitFree(uint8_t* end, const core::FreeFields& f, uint64_t liveAfter,
                    uint64_t allocTag) {
        if (EventFacts* e = noteEvent(f.device, liveAfter)) {
            e->kind = EventFacts::Free;
            e->address = f.address;
            e->deltaNs = f.timeDeltaNs;
            e->allocRecord = allocTag >> 32 == generation_ ? static_cast<uint32_t>(allocTag) : 0;
        }
        commitAs(end, SpanKind::Events, f.timeDeltaNs);
    }
    // A ShortLived record in place of the Alloc taken back (takeDeferred): the
    // device's bytes after its allocation, then after its free.
    void commitShortLived(uint8_t* end, const core::AllocFields& a, uint64_t freeDeltaNs,
                          uint64_t liveAfterAlloc, uint64_t liveAfterFree) {
        if (EventFacts* e = noteAlloc(a, liveAfterAlloc, EventFacts::ShortLived)) {
            e->freeDeltaNs = freeDeltaNs;
            e->liveAfterFree = liveAfterFree;
        }
        commitAs(end, SpanKind::Events, a.timeDeltaNs + freeDeltaNs);
    }
    // From now until the stream ends, nothing is folded: the reader's live bytes
    // will follow pauses and resumes, which the liveAfter figures do not.
    void stopFolding() { foldingOff_ = true; }
    // Every page of the buffer in use resident from now on (once folding has
    // stopped, the buffer stays in its half): records written while a region is
    // paused must not make the process grow.
    void keepResident();
    // The buffer as it is now goes as its records (an event the window format
    // cannot say: an address allocated again while live).
    void foldNothingBuffered() { bufferFoldable_ = false; }

    // Sends everything buffered; false when the sink failed.
    bool flush();
    // Sends when the buffer is nearly full or, with FlushPolicy::Timed, when the
    // last send is older than kFlushIntervalNs.
    bool flushIfDue(uint64_t nowNs, FlushPolicy policy);

    // Something is buffered and the last send is older than kFlushIntervalNs.
    bool stale(uint64_t nowNs) const {
        return sink_ && (used_ > 0 || deferred_) && nowNs - lastFlushNs_ > kFlushIntervalNs;
    }

    // Records committed since open(), the handshake included.
    uint64_t records() const { return records_; }
    // The engine's counts after an event, beside the buffer (core::TailHeader).
    void publishCounts(uint64_t allocs, uint64_t frees, uint64_t missed) {
        if (!tail_) return;
        tail_->allocs = allocs;
        tail_->frees = frees;
        tail_->missed = missed;
    }

    // An Alloc held back instead of encoded: when its Free is the next record the
    // two go as one ShortLived record (a temporary's pair is encoded once). Any
    // other record, a send, or another deferral encodes it first. Counted in
    // records() from now. Not for a region's blocks (ShortLived has no region).
    // After prepareEvent(): the room it made is the held-back Alloc's.
    void deferAlloc(const core::AllocFields& a, uint64_t liveAfter);
    // The held-back Alloc, when it is of `address` on `device`: taken back (it
    // leaves records()) into *a, with the device's bytes after it.
    bool takeDeferred(uint8_t device, uint64_t address, core::AllocFields* a, uint64_t* liveAfter) {
        if (!deferred_ || deferredAlloc_.address != address || deferredAlloc_.device != device)
            return false;
        deferred_ = false;
        if (tail_) tail_->deferred = 0;
        --records_;
        publishUsed();
        *a = deferredAlloc_;
        *liveAfter = deferredLive_;
        // The ShortLived record takes its place in the buffer and in the facts.
        if (deferredNoted_) factCount_ = deferredFact_;
        return true;
    }

private:
    // Encodes the held-back Alloc into the buffer; false when the sink failed.
    // Inline: every reserve() asks, and mostly nothing is held back.
    bool settle() { return deferred_ ? encodeDeferred() : sink_ != nullptr; }
    bool encodeDeferred();
    // Sends the buffer, folded where that makes it smaller.
    bool send();
    void commitAs(uint8_t* end, SpanKind kind, uint64_t deltaNs);
    // The record that ends at used_ joins the buffer's spans.
    void addSpan(SpanKind kind);
    // The facts of the event record about to be committed; null where folding
    // is off or they do not fit (the buffer then goes as it is).
    EventFacts* noteEvent(uint8_t device, uint64_t liveAfter) {
        if (foldingOff_) return nullptr;
        if (liveAfter > high_[device]) high_[device] = liveAfter;
        if (!noteFacts_) return nullptr;
        if (factCount_ >= WindowCompactor::kMaxEvents || !facts_) {
            bufferFoldable_ = false;
            return nullptr;
        }
        EventFacts* e = &facts_[factCount_++];
        e->device = device;
        e->liveAfter = liveAfter;
        return e;
    }
    EventFacts* noteAlloc(const core::AllocFields& a, uint64_t liveAfter, EventFacts::Kind kind) {
        EventFacts* e = noteEvent(a.device, liveAfter);
        if (!e) return nullptr;
        if (a.nativeNode > UINT32_MAX || a.pyNode > UINT32_MAX) bufferFoldable_ = false;
        e->kind = kind;
        e->address = a.address;
        e->size = a.size;
        e->deltaNs = a.timeDeltaNs;
        e->nativeNode = static_cast<uint32_t>(a.nativeNode);
        e->pyNode = static_cast<uint32_t>(a.pyNode);
        return e;
    }
    // Folds the buffer, which holds `events` event records, into the other half
    // and makes that the buffer; nothing changes where folding does not make it
    // smaller.
    void fold(size_t events);
    // The buffer's Alloc, Free and ShortLived records, by its spans.
    size_t eventRecords() const;
    // The buffer's `events` event records came at kFoldEventsPerMs or faster
    // (Folding::Fast).
    bool cameFast(size_t events) const;
    // The buffer is empty: what folding counts starts again.
    void restartSpans();
    uint8_t* otherHalf();

    // The shared buffer, made once per process (nullptr: none, buf_ is buffer_).
    bool makeShared();
    // Where `used_` bytes are, and how many records the stream has, as the CLI
    // would read them after a kill.
    void publishUsed() {
        if (tail_) {
            tail_->used[half_] = used_;
            tail_->records[half_] = records_;
        }
    }

    Sink* sink_ = nullptr;
    uint8_t* buf_ = buffer_;
    // The header and buffer's mapping, shared (or a fork child's private copy of it).
    uint8_t* base_ = nullptr;
    core::TailHeader* tail_ = nullptr;
    int tailFd_ = -1;
    uint64_t sent_ = 0;  // stream bytes sent since open()
    size_t used_ = 0;
    uint64_t records_ = 0;
    uint64_t lastFlushNs_ = 0;
    bool deferred_ = false;
    core::AllocFields deferredAlloc_;
    uint64_t deferredLive_ = 0;
    bool deferredNoted_ = false;  // its facts are facts_[deferredFact_]
    // Which half of the memory buf_ is (0: the first); the other one is where
    // fold() writes. Private memory has its second half at privateHalf_.
    unsigned half_ = 0;
    uint8_t* privateHalf_ = nullptr;
    // What folding needs to know of the buffer: its spans of records by kind,
    // the facts of each event record, the stream's clock and each device's most
    // at its start.
    Span* spans_ = nullptr;
    size_t spanCount_ = 0;
    EventFacts* facts_ = nullptr;
    size_t factCount_ = 0;
    uint64_t generation_ = 1;    // of the buffer's contents: one more after each send
    size_t deferredFact_ = 0;    // the held-back Alloc's facts: facts_[deferredFact_]
    uint64_t clockNs_ = 0;       // the stream's clock after the last record
    uint64_t startClockNs_ = 0;  // ... before the buffer's first
    uint64_t high_[256] = {};
    uint64_t highBefore_[256] = {};
    bool bufferFoldable_ = true;
    bool foldingOff_ = false;
    bool resident_ = false;  // keepResident() was asked for
    // Facts are kept for this buffer: Folding::Always, or the one before came fast.
    bool noteFacts_ = false;
    Folding folding_ = Folding::Fast;
    uint64_t bufferStartNs_ = 0;  // CLOCK_MONOTONIC when the buffer was last emptied
    WindowCompactor compactor_;
    uint8_t* scratch_ = nullptr;  // an oversized record being encoded
    size_t scratchBytes_ = 0;
    uint8_t buffer_[kBufferBytes] = {};
};

}  // namespace memtool::collectors
