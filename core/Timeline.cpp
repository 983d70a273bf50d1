#include "core/Timeline.h"

#include <algorithm>

namespace memtool::core {

void Timeline::recordInNewBucket(uint64_t timeNs, uint64_t bytes) {
    // A time before the latest bucket (the stream's clock never goes back, but a
    // reader should not depend on it for its memory bound) joins that bucket:
    // record() took that case.
    while ((timeNs >> shift_) >= kMaxBuckets) widen();
    const uint64_t index = timeNs >> shift_;
    if (buckets_.empty()) buckets_.reserve(64);
    // After a widening the sample may fall in the latest bucket after all.
    if (!buckets_.empty() && buckets_.back().index >= index) {
        record(timeNs, bytes);
        return;
    }
    const Point p{timeNs, bytes, seq_++};
    buckets_.push_back(Bucket{index, p, p, p, p});
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
