#include "reporters/EventViews.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/Error.h"
#include "trace/HotspotSelection.h"

namespace memtool::reporters {

namespace {

// The live bytes an event adds (a free: takes away) on its device.
int64_t effect(const core::Event& e) {
    if (e.kind == core::EventKind::Alloc) return static_cast<int64_t>(e.size);
    if (e.kind == core::EventKind::Free) return -static_cast<int64_t>(e.size);
    return 0;
}

// Where in the log the peak of `device` (its code) is: the first event after
// which its live bytes were the most they were over the log; `bytes` gets them.
size_t peakIndex(const core::ProcessEvents& p, uint8_t device, uint64_t* bytes) {
    int64_t live = 0;
    for (const core::EndBlock& b : p.endBlocks)
        if (b.device == device) live += static_cast<int64_t>(b.size);
    int64_t most = -1;
    size_t at = p.events.size();
    for (size_t i = p.events.size(); i-- > 0;) {
        const core::Event& e = p.events[i];
        if (e.device != device) continue;
        if (live >= most) {
            most = live;
            at = i;
        }
        live -= effect(e);
    }
    *bytes = most < 0 ? 0 : static_cast<uint64_t>(most);
    return at;
}

// The device code of a name the trace uses ("cpu", "cuda:0"); 255 when none matches.
uint8_t deviceCode(const std::string& name) {
    for (unsigned code = 0; code < 255; ++code)
        if (core::deviceName(static_cast<uint8_t>(code)) == name) return static_cast<uint8_t>(code);
    return 255;
}

}  // namespace

std::vector<core::Frame> eventStack(const core::ProcessEvents& p, uint32_t stack) {
    std::vector<core::Frame> frames;
    if (stack >= p.stacks.size()) return frames;
    for (uint32_t id : p.stacks[stack]) frames.push_back(p.frames.at(id));
    return frames;
}

std::string eventSite(const core::ProcessEvents& p, uint32_t stack, core::SiteMode mode) {
    const std::vector<core::Frame> frames = eventStack(p, stack);
    const std::optional<size_t> site = core::chooseSite(frames, mode);
    return site ? shortFrame(frames[*site]) : core::kNoStackSite;
}

const char* eventAction(core::EventKind kind) {
    switch (kind) {
        case core::EventKind::Alloc:
            return "alloc";
        case core::EventKind::Free:
            return "free";
        case core::EventKind::Oom:
            return "oom";
    }
    return "?";
}

Focus focusOf(const core::ProcessTrace& t, const core::ProcessEvents& p) {
    Focus f;
    for (size_t i = 0; i < p.events.size(); ++i) {
        if (p.events[i].kind != core::EventKind::Oom) continue;
        f.device = core::deviceName(p.events[i].device);
        f.what = "the out-of-memory error on " + f.device;
        f.end = i + 1;
        f.bytes = p.events[i].size;
        return f;
    }
    const core::DeviceTotals* largest = nullptr;
    for (const auto& [name, d] : t.devices)
        if (!largest || d.peakBytes > largest->peakBytes) {
            largest = &d;
            f.device = name;
        }
    f.what = "the peak of " + f.device;
    if (!largest || p.events.empty()) {
        f.missing = "the log holds no events";
        return f;
    }
    const size_t at = peakIndex(p, deviceCode(f.device), &f.bytes);
    if (at == p.events.size()) {
        f.missing = "the log holds no events of " + f.device;
    } else if (f.bytes < largest->peakBytes ||
               static_cast<double>(p.events[at].timeNs) / 1e9 > largest->peakTimeS + 1e-6) {
        f.missing = fmt::format(
            "it was first reached before the log's first event (the log keeps the last {})",
            p.limit);
    } else {
        f.end = at + 1;
    }
    return f;
}

std::vector<LiveStack> liveAt(const core::ProcessEvents& p, uint64_t timeNs) {
    if (p.folded > 0)
        throw core::Error(core::kExitBadInput,
                          fmt::format("--at: {} events of pid {} were folded by its collector and "
                                      "are not in the log",
                                      p.folded, p.pid));
    if (p.seen > p.events.size() && (p.events.empty() || timeNs < p.events.front().timeNs))
        throw core::Error(
            core::kExitBadInput,
            fmt::format(
                "--at: pid {}'s log keeps its last {} events, from {:.6f} s on: run with "
                "--events all to see earlier moments",
                p.pid, p.limit,
                p.events.empty() ? 0.0 : static_cast<double>(p.events.front().timeNs) / 1e9));
    if (p.gapAt > 0 && timeNs < p.events[p.gapAt].timeNs)
        throw core::Error(
            core::kExitBadInput,
            fmt::format("--at: pid {}'s log skips events from {:.6f} s to {:.6f} s "
                        "(after its out-of-memory error): run with --events all",
                        p.pid, static_cast<double>(p.events[p.gapAt - 1].timeNs) / 1e9,
                        static_cast<double>(p.events[p.gapAt].timeNs) / 1e9));
    // (device, address) -> (size, stack), from the end back to the moment.
    std::map<std::pair<uint8_t, uint64_t>, std::pair<uint64_t, uint32_t>> live;
    for (const core::EndBlock& b : p.endBlocks) live[{b.device, b.address}] = {b.size, b.stack};
    for (size_t i = p.events.size(); i-- > 0 && p.events[i].timeNs > timeNs;) {
        const core::Event& e = p.events[i];
        if (e.kind == core::EventKind::Alloc) live.erase({e.device, e.address});
        if (e.kind == core::EventKind::Free && e.size > 0)
            live[{e.device, e.address}] = {e.size, e.stack};
    }
    std::map<std::pair<uint8_t, uint32_t>, LiveStack> byStack;
    for (const auto& [key, block] : live) {
        LiveStack& s = byStack[{key.first, block.second}];
        s.device = key.first;
        s.stack = block.second;
        s.bytes += block.first;
        ++s.blocks;
    }
    std::vector<LiveStack> rows;
    for (const auto& [key, s] : byStack) rows.push_back(s);
    std::stable_sort(rows.begin(), rows.end(),
                     [](const LiveStack& a, const LiveStack& b) { return a.bytes > b.bytes; });
    return rows;
}

const core::ProcessEvents* eventsOf(const core::EventLog& log, const core::ProcessTrace& t) {
    if (!t.events) return nullptr;
    if (t.events->section >= log.processes.size() || log.processes[t.events->section].pid != t.pid)
        throw core::Error(core::kExitBadInput,
                          fmt::format("the event log has no entry for pid {} where its trace "
                                      "says (entry {})",
                                      t.pid, t.events->section));
    return &log.processes[t.events->section];
}

}  // namespace memtool::reporters
