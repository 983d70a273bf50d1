#include "collectors/engine/RecordWriter.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "collectors/engine/HighDescriptor.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/MonotonicClock.h"
#include "collectors/engine/OwnDescriptors.h"

namespace memtool::collectors {

namespace {

// The header, then the buffer's two halves (the records, and what fold() writes).
constexpr size_t kSharedBytes = core::kTailHeaderBytes + 2 * RecordWriter::kBufferBytes;

// Stores before it are not moved after it by the compiler: a kill between two
// of the header's fields leaves them in an order the CLI can trust.
inline void ordered() { std::atomic_signal_fence(std::memory_order_seq_cst); }

}  // namespace

RecordWriter::~RecordWriter() {
    if (base_) munmap(base_, kSharedBytes);
    if (privateHalf_) munmap(privateHalf_, kBufferBytes);
    if (spans_) munmap(spans_, WindowCompactor::kMaxSpans * sizeof(Span));
    if (facts_) munmap(facts_, WindowCompactor::kMaxEvents * sizeof(EventFacts));
    own::release(tailFd_);
}

bool RecordWriter::makeShared() {
    if (tail_) return true;
    // High in the table, as the socket: out of the way of a program that closes
    // its low descriptors (a stream that starts again sends it again).
    const int fd = moveHigh(memfd_create("memtool-records", MFD_CLOEXEC));
    if (fd < 0) return false;
    void* p = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(kSharedBytes)) == 0)
        p = mmap(nullptr, kSharedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ::close(fd);
        return false;
    }
    if (base_) munmap(base_, kSharedBytes);  // a child's private copy
    base_ = static_cast<uint8_t*>(p);
    tail_ = static_cast<core::TailHeader*>(p);
    half_ = 0;
    buf_ = base_ + core::kTailHeaderBytes;
    tailFd_ = fd;
    own::keep(fd);
    return true;
}

void RecordWriter::open(Sink* sink, uint64_t nowNs, Folding folding) {
    makeShared();  // without it, the buffer is private: a kill loses what it holds
    // The buffer's pages come as records fill them: a fork child that records a
    // few events makes a page or two resident, not all 64 (their first touches
    // cost it ~1 ms here). A stream with pausable regions makes them all
    // resident when it declares the first (keepResident), and a stream that
    // starts again in such a process (a fork child's) has them from the start.
    if (resident_) {
        resident_ = false;
        keepResident();
    }
    if (!spans_) spans_ = static_cast<Span*>(mapZeroed(WindowCompactor::kMaxSpans * sizeof(Span)));
    if (!facts_)
        facts_ =
            static_cast<EventFacts*>(mapZeroed(WindowCompactor::kMaxEvents * sizeof(EventFacts)));
    sink_ = sink;
    used_ = 0;
    sent_ = 0;
    records_ = 0;
    deferred_ = false;
    lastFlushNs_ = nowNs;
    clockNs_ = 0;
    std::memset(high_, 0, sizeof high_);
    folding_ = folding;
    foldingOff_ = folding == Folding::Never;
    noteFacts_ = folding == Folding::Always;  // Fast: from the second buffer on, if it pays
    restartSpans();
    if (tail_) {
        publishUsed();  // none, and no records yet
        tail_->half = half_;
        tail_->deferred = 0;
        tail_->bufferStart = 0;
        publishCounts(0, 0, 0);
        ordered();
        tail_->magic = core::kTailMagic;
        sink->attachTail(tailFd_);
    }
}

void RecordWriter::detach() {
    sink_ = nullptr;
    used_ = 0;
    deferred_ = false;
    publishUsed();
    if (tail_) tail_->deferred = 0;
}

void RecordWriter::leaveParentsBuffer() {
    if (!tail_) return;
    // Private, zeroed memory at the same place: nothing this process writes from
    // here on reaches its parent's buffer.
    void* p = mmap(base_, kSharedBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        buf_ = buffer_;  // the mapping stays the parent's: never write to it again
        base_ = nullptr;
    }
    tail_ = nullptr;
    own::release(tailFd_);
    tailFd_ = -1;
}

void RecordWriter::deferAlloc(const core::AllocFields& a, uint64_t liveAfter) {
    if (!sink_ || !settle()) return;
    deferredAlloc_ = a;
    deferredLive_ = liveAfter;
    // Its facts now, in the place its record will have (prepareEvent() made room).
    deferredFact_ = factCount_;
    deferredNoted_ = noteAlloc(a, liveAfter, EventFacts::Alloc) != nullptr;
    deferred_ = true;
    if (tail_) {
        tail_->deferredAlloc = a;
        ordered();
        tail_->deferred = 1;
    }
    ++records_;
    publishUsed();
}

bool RecordWriter::encodeDeferred() {
    deferred_ = false;
    if (tail_) tail_->deferred = 0;
    // prepareEvent() made room for it; were there none, the buffer goes first,
    // and as it is: the facts of this record are noted in it already.
    if (used_ + core::kMaxFixedRecordBytes > kBufferBytes) {
        bufferFoldable_ = false;
        if (!send()) return false;
        bufferFoldable_ = false;
    }
    // Counted in records_ when it was held back: in its span from now.
    clockNs_ += deferredAlloc_.timeDeltaNs;
    used_ = static_cast<size_t>(core::encodeAlloc(buf_ + used_, deferredAlloc_) - buf_);
    addSpan(SpanKind::Events);
    ordered();
    publishUsed();
    return true;
}

