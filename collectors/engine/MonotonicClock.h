#pragma once
// The collector's one reading of a clock in nanoseconds: the engine's flush
// timer and folding rate, region and courtesy durations. CLOCK_MONOTONIC unless
// asked (the coarse clock, where a kernel tick's precision is enough and the
// read must be cheapest).

#include <time.h>

#include <cstdint>

namespace memtool::collectors {

inline uint64_t monotonicNs(clockid_t clock = CLOCK_MONOTONIC) {
    timespec ts;
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace memtool::collectors
