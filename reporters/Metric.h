#pragma once
// The byte figures a report can count by: what was held at the peak, allocated over
// the run, or still held when the program's own code finished (leak_moment): by
// nothing the program's globals reach (leaked) or by them (held at exit).
// `memtool check --metric` and `memtool report --format collapsed --metric` name
// them alike (parseMetric, in Check.h).

#include <cstdint>
#include <string>

#include "trace/TraceModel.h"

namespace memtool::reporters {

enum class Metric { Peak, Allocated, Leaked, HeldAtExit };

// A device's (or pool's) figure: peak_bytes, allocated_bytes, leaked_bytes,
// held_at_exit_bytes.
uint64_t metricTotal(const core::PoolTotals& d, Metric m);
// A hotspot's: the same four. A device's hotspots add
// up to its metricTotal.
uint64_t metricBytes(const core::HotspotFigures& h, Metric m);

}  // namespace memtool::reporters
