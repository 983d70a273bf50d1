#include "reporters/Metric.h"

namespace memtool::reporters {

uint64_t metricTotal(const core::PoolTotals& d, Metric m) {
    switch (m) {
        case Metric::Peak:
            return d.peakBytes;
        case Metric::Allocated:
            return d.allocatedBytes;
        case Metric::Leaked:
            return d.leakedBytes;
        case Metric::HeldAtExit:
            return d.heldAtExitBytes;
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
        case Metric::HeldAtExit:
            return h.heldAtExitBytes;
    }
    return 0;
}

}  // namespace memtool::reporters