uint8_t* RecordWriter::reserve(size_t bytes) {
    if (!sink_ || !settle()) return nullptr;
    if (bytes > kBufferBytes) {
        if (!flush()) return nullptr;
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return nullptr;
        scratch_ = static_cast<uint8_t*>(p);
        scratchBytes_ = bytes;
        return scratch_;
    }
    if (used_ + bytes > kBufferBytes && !flush()) return nullptr;
    return buf_ + used_;
}

void RecordWriter::commitAs(uint8_t* end, SpanKind kind, uint64_t deltaNs) {
    ++records_;
    clockNs_ += deltaNs;
    if (scratch_) {
        const size_t bytes = static_cast<size_t>(end - scratch_);
        if (sink_ && !sink_->write(scratch_, bytes)) sink_ = nullptr;
        munmap(scratch_, scratchBytes_);
        scratch_ = nullptr;
        sent_ += bytes;  // the buffer is empty: it starts after this record
        if (tail_) tail_->bufferStart = sent_;
        publishUsed();
        restartSpans();
        return;
    }
    used_ = static_cast<size_t>(end - buf_);
    addSpan(kind);
    ordered();
    publishUsed();
}

void RecordWriter::addSpan(SpanKind kind) {
    if (!spans_) {
        bufferFoldable_ = false;
        return;
    }
    if (spanCount_ > 0 && spans_[spanCount_ - 1].kind == kind) {
        Span& s = spans_[spanCount_ - 1];
        s.end = static_cast<uint32_t>(used_);
        ++s.records;
        s.clockNs = clockNs_;
    } else if (spanCount_ < WindowCompactor::kMaxSpans) {
        spans_[spanCount_++] = Span{static_cast<uint32_t>(used_), 1, clockNs_, kind};
    } else {
        bufferFoldable_ = false;
    }
}

void RecordWriter::restartSpans() {
    bufferStartNs_ = folding_ == Folding::Fast ? monotonicNs() : 0;
    spanCount_ = 0;
    factCount_ = 0;
    ++generation_;
    bufferFoldable_ = true;
    startClockNs_ = clockNs_;
    std::memcpy(highBefore_, high_, sizeof high_);
}

void RecordWriter::keepResident() {
    if (resident_) return;
    resident_ = true;
    // Each page written with what it holds: records may be there already.
    volatile uint8_t* b = buf_;
    for (size_t i = 0; i < kBufferBytes; i += 4096) b[i] = b[i];
}

uint8_t* RecordWriter::otherHalf() {
    if (tail_) return base_ + core::kTailHeaderBytes + (half_ ^ 1) * kBufferBytes;
    if (buf_ != buffer_) return buffer_;
    if (!privateHalf_) privateHalf_ = static_cast<uint8_t*>(mapZeroed(kBufferBytes));
    return privateHalf_;
}

size_t RecordWriter::eventRecords() const {
    size_t events = 0;
    for (size_t i = 0; i < spanCount_; ++i)
        if (spans_[i].kind == SpanKind::Events) events += spans_[i].records;
    return events;
}

// On the precise clock: a buffer's rate is judged over spans of a few
// milliseconds, which the kernel tick's coarse clock (4 ms here) would misjudge
// by a third. Read twice a buffer (here and in restartSpans).
bool RecordWriter::cameFast(size_t events) const {
    return cameFastOver(events, monotonicNs() - bufferStartNs_);
}

void RecordWriter::fold(size_t events) {
    if (foldingOff_ || !bufferFoldable_ || factCount_ == 0 || spanCount_ == 0 ||
        spans_[spanCount_ - 1].end != used_)
        return;
    if (events != factCount_) return;  // one fact per event record, or nothing folds
    uint8_t* other = otherHalf();
    if (!other) return;
    WindowCompactor::Input in;
    in.records = buf_;
    in.spans = spans_;
    in.spanCount = spanCount_;
    in.startClockNs = startClockNs_;
    in.facts = facts_;
    in.highBefore = highBefore_;
    uint64_t folded = 0;
    const size_t bytes = compactor_.compact(in, other, &folded);
    if (bytes >= used_) return;
    uint64_t buffered = 0;
    for (size_t i = 0; i < spanCount_; ++i) buffered += spans_[i].records;
    records_ = records_ - buffered + folded;
    // The other half's figures first, then the switch: a kill at any point
    // leaves the header naming a half whose figures are its own.
    buf_ = other;
    used_ = bytes;
    half_ ^= 1;
    publishUsed();
    ordered();
    if (tail_) tail_->half = half_;
}

bool RecordWriter::flush() { return settle() && send(); }

bool RecordWriter::send() {
    if (!sink_) return false;
    // A buffer that came fast is folded where its facts were noted, and the
    // next one's are: a program that allocates slowly never pays for them.
    const size_t events = folding_ == Folding::Never ? 0 : eventRecords();
    const bool fast =
        folding_ == Folding::Always || (folding_ == Folding::Fast && cameFast(events));
    if (used_ > 0 && fast) fold(events);
    noteFacts_ = fast;
    if (used_ > 0 && !sink_->write(buf_, used_)) {
        sink_ = nullptr;
        used_ = 0;
        publishUsed();
        return false;
    }
    // Emptied first, moved on second: a kill between the two leaves nothing to read back.
    sent_ += used_;
    used_ = 0;
    publishUsed();
    ordered();
    if (tail_) tail_->bufferStart = sent_;
    restartSpans();
    return true;
}

bool RecordWriter::flushIfDue(uint64_t nowNs, FlushPolicy policy) {
    const bool timerDue = policy == FlushPolicy::Timed && nowNs - lastFlushNs_ > kFlushIntervalNs;
    if (used_ < kFlushAt && !timerDue) return sink_ != nullptr;
    lastFlushNs_ = nowNs;
    return flush();
}

}  // namespace memtool::collectors
