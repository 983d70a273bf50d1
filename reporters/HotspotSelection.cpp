#include "reporters/HotspotSelection.h"

#include <algorithm>

#include "core/Error.h"

namespace memtool::reporters {

SortKey parseSortKey(const std::string& text) {
    if (text == "peak") return SortKey::Peak;
    if (text == "allocated") return SortKey::Allocated;
    if (text == "count") return SortKey::Count;
    if (text == "leaked") return SortKey::Leaked;
    throw core::Error(core::kExitBadInput,
                      "unknown sort key '" + text + "' (use peak, allocated, count or leaked)");
}

const char* sortKeyName(SortKey key) {
    switch (key) {
        case SortKey::Peak: return "peak";
        case SortKey::Allocated: return "allocated";
        case SortKey::Count: return "count";
        case SortKey::Leaked: return "leaked";
    }
    return "peak";
}

namespace {
uint64_t keyOf(const core::Hotspot& h, SortKey key) {
    switch (key) {
        case SortKey::Peak: return h.peakBytes;
        case SortKey::Allocated: return h.allocatedBytes;
        case SortKey::Count: return h.count;
        case SortKey::Leaked: return h.leakedBytes;
    }
    return 0;
}
}  // namespace

std::vector<const core::Hotspot*> selectHotspots(const core::ProcessTrace& p, const std::string& device,
                                                 const ReportOptions& options) {
    std::vector<const core::Hotspot*> out;
    for (const auto& h : p.hotspots)
        if (h.device == device) out.push_back(&h);
    std::stable_sort(out.begin(), out.end(), [&](const core::Hotspot* a, const core::Hotspot* b) {
        uint64_t ka = keyOf(*a, options.sort), kb = keyOf(*b, options.sort);
        if (ka != kb) return ka > kb;
        if (a->allocatedBytes != b->allocatedBytes) return a->allocatedBytes > b->allocatedBytes;
        return a->site < b->site;
    });
    if (out.size() > options.top) out.resize(options.top);
    return out;
}

std::string shortFrame(const std::string& frame) {
    size_t open = frame.rfind(" (");
    if (open == std::string::npos || frame.back() != ')') return frame;
    std::string where = frame.substr(open + 2, frame.size() - open - 3);
    size_t slash = where.rfind('/');
    if (slash == std::string::npos) return frame;
    return frame.substr(0, open) + " (" + where.substr(slash + 1) + ")";
}

}  // namespace memtool::reporters
