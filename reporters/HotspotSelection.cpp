#include "reporters/HotspotSelection.h"

#include <algorithm>

#include "core/Error.h"

namespace memtool::reporters {

SortKey parseSortKey(const std::string& text) {
    if (text == "peak") return SortKey::Peak;
    if (text == "allocated") return SortKey::Allocated;
    if (text == "count") return SortKey::Count;
    if (text == "leaked") return SortKey::Leaked;
    if (text == "active") return SortKey::Active;
    if (text == "reserved") return SortKey::Reserved;
    throw core::Error(
        core::kExitBadInput,
        "unknown sort key '" + text + "' (use peak, allocated, count, leaked, active or reserved)");
}

GroupBy parseGroupBy(const std::string& text) {
    if (text == "site") return GroupBy::Site;
    if (text == "function") return GroupBy::Function;
    if (text == "module") return GroupBy::Module;
    if (text == "op") return GroupBy::Op;
    throw core::Error(core::kExitBadInput,
                      "unknown grouping '" + text + "' (use site, function, module or op)");
}

const char* sortKeyName(SortKey key) {
    switch (key) {
        case SortKey::Peak:
            return "peak";
        case SortKey::Allocated:
            return "allocated";
        case SortKey::Count:
            return "count";
        case SortKey::Leaked:
            return "leaked";
        case SortKey::Active:
            return "active peak";
        case SortKey::Reserved:
            return "reserved peak";
    }
    return "peak";
}

uint64_t sortValue(const core::Hotspot& h, SortKey key) {
    switch (key) {
        case SortKey::Peak:
            return h.peakBytes;
        case SortKey::Allocated:
            return h.allocatedBytes;
        case SortKey::Count:
            return h.count;
        case SortKey::Leaked:
            return h.leakedBytes;
        case SortKey::Active:
        case SortKey::Reserved: {
            auto it =
                h.pools.find(key == SortKey::Active ? core::kPoolActive : core::kPoolReserved);
            return it == h.pools.end() ? 0 : it->second.peakBytes;
        }
    }
    return 0;
}

ReportOptions optionsFor(const core::ProcessTrace& p, const std::string& device,
                         const ReportOptions& requested) {
    ReportOptions options = requested;
    auto it = p.devices.find(device);
    const bool pools = it != p.devices.end() && !it->second.pools.empty();
    if ((options.sort == SortKey::Active || options.sort == SortKey::Reserved) && !pools)
        options.sort = SortKey::Peak;
    return options;
}

std::vector<const core::Hotspot*> selectHotspots(const core::ProcessTrace& p,
                                                 const std::string& device,
                                                 const ReportOptions& options) {
    std::vector<const core::Hotspot*> out;
    for (const auto& h : p.hotspots)
        if (h.device == device) out.push_back(&h);
    std::stable_sort(out.begin(), out.end(), [&](const core::Hotspot* a, const core::Hotspot* b) {
        uint64_t ka = sortValue(*a, options.sort), kb = sortValue(*b, options.sort);
        if (ka != kb) return ka > kb;
        if (a->allocatedBytes != b->allocatedBytes) return a->allocatedBytes > b->allocatedBytes;
        return a->site < b->site;
    });
    if (out.size() > options.top) out.resize(options.top);
    return out;
}

namespace {
// "ns::f(long, c10::optional<int>) const" -> "ns::f": a table row has no room for
// C++ parameter lists (trace.json keeps them).
std::string withoutParameters(const std::string& function) {
    size_t from = 0;
    for (;;) {
        size_t paren = function.find('(', from);
        if (paren == std::string::npos || paren == 0) return function;
        if (function.compare(0, paren, "operator") == 0 ||
            (paren >= 8 && function.compare(paren - 8, 8, "operator") == 0 &&
             function.compare(paren, 2, "()") == 0)) {
            from = paren + 2;  // operator() itself
            continue;
        }
        return function.substr(0, paren);
    }
}
}  // namespace

std::string shortFrame(const core::Frame& frame) {
    std::string where = core::frameLocation(frame);
    size_t slash = where.rfind('/');
    std::string file = slash == std::string::npos ? where : where.substr(slash + 1);
    return withoutParameters(core::frameName(frame)) + " (" + file + ")";
}

std::string shownSite(const core::ProcessTrace& p, const std::optional<uint32_t>& frame,
                      const std::string& text) {
    return frame ? shortFrame(p.frames.at(*frame)) : text;
}

const core::Frame* siteFrame(const core::ProcessTrace& p, const core::Hotspot& h) {
    return h.siteFrame ? &p.frames.at(*h.siteFrame) : nullptr;
}

}  // namespace memtool::reporters
