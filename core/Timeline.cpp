#include "core/Timeline.h"

#include <algorithm>

namespace memtool::core {

void Timeline::record(uint64_t timeNs, uint64_t bytes) {
    while ((timeNs >> shift_) >= kMaxBuckets) widen();
    // A time before the latest bucket (the stream's clock never goes back, but a
    // reader should not depend on it for its memory bound) joins that bucket.
    uint64_t index = timeNs >> shift_;
    if (!buckets_.empty()) index = std::max(index, buckets_.back().index);
    const Point p{timeNs, bytes, seq_++};
    if (buckets_.empty() || buckets_.back().index != index) {
        if (buckets_.empty()) buckets_.reserve(64);
        buckets_.push_back(Bucket{index, p, p, p, p});
        return;
    }
    Bucket& b = buckets_.back();
    // Strictly: a level reached again later keeps its first time.
    if (bytes > b.high.bytes) b.high = p;
    if (bytes < b.low.bytes) b.low = p;
    b.last = p;
}

void Timeline::widen() {
    ++shift_;
    size_t kept = 0;
    for (Bucket b : buckets_) {
        b.index >>= 1;
        if (kept > 0 && buckets_[kept - 1].index == b.index) {
            Bucket& into = buckets_[kept - 1];  // the earlier of the two
            if (b.high.bytes > into.high.bytes) into.high = b.high;
            if (b.low.bytes < into.low.bytes) into.low = b.low;
            into.last = b.last;
        } else {
            buckets_[kept++] = b;
        }
    }
    buckets_.resize(kept);
}

std::vector<TimelineSample> Timeline::samples() const {
    std::vector<TimelineSample> out;
    out.reserve(buckets_.size() * 2);
    for (const Bucket& b : buckets_) {
        Point points[] = {b.first, b.low, b.high, b.last};
        std::sort(std::begin(points), std::end(points),
                  [](const Point& x, const Point& y) { return x.seq < y.seq; });
        for (size_t i = 0; i < 4; ++i)
            if (i == 0 || points[i].seq != points[i - 1].seq)
                out.push_back(TimelineSample{points[i].timeNs, points[i].bytes});
    }
    return out;
}

}  // namespace memtool::core
