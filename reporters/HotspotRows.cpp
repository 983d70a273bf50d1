#include "reporters/HotspotRows.h"

#include <algorithm>
#include <map>

#include "core/SiteChoice.h"

namespace memtool::reporters {

namespace {

// The hotspot's frames, innermost first.
std::vector<core::Frame> framesOf(const core::ProcessTrace& p, const core::Hotspot& h) {
    std::vector<core::Frame> stack;
    stack.reserve(h.frames.size());
    for (uint32_t id : h.frames) stack.push_back(p.frames.at(id));
    return stack;
}

// Position of the site in the stack: as recorded, or chosen again (--site).
std::optional<size_t> sitePosition(const core::Hotspot& h, const std::vector<core::Frame>& stack,
                                   const ReportOptions& options) {
    if (options.site) return core::chooseSite(stack, *options.site);
    if (!h.siteFrame) return std::nullopt;
    for (size_t i = 0; i < h.frames.size(); ++i)
        if (h.frames[i] == h.siteFrame) return i;
    return std::nullopt;
}

// "Conv2d.forward (conv.py)": a frame's function and file, without the line.
std::string functionOf(const core::Frame& f) {
    const std::string shown = shortFrame(f);  // "f (x.py:3)", "ns::g (lib.so)"
    const size_t colon = shown.rfind(':');
    const size_t open = shown.rfind(" (");
    if (f.line == 0 || colon == std::string::npos || open == std::string::npos || colon < open)
        return shown;
    return shown.substr(0, colon) + ")";
}

// The module instance the stack's allocation happened in, forward or backward
// (run --modules: "layer1.0.conv1 (Conv2d)"), else the innermost nn.Module
// forward on the stack ("Linear.forward (linear.py)").
std::string moduleOf(const std::vector<core::Frame>& stack) {
    for (const core::Frame& f : stack)
        if (core::isModuleScope(f)) return f.function;
    for (const core::Frame& f : stack) {
        const std::string& q = f.function;
        if (f.isPython() && q.size() > 8 && q.compare(q.size() - 8, 8, ".forward") == 0)
            return functionOf(f);
    }
    return kNoModuleGroup;
}

// The torch operator the stack's caller asked for: the outermost one.
std::string operatorOf(const std::vector<core::Frame>& stack) {
    for (size_t i = stack.size(); i > 0; --i)
        if (std::string op = core::torchOperator(stack[i - 1]); !op.empty()) return op;
    return "(no torch operator)";
}

// One stack as a row of its own: its site, the frames below it that say what
// happened there (--depth of them) and up to three callers, wrappers and
// unnamed frames skipped; or, grouped, the one name its group goes by.
HotspotRow rowOf(const core::ProcessTrace& p, const core::Hotspot& h,
                 const ReportOptions& options) {
    HotspotRow row;
    row.figures = h;
    row.largest = &h;
    row.stacks = 1;
    const std::vector<core::Frame> stack = framesOf(p, h);
    const std::optional<size_t> at = sitePosition(h, stack, options);
    switch (options.groupBy) {
        case GroupBy::Site:
            break;
        case GroupBy::Function:
            row.group = at ? functionOf(stack[*at]) : core::kNoStackSite;
            return row;
        case GroupBy::Module:
            row.group = moduleOf(stack);
            return row;
        case GroupBy::Op:
            row.group = operatorOf(stack);
            return row;
    }
    if (!at) return row;
    row.site = h.frames[*at];
    for (size_t i : core::framesBelow(stack, *at, options.depth)) row.below.push_back(h.frames[i]);
    for (size_t i = *at + 1; i < stack.size() && row.callers.size() < 3; ++i)
        if (!core::isPassThroughFrame(stack[i])) row.callers.push_back(h.frames[i]);
    return row;
}

void add(core::HotspotFigures& into, const core::HotspotFigures& f) {
    into.allocatedBytes += f.allocatedBytes;
    into.count += f.count;
    into.peakBytes += f.peakBytes;
    into.leakedBytes += f.leakedBytes;
    into.heldAtExitBytes += f.heldAtExitBytes;
    into.liveAtEndBytes += f.liveAtEndBytes;
}

}  // namespace

bool namesModuleInstances(const core::ProcessTrace& p) {
    return std::any_of(p.frames.begin(), p.frames.end(),
                       [](const core::Frame& f) { return core::isModuleScope(f); });
}

GroupNames groupNames(GroupBy g) {
    switch (g) {
        case GroupBy::Site:
            break;
        case GroupBy::Function:
            return {"functions", "function", "Function", "function"};
        case GroupBy::Module:
            return {"modules", "module", "Module", "module"};
        case GroupBy::Op:
            return {"torch operators", "torch operator", "Operator", "operator"};
    }
    return {"hotspots", "hotspot", "Site", "site"};
}

const char* rowsNamed(const GroupNames& names, size_t count) {
    return count == 1 ? names.row : names.rows;
}

const char* groupByName(GroupBy g) {
    switch (g) {
        case GroupBy::Site:
            break;
        case GroupBy::Function:
            return "function";
        case GroupBy::Module:
            return "module";
        case GroupBy::Op:
            return "op";
    }
    return "site";
}

std::vector<std::string> rowLines(const core::ProcessTrace& p, const HotspotRow& row) {
    if (!row.group.empty()) return {row.group};
    if (!row.site) return {core::kNoStackSite};
    std::vector<std::string> lines{shortFrame(p.frames.at(*row.site))};
    for (uint32_t id : row.below) lines.push_back("via " + shortFrame(p.frames.at(id)));
    for (uint32_t id : row.callers) lines.push_back("from " + shortFrame(p.frames.at(id)));
    return lines;
}

std::vector<HotspotRow> hotspotRows(const core::ProcessTrace& p, const std::string& device,
                                    const ReportOptions& options, HotspotRest* rest) {
    // Stacks that differ only in frames the table does not show read as one row.
    std::map<std::vector<std::string>, size_t> index;
    std::vector<HotspotRow> rows;
    for (const auto& h : p.hotspots) {
        if (h.device != device) continue;
        HotspotRow one = rowOf(p, h, options);
        auto [it, fresh] = index.try_emplace(rowLines(p, one), rows.size());
        if (fresh) {
            // A group's ties are broken by its name.
            if (!one.group.empty()) one.figures.site = one.group;
            rows.push_back(std::move(one));
            continue;
        }
        HotspotRow& row = rows[it->second];
        add(row.figures, h);
        for (const auto& [pool, f] : h.pools) add(row.figures.pools[pool], f);
        ++row.stacks;
        const uint64_t key = sortValue(h, options.sort),
                       largest = sortValue(*row.largest, options.sort);
        if (key > largest || (key == largest && h.allocatedBytes > row.largest->allocatedBytes))
            row.largest = &h;
    }
    core::ProcessTrace merged;
    for (const auto& r : rows) merged.hotspots.push_back(r.figures);
    std::vector<HotspotRow> out;
    std::vector<bool> shown(rows.size(), false);
    for (const core::Hotspot* h : selectHotspots(merged, device, options)) {
        const size_t i = static_cast<size_t>(h - merged.hotspots.data());
        shown[i] = true;
        out.push_back(std::move(rows[i]));
    }
    if (rest) {
        *rest = HotspotRest{};
        for (size_t i = 0; i < merged.hotspots.size(); ++i) {
            if (shown[i]) continue;
            const core::Hotspot& h = merged.hotspots[i];
            ++rest->rows;
            add(rest->figures, h);
            for (const auto& [pool, f] : h.pools) add(rest->pools[pool], f);
        }
    }
    return out;
}

}  // namespace memtool::reporters
