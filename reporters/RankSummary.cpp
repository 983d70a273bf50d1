#include "reporters/RankSummary.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "reporters/ProcessSelection.h"

namespace memtool::reporters {
namespace {

using nlohmann::json;

bool isCuda(const std::string& device) { return device.rfind("cuda:", 0) == 0; }

// Process `p`'s largest peak on a kind of device ("cpu" or "cuda"), and where.
std::optional<std::pair<std::string, uint64_t>> largestOn(const core::ProcessTrace& p,
                                                          const std::string& kind) {
    std::optional<std::pair<std::string, uint64_t>> best;
    for (const auto& [name, d] : p.devices) {
        const bool ofKind = kind == "cuda" ? isCuda(name) : name == kind;
        if (ofKind && (!best || d.peakBytes > best->second)) best = {name, d.peakBytes};
    }
    return best;
}

std::optional<RankSpread> spreadOn(const core::Trace& trace, const std::string& kind) {
    std::map<int64_t, RankFigure> byRank;
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const core::ProcessTrace& p = trace.processes[i];
        if (!p.rank) continue;
        const auto peak = largestOn(p, kind);
        if (!peak) continue;
        auto [it, fresh] =
            byRank.try_emplace(*p.rank, RankFigure{*p.rank, i, peak->first, peak->second});
        if (!fresh && peak->second > it->second.peakBytes)
            it->second = {*p.rank, i, peak->first, peak->second};
    }
    if (byRank.size() < 2) return std::nullopt;
    RankSpread s;
    s.kind = kind;
    s.ranks = byRank.size();
    s.largest = s.smallest = byRank.begin()->second;
    // Ties go to the lower rank: the order ranks are listed in.
    for (const auto& [rank, f] : byRank) {
        if (f.peakBytes > s.largest.peakBytes) s.largest = f;
        if (f.peakBytes < s.smallest.peakBytes) s.smallest = f;
    }
    if (s.smallest.peakBytes > 0)
        s.spread =
            static_cast<double>(s.largest.peakBytes) / static_cast<double>(s.smallest.peakBytes);
    return s;
}

// A change of one process's live bytes on the shared clock.
struct Step {
    double timeS;
    size_t process;
    uint64_t bytes;
};

// The processes `members` of one host on `device`: their live bytes summed over
// time, at most. Each holds its timeline's last figure until its end, and nothing
// before its first point or after it ended.
HostPeak sweep(const core::Trace& trace, const RankSummary& s, const std::string& host,
               const std::string& device, const std::vector<size_t>& members) {
    HostPeak h;
    h.host = host;
    h.device = device;
    h.processes = members;
    std::vector<Step> steps;
    for (size_t i : members) {
        const core::ProcessTrace& p = trace.processes[i];
        h.sumOfPeaks += p.devices.at(device).peakBytes;
        double last = 0;
        for (const core::TimelinePoint& point : p.timeline.at(device).points) {
            steps.push_back({sharedTimeS(s, p, point.timeS), i, point.bytes});
            last = std::max(last, point.timeS);
        }
        steps.push_back({sharedTimeS(s, p, std::max(last, p.durationS)), i, 0});
    }
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Step& a, const Step& b) { return a.timeS < b.timeS; });
    std::map<size_t, uint64_t> live;
    uint64_t total = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
        uint64_t& held = live[steps[k].process];
        total = total - held + steps[k].bytes;
        held = steps[k].bytes;
        // Steps at one instant all land before the sum counts.
        if (k + 1 < steps.size() && steps[k + 1].timeS == steps[k].timeS) continue;
        if (total > h.combinedBytes) {
            h.combinedBytes = total;
            h.timeS = steps[k].timeS;
        }
    }
    return h;
}

// Per host, per device two processes or more with a start (a clock) used.
std::vector<HostPeak> hostPeaks(const core::Trace& trace, const RankSummary& s) {
    std::map<std::pair<std::string, std::string>, std::vector<size_t>> users;
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const core::ProcessTrace& p = trace.processes[i];
        if (!p.startUnixS) continue;
        for (const auto& [name, d] : p.devices)
            if (p.timeline.count(name)) users[{p.host, name}].push_back(i);
    }
    std::vector<HostPeak> out;
    for (const auto& [key, members] : users)
        if (members.size() >= 2) out.push_back(sweep(trace, s, key.first, key.second, members));
    return out;
}

