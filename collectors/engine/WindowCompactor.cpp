#include "collectors/engine/WindowCompactor.h"

#include <sys/mman.h>

#include <cstring>

#include "collectors/engine/MappedTable.h"
#include "core/Protocol.h"

namespace memtool::collectors {

// The block an Alloc record of the window made, kept at its record's index.
struct WindowCompactor::Block {
    uint32_t stack;
    bool live;
};

struct WindowCompactor::Stack {
    uint64_t nativeNode, pyNode;
    uint64_t allocs, bytes, maxAtAlloc;
    uint64_t liveNow;     // bytes of its window blocks live now
    uint64_t liveAtPeak;  // ... at its device's latest new peak, when stamp says so
    uint32_t stamp;       // the device's peaks when liveAtPeak was taken
    uint8_t device;
};

struct WindowCompactor::OldFree {
    uint64_t address;
    uint32_t peaks;  // its device's new peaks in the window before it
    uint8_t device;
};

struct WindowCompactor::Point {
    uint64_t timeNs;
    uint64_t bytes;
    uint64_t seq;  // order of recording
    uint8_t device;
};

struct WindowCompactor::Device {
    uint32_t generation;  // the window it was last seen in
    uint64_t allocs, allocBytes, frees, freedBytes;
    uint32_t peaks;  // new peaks in the window
    uint64_t peakBytes, peakTimeNs;
    // The M4 samples of the bucket being filled (core/Timeline.h).
    unsigned shift;
    bool bucketOpen;
    uint64_t bucket;
    Point first, low, high, last;
};

namespace {

constexpr size_t kSlots = 2 * WindowCompactor::kMaxEvents;  // a power of two
// A window's timeline points: at most one a sample, two a ShortLived record.
constexpr size_t kMaxPoints = 2 * WindowCompactor::kMaxEvents;

template <typename T>
T* mapArray(size_t n) {
    return static_cast<T*>(mapZeroed(n * sizeof(T)));
}

}  // namespace

WindowCompactor::~WindowCompactor() {
    if (!mapped_) return;
    munmap(blocks_, kMaxEvents * sizeof(Block));
    munmap(liveIndex_, kMaxEvents * sizeof(uint32_t));
    munmap(stacks_, kMaxEvents * sizeof(Stack));
    munmap(oldFrees_, kMaxEvents * sizeof(OldFree));
    munmap(points_, kMaxPoints * sizeof(Point));
    munmap(stackSlots_, kSlots * sizeof(Slot));
    munmap(devices_, 256 * sizeof(Device));
}

bool WindowCompactor::ready() {
    if (mapped_ || failed_) return mapped_;
    blocks_ = mapArray<Block>(kMaxEvents);
    liveIndex_ = mapArray<uint32_t>(kMaxEvents);
    stacks_ = mapArray<Stack>(kMaxEvents);
    oldFrees_ = mapArray<OldFree>(kMaxEvents);
    points_ = mapArray<Point>(kMaxPoints);
    stackSlots_ = mapArray<Slot>(kSlots);
    devices_ = mapArray<Device>(256);
    mapped_ = blocks_ && liveIndex_ && stacks_ && oldFrees_ && points_ && stackSlots_ && devices_;
    if (!mapped_) {
        failed_ = true;  // what was mapped stays: a few pages of address space
        return false;
    }
    return true;
}

void WindowCompactor::begin(size_t events, size_t first) {
    if (++generation_ == 0) {  // after 2^32 windows: the slots' marks could repeat
        rezeroMapped(stackSlots_, kSlots * sizeof(Slot));
        rezeroMapped(devices_, 256 * sizeof(Device));
        generation_ = 1;
    }
    deviceCount_ = stackCount_ = oldFreeCount_ = pointCount_ = 0;
    firstRecord_ = endRecord_ = first;
    // Tables twice the buffer's events at most: a small buffer's stay in cache.
    mask_ = 1023;
    while (mask_ + 1 < 2 * events && mask_ + 1 < kSlots) mask_ = 2 * mask_ + 1;
    windowStartNs_ = clockNs_;
}

WindowCompactor::Device& WindowCompactor::device(uint8_t code, uint64_t timeNs) {
    Device& d = devices_[code];
    if (d.generation != generation_) {
        std::memset(&d, 0, sizeof d);
        d.generation = generation_;
        // Buckets no finer than the reader's will ever be for this device: its
        // timeline has seen times up to this one at least.
        d.shift = core::timelineShift(timeNs);
        deviceOrder_[deviceCount_++] = code;
    }
    return d;
}

uint32_t WindowCompactor::stack(uint8_t device, uint64_t nativeNode, uint64_t pyNode) {
    // A loop allocates from a few stacks in turn: the last answers first.
    const uint64_t hash = mixHash(nativeNode * 0x9e3779b97f4a7c15ULL ^ pyNode ^ device);
    Slot& recent = recent_[hash & (kRecent - 1)];
    if (recent.generation == generation_ && recent.a == nativeNode && recent.b == pyNode &&
        recent.device == device)
        return recent.index;
    const size_t mask = mask_;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        Slot& s = stackSlots_[i];
        if (s.generation == generation_) {
            if (s.a == nativeNode && s.b == pyNode && s.device == device) {
                recent = s;
                return s.index;
            }
            continue;
        }
        s = Slot{nativeNode, pyNode, generation_, static_cast<uint32_t>(stackCount_), device};
        Stack& st = stacks_[stackCount_++];
        std::memset(&st, 0, sizeof st);
        st.nativeNode = nativeNode;
        st.pyNode = pyNode;
        st.device = device;
        recent = s;
        return s.index;
    }
}

