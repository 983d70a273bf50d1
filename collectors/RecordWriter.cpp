#include "collectors/RecordWriter.h"

#include <sys/mman.h>

namespace memtool::collectors {

void RecordWriter::open(Sink* sink, uint64_t nowNs) {
    // The whole buffer resident from the start: no page fault in a hook, and no
    // growth of the process later (a pause's records must not add to it).
    for (size_t i = 0; i < kBufferBytes; i += 4096)
        reinterpret_cast<volatile uint8_t*>(buffer_)[i] = 0;
    sink_ = sink;
    used_ = 0;
    records_ = 0;
    deferred_ = false;
    lastFlushNs_ = nowNs;
}

void RecordWriter::detach() {
    sink_ = nullptr;
    used_ = 0;
    deferred_ = false;
}

void RecordWriter::deferAlloc(const core::AllocFields& a) {
    if (!sink_ || !settle()) return;
    deferredAlloc_ = a;
    deferred_ = true;
    ++records_;
}

bool RecordWriter::encodeDeferred() {
    deferred_ = false;
    if (used_ + core::kMaxFixedRecordBytes > kBufferBytes && !send()) return false;
    used_ = static_cast<size_t>(core::encodeAlloc(buffer_ + used_, deferredAlloc_) - buffer_);
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
    return buffer_ + used_;
}

void RecordWriter::commit(uint8_t* end) {
    ++records_;
    if (scratch_) {
        if (sink_ && !sink_->write(scratch_, static_cast<size_t>(end - scratch_))) sink_ = nullptr;
        munmap(scratch_, scratchBytes_);
        scratch_ = nullptr;
        return;
    }
    used_ = static_cast<size_t>(end - buffer_);
}

bool RecordWriter::flush() { return settle() && send(); }

bool RecordWriter::send() {
    if (!sink_) return false;
    if (used_ > 0 && !sink_->write(buffer_, used_)) {
        sink_ = nullptr;
        used_ = 0;
        return false;
    }
    used_ = 0;
    return true;
}

bool RecordWriter::flushIfDue(uint64_t nowNs, FlushPolicy policy) {
    const bool timerDue = policy == FlushPolicy::Timed && nowNs - lastFlushNs_ > kFlushIntervalNs;
    if (used_ < kFlushAt && !timerDue) return sink_ != nullptr;
    lastFlushNs_ = nowNs;
    return flush();
}

}  // namespace memtool::collectors