json figureJson(const core::Trace& trace, const RankFigure& f) {
    return {{"rank", f.rank},
            {"pid", trace.processes[f.process].pid},
            {"host", trace.processes[f.process].host},
            {"device", f.device},
            {"peak_bytes", f.peakBytes}};
}

json processJson(const RankSummary& s, const core::ProcessTrace& p) {
    json devices = json::object();
    for (const auto& [name, d] : p.devices)
        devices[name] = {{"peak_bytes", d.peakBytes},
                         {"peak_time_s", sharedTimeS(s, p, d.peakTimeS)},
                         {"leaked_bytes", d.leakedBytes}};
    return {{"pid", p.pid},
            {"rank", p.rank ? json(*p.rank) : json(nullptr)},
            {"host", p.host},
            {"exit", exitText(p)},
            {"devices", devices}};
}

}  // namespace

double sharedTimeS(const RankSummary& s, const core::ProcessTrace& p, double timeS) {
    if (!s.zeroUnixS || !p.startUnixS) return timeS;
    return *p.startUnixS - *s.zeroUnixS + timeS;
}

double spreadPercent(double spread) { return (spread - 1) * 100; }

std::string rankSpreadText(const RankSpread& r, const std::function<std::string(uint64_t)>& bytes,
                           const std::string& after, const char* times) {
    return fmt::format("{}: rank {} holds most, {} on {}{}; least rank {}, {}; spread {}", r.kind,
                       r.largest.rank, bytes(r.largest.peakBytes), r.largest.device, after,
                       r.smallest.rank, bytes(r.smallest.peakBytes),
                       r.spread ? fmt::format("{:.2f}{}", *r.spread, times) : std::string("-"));
}

std::string hostPeakText(const HostPeak& h, const std::function<std::string(uint64_t)>& bytes) {
    return fmt::format("{} {}: {} processes held {} at once, {:.3f} s in (their peaks sum to {})",
                       hostText(h.host), h.device, h.processes.size(), bytes(h.combinedBytes),
                       h.timeS, bytes(h.sumOfPeaks));
}

RankSummary summarizeRanks(const core::Trace& trace, RankFigures figures) {
    RankSummary s;
    std::set<int64_t> ranks;
    std::set<std::string> hosts;
    for (const core::ProcessTrace& p : trace.processes) {
        if (p.startUnixS && (!s.zeroUnixS || *p.startUnixS < *s.zeroUnixS))
            s.zeroUnixS = p.startUnixS;
        if (p.rank) ranks.insert(*p.rank);
        hosts.insert(p.host);
    }
    s.ranks = ranks.size();
    s.hosts = hosts.size();
    for (const char* kind : {"cpu", "cuda"})
        if (auto spread = spreadOn(trace, kind)) s.spreads.push_back(*spread);
    if (figures == RankFigures::All) s.hostPeaks = hostPeaks(trace, s);
    return s;
}

json rankSummaryJson(const core::Trace& trace, const RankSummary& s) {
    json processes = json::array(), spreads = json::object(), hosts = json::array();
    for (const core::ProcessTrace& p : trace.processes) processes.push_back(processJson(s, p));
    for (const RankSpread& r : s.spreads)
        spreads[r.kind] = {{"ranks", r.ranks},
                           {"largest", figureJson(trace, r.largest)},
                           {"smallest", figureJson(trace, r.smallest)},
                           {"spread", r.spread ? json(*r.spread) : json(nullptr)}};
    for (const HostPeak& h : s.hostPeaks) {
        json pids = json::array();
        for (size_t i : h.processes) pids.push_back(trace.processes[i].pid);
        hosts.push_back({{"host", h.host},
                         {"device", h.device},
                         {"combined_peak_bytes", h.combinedBytes},
                         {"combined_peak_time_s", h.timeS},
                         {"sum_of_peaks_bytes", h.sumOfPeaks},
                         {"pids", pids}});
    }
    return {{"clock_zero_unix_s", s.zeroUnixS ? json(*s.zeroUnixS) : json(nullptr)},
            {"ranks", s.ranks},
            {"processes", processes},
            {"spread", spreads},
            {"hosts", hosts}};
}

}  // namespace memtool::reporters