void WindowCompactor::touch(Stack& s, const Device& d) {
    // As the reader's stacks: what it held at the latest peak, taken before its
    // first change after that peak.
    if (s.stamp != d.peaks) {
        s.liveAtPeak = s.liveNow;
        s.stamp = d.peaks;
    }
}

void WindowCompactor::allocated(Device& d, uint32_t index, uint64_t size, uint64_t liveAfter,
                                uint64_t timeNs) {
    Stack& s = stacks_[index];
    touch(s, d);
    s.liveNow += size;
    ++s.allocs;
    s.bytes += size;
    ++d.allocs;
    d.allocBytes += size;
    uint64_t& high = high_[stacks_[index].device];
    if (liveAfter > high) {
        high = liveAfter;
        ++d.peaks;
        d.peakBytes = liveAfter;
        d.peakTimeNs = timeNs;
    }
    if (liveAfter > s.maxAtAlloc) s.maxAtAlloc = liveAfter;
}

void WindowCompactor::released(Device& d, uint32_t index, uint64_t size) {
    Stack& s = stacks_[index];
    touch(s, d);
    s.liveNow -= size;
    ++d.frees;
    d.freedBytes += size;
}

inline void WindowCompactor::sample(Device& d, uint64_t timeNs, uint64_t bytes) {
    const uint64_t bucket = timeNs >> d.shift;
    const Point p{timeNs, bytes, ++seq_, 0};
    if (!d.bucketOpen || bucket != d.bucket) {
        closeBucket(d);
        d.bucketOpen = true;
        d.bucket = bucket;
        d.first = d.low = d.high = d.last = p;
        return;
    }
    // Strictly: a level reached again keeps its first time (Timeline::record).
    if (bytes > d.high.bytes) d.high = p;
    if (bytes < d.low.bytes) d.low = p;
    d.last = p;
}

