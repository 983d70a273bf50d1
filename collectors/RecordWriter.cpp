#include "collectors/RecordWriter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "collectors/HighDescriptor.h"
#include "collectors/OwnDescriptors.h"

namespace memtool::collectors {

namespace {

constexpr size_t kSharedBytes = core::kTailHeaderBytes + RecordWriter::kBufferBytes;

// Stores before it are not moved after it by the compiler: a kill between two
// of the header's fields leaves them in an order the CLI can trust.
inline void ordered() { std::atomic_signal_fence(std::memory_order_seq_cst); }

}  // namespace

RecordWriter::~RecordWriter() {
    if (buf_ != buffer_) munmap(mapping(), kSharedBytes);
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
    if (buf_ != buffer_) munmap(mapping(), kSharedBytes);  // a child's private copy
    tail_ = static_cast<core::TailHeader*>(p);
    buf_ = static_cast<uint8_t*>(p) + core::kTailHeaderBytes;
    tailFd_ = fd;
    own::keep(fd);
    return true;
}

void RecordWriter::open(Sink* sink, uint64_t nowNs) {
    makeShared();  // without it, the buffer is private: a kill loses what it holds
    // The whole buffer resident from the start: no page fault in a hook, and no
    // growth of the process later (a pause's records must not add to it).
    for (size_t i = 0; i < kBufferBytes; i += 4096)
        reinterpret_cast<volatile uint8_t*>(buf_)[i] = 0;
    sink_ = sink;
    used_ = 0;
    sent_ = 0;
    records_ = 0;
    deferred_ = false;
    lastFlushNs_ = nowNs;
    if (tail_) {
        publishUsed();  // none, and no records yet
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
    void* p = mmap(mapping(), kSharedBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        buf_ = buffer_;  // the mapping stays the parent's: never write to it again
    }
    tail_ = nullptr;
    own::release(tailFd_);
    tailFd_ = -1;
}

void RecordWriter::deferAlloc(const core::AllocFields& a) {
    if (!sink_ || !settle()) return;
    deferredAlloc_ = a;
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
    if (used_ + core::kMaxFixedRecordBytes > kBufferBytes && !send()) return false;
    used_ = static_cast<size_t>(core::encodeAlloc(buf_ + used_, deferredAlloc_) - buf_);
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

void RecordWriter::commit(uint8_t* end) {
    ++records_;
    if (scratch_) {
        const size_t bytes = static_cast<size_t>(end - scratch_);
        if (sink_ && !sink_->write(scratch_, bytes)) sink_ = nullptr;
        munmap(scratch_, scratchBytes_);
        scratch_ = nullptr;
        sent_ += bytes;  // the buffer is empty: it starts after this record
        if (tail_) tail_->bufferStart = sent_;
        publishUsed();
        return;
    }
    used_ = static_cast<size_t>(end - buf_);
    ordered();
    publishUsed();
}

bool RecordWriter::flush() { return settle() && send(); }

bool RecordWriter::send() {
    if (!sink_) return false;
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
    return true;
}

bool RecordWriter::flushIfDue(uint64_t nowNs, FlushPolicy policy) {
    const bool timerDue = policy == FlushPolicy::Timed && nowNs - lastFlushNs_ > kFlushIntervalNs;
    if (used_ < kFlushAt && !timerDue) return sink_ != nullptr;
    lastFlushNs_ = nowNs;
    return flush();
}

}  // namespace memtool::collectors
