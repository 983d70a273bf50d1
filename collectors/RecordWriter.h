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

    RecordWriter() = default;
    RecordWriter(const RecordWriter&) = delete;
    RecordWriter& operator=(const RecordWriter&) = delete;

    // Starts a stream on `sink`: counters and buffer start empty.
    void open(Sink* sink, uint64_t nowNs);
    // Drops the sink without sending what is buffered (fork child, lost peer).
    void detach();
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
        return sink_ && used_ > 0 && nowNs - lastFlushNs_ > kFlushIntervalNs;
    }

    // Records committed since open(), the handshake included.
    uint64_t records() const { return records_; }

    // Where the next record starts. While the one record committed after it is
    // the last and still buffered, it can be taken back and replaced (an Alloc by
    // the ShortLived record its Free makes of it).
    struct Mark {
        size_t used = 0;
        uint64_t records = 0;
        uint64_t epoch = 0;
    };
    Mark mark() const { return {used_, records_, epoch_}; }
    bool oneRecordSince(const Mark& m) const {
        return sink_ && m.epoch == epoch_ && records_ == m.records + 1;
    }
    // Takes that record back: the buffer ends at `m` again.
    void rewind(const Mark& m) {
        used_ = m.used;
        records_ = m.records;
    }

private:
    Sink* sink_ = nullptr;
    size_t used_ = 0;
    uint64_t records_ = 0;
    uint64_t epoch_ = 0;  // counts sends, opens and detaches: a mark from before one is stale
    uint64_t lastFlushNs_ = 0;
    uint8_t* scratch_ = nullptr;  // an oversized record being encoded
    size_t scratchBytes_ = 0;
    uint8_t buffer_[kBufferBytes] = {};
};

}  // namespace memtool::collectors