void WindowCompactor::closeBucket(Device& d) {
    if (!d.bucketOpen) return;
    d.bucketOpen = false;
    // Its first, lowest, highest and last samples, in the order they were
    // recorded, each once: recorded in that order they leave any bucket that
    // holds this one as all of its samples would.
    Point kept[4] = {d.first, d.low, d.high, d.last};
    for (size_t i = 1; i < 4; ++i)
        for (size_t j = i; j > 0 && kept[j].seq < kept[j - 1].seq; --j) {
            const Point t = kept[j];
            kept[j] = kept[j - 1];
            kept[j - 1] = t;
        }
    const uint8_t code = static_cast<uint8_t>(&d - devices_);
    for (size_t i = 0; i < 4; ++i) {
        if (i > 0 && kept[i].seq == kept[i - 1].seq) continue;
        Point& p = points_[pointCount_++];
        p = kept[i];
        p.device = code;
    }
}

void WindowCompactor::fold(const EventFacts* facts, size_t index) {
    const EventFacts& e = facts[index];
    endRecord_ = index + 1;
    clockNs_ += e.deltaNs;
    Device& d = device(e.device, clockNs_);
    if (e.kind == EventFacts::Free) {
        // Its block, where an Alloc of this window made it; else one the reader has.
        const size_t from = e.allocRecord ? e.allocRecord - 1 : SIZE_MAX;
        if (from >= firstRecord_ && from < index && facts[from].kind == EventFacts::Alloc &&
            blocks_[from].live) {
            Block& b = blocks_[from];
            released(d, b.stack, facts[from].size);
            b.live = false;
        } else {
            oldFrees_[oldFreeCount_++] = OldFree{e.address, d.peaks, e.device};
        }
        sample(d, clockNs_, e.liveAfter);
        return;
    }
    const uint32_t from = stack(e.device, e.nativeNode, e.pyNode);
    allocated(d, from, e.size, e.liveAfter, clockNs_);
    sample(d, clockNs_, e.liveAfter);
    if (e.kind == EventFacts::ShortLived) {
        clockNs_ += e.freeDeltaNs;
        released(d, from, e.size);
        sample(d, clockNs_, e.liveAfterFree);
        return;
    }
    blocks_[index] = Block{from, true};
}

namespace {

// Where a window goes: counted (how many bytes it takes) or written.
struct CountBytes {
    size_t n = 0;
    void byte(uint8_t) { ++n; }
    void varint(uint64_t v) { n += core::varintBytes(v); }
};
struct WriteBytes {
    uint8_t* p;
    void byte(uint8_t b) { *p++ = b; }
    void varint(uint64_t v) { p = core::putVarint(p, v); }
};

}  // namespace

template <typename Out>
void WindowCompactor::emit(Out& out, const EventFacts* facts) const {
    out.byte(static_cast<uint8_t>(core::RecordTag::Window));
    out.varint(clockNs_ - windowStartNs_);
    out.varint(deviceCount_);
    for (size_t i = 0; i < deviceCount_; ++i) {
        const uint8_t code = deviceOrder_[i];
        const Device& d = devices_[code];
        out.byte(code);
        out.varint(d.allocs);
        out.varint(d.allocBytes);
        out.varint(d.frees);
        out.varint(d.freedBytes);
        out.varint(d.peaks ? d.peakBytes : 0);
        if (d.peaks) out.varint(d.peakTimeNs - windowStartNs_);
        size_t points = 0;
        for (size_t j = 0; j < pointCount_; ++j) points += points_[j].device == code;
        out.varint(points);
        uint64_t t = windowStartNs_;
        for (size_t j = 0; j < pointCount_; ++j) {
            const Point& pt = points_[j];
            if (pt.device != code) continue;
            out.varint(pt.timeNs - t);
            out.varint(pt.bytes);
            t = pt.timeNs;
        }
    }
    out.varint(stackCount_);
    for (size_t i = 0; i < stackCount_; ++i) {
        const Stack& s = stacks_[i];
        const Device& d = devices_[s.device];
        out.byte(s.device);
        out.varint(s.nativeNode);
        out.varint(s.pyNode);
        out.varint(s.allocs);
        out.varint(s.bytes);
        out.varint(s.maxAtAlloc);
        out.varint(d.peaks ? (s.stamp == d.peaks ? s.liveAtPeak : s.liveNow) : 0);
    }
    out.varint(liveCount_);
    for (size_t j = 0; j < liveCount_; ++j) {
        const uint32_t i = liveIndex_[j];
        out.varint(blocks_[i].stack);
        out.varint(facts[i].address);
        out.varint(facts[i].size);
    }
    out.varint(oldFreeCount_);
    for (size_t i = 0; i < oldFreeCount_; ++i) {
        const OldFree& f = oldFrees_[i];
        out.byte(f.device);
        out.varint(f.address);
        out.byte(f.peaks < devices_[f.device].peaks ? core::kWindowFreeBeforePeak : 0);
    }
}

