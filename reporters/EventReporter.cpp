#include "reporters/EventReporter.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/Error.h"
#include "core/Units.h"
#include "reporters/ByteText.h"
#include "reporters/EventViews.h"

namespace memtool::reporters {

namespace {

using json = nlohmann::json;

core::SiteMode siteMode(const ReportOptions& o) { return o.site.value_or(core::SiteMode::User); }

// The events [first, focus.end) of `p`, the count asked for (or fewer) before the focus.
size_t firstShown(const Focus& f, size_t count) { return f.end > count ? f.end - count : 0; }

json stackJson(const core::ProcessEvents& p, uint32_t stack) {
    json frames = json::array();
    for (const core::Frame& f : eventStack(p, stack)) frames.push_back(core::formatFrame(f));
    return frames;
}

json eventJson(const core::ProcessEvents& p, const core::Event& e, core::SiteMode mode) {
    return {{"time_s", static_cast<double>(e.timeNs) / 1e9},
            {"action", eventAction(e.kind)},
            {"device", core::deviceName(e.device)},
            {"size", e.size},
            {"address", e.address},
            {"site", eventSite(p, e.stack, mode)},
            {"stack", stackJson(p, e.stack)}};
}

uint64_t atNs(double atS) {
    if (!(atS >= 0) || !std::isfinite(atS) || atS > 1e9)
        throw core::Error(core::kExitBadInput, "--at takes seconds from 0 (the process's start)");
    return static_cast<uint64_t>(std::llround(atS * 1e9));
}

void renderBefore(const core::ProcessTrace& t, const core::ProcessEvents& p, size_t count,
                  const ReportOptions& options, std::ostream& out) {
    const Focus f = focusOf(t, p);
    const ByteText b(options.bytes);
    out << fmt::format("\nEvents before {} (pid {}", f.what, t.pid);
    if (!f.missing.empty()) {
        out << fmt::format("): not in the log: {}\n", f.missing);
        return;
    }
    const size_t first = firstShown(f, count);
    out << fmt::format("): the last {} of {} in the log, {} seen\n", f.end - first, p.events.size(),
                       core::groupDigits(p.seen));
    out << fmt::format("  {:>12}  {:<6}  {:<14}  {}  {:<18}  {}\n", "time_s", "action", "device",
                       b.column(std::string("size")), "address", "site");
    for (size_t i = first; i < f.end; ++i) {
        const core::Event& e = p.events[i];
        out << fmt::format("  {:>12.6f}  {:<6}  {:<14}  {}  {:<18}  {}\n",
                           static_cast<double>(e.timeNs) / 1e9, eventAction(e.kind),
                           core::deviceName(e.device), b.column(e.size),
                           e.address ? fmt::format("{:#x}", e.address) : "-",
                           eventSite(p, e.stack, siteMode(options)));
    }
}

}  // namespace

void renderEventsBefore(const core::Trace& trace, const core::EventLog& log, size_t count,
                        const ReportOptions& options, std::ostream& out) {
    for (const core::ProcessTrace& t : trace.processes)
        if (const core::ProcessEvents* p = eventsOf(log, t))
            renderBefore(t, *p, count, options, out);
}

json eventsBeforeJson(const core::Trace& trace, const core::EventLog& log, size_t count,
                      const ReportOptions& options) {
    json all = json::array();
    for (const core::ProcessTrace& t : trace.processes) {
        const core::ProcessEvents* p = eventsOf(log, t);
        if (!p) continue;
        const Focus f = focusOf(t, *p);
        json events = json::array();
        for (size_t i = firstShown(f, count); i < f.end; ++i)
            events.push_back(eventJson(*p, p->events[i], siteMode(options)));
        json j = {{"pid", t.pid}, {"before", f.what}, {"device", f.device}, {"events", events}};
        if (!f.missing.empty()) j["missing"] = f.missing;
        all.push_back(std::move(j));
    }
    return all;
}

void renderLiveAt(const core::Trace& trace, const core::EventLog& log, double atS,
                  const ReportOptions& options, std::ostream& out) {
    const uint64_t ns = atNs(atS);
    const ByteText b(options.bytes);
    for (const core::ProcessTrace& t : trace.processes) {
        const core::ProcessEvents* p = eventsOf(log, t);
        if (!p) continue;
        const std::vector<LiveStack> rows = liveAt(*p, ns);
        std::map<uint8_t, std::pair<uint64_t, uint64_t>> totals;  // bytes, blocks
        for (const LiveStack& s : rows) {
            totals[s.device].first += s.bytes;
            totals[s.device].second += s.blocks;
        }
        out << fmt::format("Live at {:.6f} s (pid {}), from its event log{}\n", atS, t.pid,
                           rows.empty() ? ": nothing" : "");
        for (const auto& [device, total] : totals) {
            out << fmt::format("  {}: {} in {} block{}\n", core::deviceName(device), b(total.first),
                               core::groupDigits(total.second), total.second == 1 ? "" : "s");
            out << fmt::format("    {}  {:>8}  {}\n", b.column(std::string("live")), "blocks",
                               "site");
            size_t shown = 0;
            for (const LiveStack& s : rows) {
                if (s.device != device || shown++ == options.top) continue;
                out << fmt::format("    {}  {:>8}  {}\n", b.column(s.bytes),
                                   core::groupDigits(s.blocks),
                                   eventSite(*p, s.stack, siteMode(options)));
            }
        }
    }
}

json liveAtJson(const core::Trace& trace, const core::EventLog& log, double atS,
                const ReportOptions& options) {
    const uint64_t ns = atNs(atS);
    json processes = json::array();
    for (const core::ProcessTrace& t : trace.processes) {
        const core::ProcessEvents* p = eventsOf(log, t);
        if (!p) continue;
        json stacks = json::array();
        for (const LiveStack& s : liveAt(*p, ns))
            stacks.push_back({{"device", core::deviceName(s.device)},
                              {"bytes", s.bytes},
                              {"blocks", s.blocks},
                              {"site", eventSite(*p, s.stack, siteMode(options))},
                              {"stack", stackJson(*p, s.stack)}});
        processes.push_back({{"pid", t.pid}, {"stacks", std::move(stacks)}});
    }
    return {{"at_s", atS}, {"processes", std::move(processes)}};
}

}  // namespace memtool::reporters
