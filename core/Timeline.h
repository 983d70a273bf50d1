#pragma once
// The live bytes of one device (or caching-allocator pool) over time, kept as the
// stream arrives with bounded memory however long the run.
//
// Time is cut into buckets of 2^k ns, k growing as the run does so that it always
// fits in kMaxBuckets buckets (two neighbours merge when the width doubles). Each
// bucket keeps four of its samples: the first, the lowest, the highest and the
// last (M4 aggregation, Jugel et al., "M4: A Visualization-Oriented Time Series
// Data Aggregation", VLDB 2014: a line drawn through them at one bucket per pixel
// column is the line drawn through every sample). Merging keeps all four exactly,
// so the highest sample of the run, and the first time it was reached, survive
// every merge: the series' maximum is the device's peak, at its peak time.
// Memory: kMaxBuckets buckets; record() is O(1) amortized (a merge pass is O(kMaxBuckets)
// and happens at most once per doubling of the run's length).

#include <cstdint>
#include <vector>

#include "core/Protocol.h"

namespace memtool::core {

struct TimelineSample {
    uint64_t timeNs = 0;  // on the stream's clock: ns since the collector connected
    uint64_t bytes = 0;   // live (resident) bytes right after the event at timeNs
};

class Timeline {
public:
    static constexpr uint64_t kMaxBuckets = kTimelineMaxBuckets;
    // At most this many samples come out, however many went in.
    static constexpr uint64_t kMaxSamples = 4 * kMaxBuckets;
    static constexpr unsigned kFirstShift = kTimelineFirstShift;  // buckets start 1.024 µs wide

    // The bytes after an event; times never decrease (the stream's clock).
    // Inline where the sample joins the latest bucket (nearly every one does: a
    // bucket spans many events), out of line where it starts one.
    void record(uint64_t timeNs, uint64_t bytes) {
        if (!buckets_.empty() && (timeNs >> shift_) <= buckets_.back().index) {
            Bucket& b = buckets_.back();
            const Point p{timeNs, bytes, seq_++};
            // Strictly: a level reached again later keeps its first time.
            if (bytes > b.high.bytes) b.high = p;
            if (bytes < b.low.bytes) b.low = p;
            b.last = p;
            return;
        }
        recordInNewBucket(timeNs, bytes);
    }

    // The kept samples in the order they were recorded, each once: per bucket its
    // first, lowest, highest and last (fewer when they coincide).
    std::vector<TimelineSample> samples() const;
    // The width of the buckets now.
    uint64_t bucketNs() const { return uint64_t{1} << shift_; }
    bool empty() const { return buckets_.empty(); }

private:
    struct Point {
        uint64_t timeNs;
        uint64_t bytes;
        uint64_t seq;  // the order of recording: points of one time stay in order
    };
    struct Bucket {
        uint64_t index;  // timeNs >> shift_
        Point first, low, high, last;
    };
    // record() where the sample does not join the latest bucket.
    void recordInNewBucket(uint64_t timeNs, uint64_t bytes);
    // Doubles the bucket width, merging neighbours.
    void widen();

    std::vector<Bucket> buckets_;  // non-empty buckets only, in time order
    unsigned shift_ = kFirstShift;
    uint64_t seq_ = 0;
};

}  // namespace memtool::core