void WindowCompactor::end(const Input& in, size_t firstSpan, size_t lastSpan) {
    size_t rawBytes = 0;
    for (size_t i = firstSpan; i < lastSpan; ++i)
        if (in.spans[i].kind == SpanKind::Events)
            rawBytes += in.spans[i].end - (i == 0 ? 0 : in.spans[i - 1].end);
    for (size_t i = 0; i < deviceCount_; ++i) closeBucket(devices_[deviceOrder_[i]]);
    // The window's blocks still live, once (the Alloc records' own places are reused).
    liveCount_ = 0;
    for (size_t i = firstRecord_; i < endRecord_; ++i)
        if (in.facts[i].kind == EventFacts::Alloc && blocks_[i].live)
            liveIndex_[liveCount_++] = static_cast<uint32_t>(i);
    // Measured first: written only where it is smaller, so that the output never
    // outgrows the input.
    CountBytes size;
    emit(size, in.facts);
    if (size.n < rawBytes) {
        WriteBytes write{out_};
        emit(write, in.facts);
        out_ = write.p;
        ++outRecords_;
        return;
    }
    for (size_t i = firstSpan; i < lastSpan; ++i) {
        const Span& s = in.spans[i];
        if (s.kind != SpanKind::Events) continue;
        const uint32_t start = i == 0 ? 0 : in.spans[i - 1].end;
        std::memcpy(out_, in.records + start, s.end - start);
        out_ += s.end - start;
        outRecords_ += s.records;
    }
}

size_t WindowCompactor::compact(const Input& in, uint8_t* out, uint64_t* records) {
    const size_t total = in.spanCount ? in.spans[in.spanCount - 1].end : 0;
    if (!ready()) {
        std::memcpy(out, in.records, total);
        *records = 0;
        for (size_t i = 0; i < in.spanCount; ++i) *records += in.spans[i].records;
        return total;
    }
    out_ = out;
    outRecords_ = 0;
    std::memcpy(high_, in.highBefore, sizeof high_);
    clockNs_ = in.startClockNs;
    size_t events = 0;
    for (size_t i = 0; i < in.spanCount; ++i)
        if (in.spans[i].kind == SpanKind::Events) events += in.spans[i].records;
    size_t record = 0, firstSpan = 0;
    bool open = false;
    for (size_t i = 0; i < in.spanCount; ++i) {
        const Span& s = in.spans[i];
        const uint32_t start = i == 0 ? 0 : in.spans[i - 1].end;
        if (s.kind == SpanKind::Events) {
            if (!open) {
                begin(events - record, record);
                open = true;
                firstSpan = i;
            }
            for (const size_t last = record + s.records; record < last; ++record)
                fold(in.facts, record);
            continue;
        }
        if (s.kind == SpanKind::Others && open) {
            end(in, firstSpan, i);
            open = false;
        }
        std::memcpy(out_, in.records + start, s.end - start);
        out_ += s.end - start;
        outRecords_ += s.records;
        clockNs_ = s.clockNs;
    }
    if (open) end(in, firstSpan, in.spanCount);
    *records = outRecords_;
    return static_cast<size_t>(out_ - out);
}

}  // namespace memtool::collectors
