#pragma once
// Records on their way to a sink: encoded in place into one buffer and sent in
// large writes. Not thread-safe: the engine calls it under its lock.
//
// Use: p = reserve(n); p = core::encodeX(p, ...); commit(p). A record larger
// than the buffer (a huge command line) is encoded into scratch memory from
// mmap and sent on its own. No heap allocation, stdio or exception anywhere.

#include <cstddef>
#include <cstdint>

#include "collectors/Sink.h"
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

    // Starts a stream on `sink`: counters and buffer start empty. The buffer is
    // one `memtool run` can read after a kill (core::TailHeader), made here the
    // first time and handed to the sink; without it (no memfd), a private one.
    void open(Sink* sink, uint64_t nowNs);
    // Drops the sink without sending what is buffered (fork child, lost peer).
    void detach();
    // In a fork child, before anything else: the buffer it inherited is its
    // parent's, shared; it gets private memory in its place (and makes its own
    // shared buffer at its next open()).
    void leaveParentsBuffer();
    bool isOpen() const { return sink_ != nullptr; }

    // Room for a record of at most `bytes`; null when the sink has failed.
    uint8_t* reserve(size_t bytes);
    // The record reserved last ends at `end`.
    void commit(uint8_t* end);

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
    void deferAlloc(const core::AllocFields& a);
    // The held-back Alloc, when it is of `address` on `device`: taken back (it
    // leaves records()) into *a.
    bool takeDeferred(uint8_t device, uint64_t address, core::AllocFields* a) {
        if (!deferred_ || deferredAlloc_.address != address || deferredAlloc_.device != device)
            return false;
        deferred_ = false;
        if (tail_) tail_->deferred = 0;
        --records_;
        publishUsed();
        *a = deferredAlloc_;
        return true;
    }

private:
    // Encodes the held-back Alloc into the buffer; false when the sink failed.
    // Inline: every reserve() asks, and mostly nothing is held back.
    bool settle() { return deferred_ ? encodeDeferred() : sink_ != nullptr; }
    bool encodeDeferred();
    // Sends the buffer as it is.
    bool send();

    // The shared buffer, made once per process (nullptr: none, buf_ is buffer_).
    bool makeShared();
    // The start of the header and buffer's mapping (buf_ not buffer_: shared, or
    // a fork child's private copy of it).
    uint8_t* mapping() const { return buf_ - core::kTailHeaderBytes; }
    // Where `used_` bytes are, and how many records the stream has, as the CLI
    // would read them after a kill.
    void publishUsed() {
        if (tail_) {
            tail_->used = used_;
            tail_->records = records_;
        }
    }

    Sink* sink_ = nullptr;
    uint8_t* buf_ = buffer_;
    core::TailHeader* tail_ = nullptr;
    int tailFd_ = -1;
    uint64_t sent_ = 0;  // stream bytes sent since open()
    size_t used_ = 0;
    uint64_t records_ = 0;
    uint64_t lastFlushNs_ = 0;
    bool deferred_ = false;
    core::AllocFields deferredAlloc_;
    uint8_t* scratch_ = nullptr;  // an oversized record being encoded
    size_t scratchBytes_ = 0;
    uint8_t buffer_[kBufferBytes] = {};
};

}  // namespace memtool::collectors
