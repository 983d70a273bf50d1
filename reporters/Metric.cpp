#include "reporters/Metric.h"

#include "core/Error.h"

namespace memtool::reporters {

Metric parseMetric(const std::string& text) {
    if (text == "peak") return Metric::Peak;
    if (text == "allocated") return Metric::Allocated;
    if (text == "leaked") return Metric::Leaked;
    throw core::Error(core::kExitBadInput,
                      "unknown metric '" + text + "' (use peak, allocated or leaked)");
}

const char* metricName(Metric m) {
    switch (m) {
        case Metric::Peak:
            return "peak";
        case Metric::Allocated:
            return "allocated";
        case Metric::Leaked:
            return "leaked";
    }
    return "peak";
}

uint64_t metricTotal(const core::PoolTotals& d, Metric m) {
    switch (m) {
        case Metric::Peak:
            return d.peakBytes;
        case Metric::Allocated:
            return d.allocatedBytes;
        case Metric::Leaked:
            return d.currentBytes;
    }
    return 0;
}

uint64_t metricBytes(const core::HotspotFigures& h, Metric m) {
    switch (m) {
        case Metric::Peak:
            return h.peakBytes;
        case Metric::Allocated:
            return h.allocatedBytes;
        case Metric::Leaked:
            return h.leakedBytes;
    }
    return 0;
}

}  // namespace memtool::reporters
