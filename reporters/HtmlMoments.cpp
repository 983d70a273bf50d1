#include "reporters/HtmlMoments.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/Units.h"
#include "reporters/EventViews.h"
#include "reporters/Markup.h"
#include "trace/HotspotSelection.h"

namespace memtool::reporters {

namespace {

using json = nlohmann::json;

constexpr size_t kStacksShown = 200;  // per device and moment; the rest is one entry
constexpr size_t kEventsShown = 50;

const char* frameKind(const core::Frame& f) {
    if (f.isPython()) return f.user ? "py" : "pylib";
    return f.user ? "c" : "clib";
}

// The moments shown: evenly over what the log reaches, and after each device's peak.
std::vector<uint64_t> momentTimes(const core::ProcessTrace& t, const core::ProcessEvents& p,
                                  size_t count) {
    const bool whole = p.mode == core::kEventsAll && p.folded == 0;
    uint64_t first = whole ? 0 : p.events.front().timeNs;
    if (p.gapAt > 0) first = p.events[p.gapAt].timeNs;
    const uint64_t last = p.events.back().timeNs;
    std::set<uint64_t> times;
    for (size_t i = 0; i < count; ++i)
        times.insert(first + (last - first) * i / std::max<size_t>(count - 1, 1));
    const Focus f = focusOf(t, p);
    if (f.end > 0 && p.events[f.end - 1].timeNs >= first) times.insert(p.events[f.end - 1].timeNs);
    return {times.begin(), times.end()};
}

// What one stack of the log is in the page's tables: [device, [name ids]].
class StackIds {
public:
    explicit StackIds(const core::ProcessEvents& p) : p_(p) {}
    size_t id(uint8_t device, uint32_t stack) {
        auto [it, fresh] = ids_.try_emplace({device, stack}, stacks_.size());
        if (!fresh) return it->second;
        json path = json::array();
        const std::vector<core::Frame> frames = eventStack(p_, stack);
        for (auto f = frames.rbegin(); f != frames.rend(); ++f) path.push_back(name(*f));
        stacks_.push_back(json::array({core::deviceName(device), std::move(path)}));
        return it->second;
    }
    json stacks() && { return std::move(stacks_); }
    json names() && { return std::move(names_); }

private:
    size_t name(const core::Frame& f) {
        const std::string text = core::formatFrame(f);
        auto [it, fresh] = nameIds_.try_emplace(text, names_.size());
        if (fresh) names_.push_back(json::array({shortFrame(f), text, frameKind(f)}));
        return it->second;
    }
    const core::ProcessEvents& p_;
    std::map<std::pair<uint8_t, uint32_t>, size_t> ids_;
    std::map<std::string, size_t> nameIds_;
    json stacks_ = json::array(), names_ = json::array();
};

json momentJson(const std::vector<LiveStack>& live, StackIds& ids) {
    json rows = json::array();
    std::map<uint8_t, size_t> shown;
    std::map<uint8_t, uint64_t> rest;
    for (const LiveStack& s : live) {  // largest first
        if (shown[s.device]++ < kStacksShown)
            rows.push_back(json::array({ids.id(s.device, s.stack), s.bytes}));
        else
            rest[s.device] += s.bytes;
    }
    for (const auto& [device, bytes] : rest)
        rows.push_back(json::array({-1, bytes, core::deviceName(device)}));
    return rows;
}

void eventsTable(const core::ProcessTrace& t, const core::ProcessEvents& p, std::ostream& out) {
    const Focus f = focusOf(t, p);
    out << "<h3>Events before " << escapeMarkup(f.what) << "</h3>\n";
    if (!f.missing.empty()) {
        out << "<p class=\"none\">Not in the log: " << escapeMarkup(f.missing) << "</p>\n";
        return;
    }
    const size_t first = f.end > kEventsShown ? f.end - kEventsShown : 0;
    out << fmt::format("<p class=\"hint\">The last {} of {} events in the log ({} seen).</p>\n",
                       f.end - first, p.events.size(), core::groupDigits(p.seen));
    out << "<table class=\"events sortable\"><thead><tr><th class=\"num\">time</th><th>action</th>"
           "<th>device</th><th class=\"num\">size</th><th>site</th></tr></thead><tbody>\n";
    for (size_t i = first; i < f.end; ++i) {
        const core::Event& e = p.events[i];
        const std::string site = escapeMarkup(eventSite(p, e.stack, core::SiteMode::User));
        std::string stack;
        for (const core::Frame& frame : eventStack(p, e.stack))
            stack += "<li>" + escapeMarkup(core::formatFrame(frame)) + "</li>";
        out << fmt::format(
            "<tr><td class=\"num\" data-v=\"{0:.9f}\">{0:.6f} s</td><td>{1}</td><td>{2}</td>"
            "<td class=\"num\" data-v=\"{3}\">{4}</td><td class=\"site\" data-v=\"{5}\">"
            "<details><summary>{5}</summary><ol>{6}</ol></details></td></tr>\n",
            static_cast<double>(e.timeNs) / 1e9, eventAction(e.kind),
            escapeMarkup(core::deviceName(e.device)), e.size, core::formatBytes(e.size), site,
            stack);
    }
    out << "</tbody></table>\n";
}

}  // namespace

json momentsData(const core::ProcessTrace& t, const core::ProcessEvents& p, size_t count) {
    if (p.events.empty() || p.folded > 0) return nullptr;
    StackIds ids(p);
    json moments = json::array();
    for (uint64_t ns : momentTimes(t, p, count))
        moments.push_back(
            json::array({static_cast<double>(ns) / 1e9, momentJson(liveAt(p, ns), ids)}));
    json names = std::move(ids).names();
    return {{"names", std::move(names)},
            {"stacks", std::move(ids).stacks()},
            {"moments", std::move(moments)}};
}

void momentsSection(const core::ProcessTrace& t, const core::ProcessEvents& p, size_t index,
                    std::ostream& out) {
    out << "<h2>From the event log</h2>\n";
    if (!p.events.empty() && p.folded == 0) {
        out << "<p class=\"hint\">What was live at a moment, exactly: click a timeline above, or "
               "move the slider, to pick one.</p>\n";
        for (const auto& [name, d] : t.devices)
            out << fmt::format(
                "<figure class=\"moments\" data-process=\"{0}\" data-device=\"{1}\">"
                "<figcaption>{1}: live at a moment</figcaption></figure>\n",
                index, escapeMarkup(name));
    }
    eventsTable(t, p, out);
}

}  // namespace memtool::reporters
