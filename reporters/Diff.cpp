#include "reporters/Diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/Error.h"
#include "core/Units.h"
#include "reporters/HotspotSelection.h"

namespace memtool::reporters {

namespace {

int64_t delta(uint64_t a, uint64_t b) { return static_cast<int64_t>(b - a); }

std::string percent(uint64_t a, uint64_t b) {
    if (a == 0) return b == 0 ? "0.00%" : "new";
    return fmt::format("{:+.2f}%", 100.0 * (static_cast<double>(b) - static_cast<double>(a)) /
                                       static_cast<double>(a));
}

const core::ProcessTrace& launched(const core::Trace& t, const char* which) {
    if (t.processes.empty())
        throw core::Error(core::kExitBadInput, std::string(which) + " trace holds no process");
    return t.processes[0];
}

}  // namespace

namespace {

// A Python file as the trace names it, relative to the run's directory when inside.
std::string relativeFile(const std::string& file, const std::string& cwd) {
    std::filesystem::path path = std::filesystem::path(file).lexically_normal();
    if (!cwd.empty()) {
        std::filesystem::path rel =
            path.lexically_relative(std::filesystem::path(cwd).lexically_normal());
        if (!rel.empty() && *rel.begin() != "..") path = rel;
    }
    return path.string();
}

// Whether a trace keeps the code of its user lines (memtool run does since it
// began to): then sites can be matched by it.
bool keepsSource(const core::ProcessTrace& p) {
    for (const core::Frame& f : p.frames)
        if (f.isPython() && f.user && !f.source.empty()) return true;
    return false;
}

}  // namespace

std::string siteText(const core::Frame* site, const std::string& cwd) {
    if (!site) return core::kNoStackSite;
    if (!site->isPython()) return core::frameName(*site);
    return fmt::format("{} ({}:{})", core::frameName(*site), relativeFile(site->file, cwd),
                       site->line);
}

std::string siteIdentity(const core::Frame* site, const std::string& cwd, bool bySource) {
    // Python sites keep file:line (a moved line is a different site) unless their
    // code says which line is which; native line numbers shift with every rebuild,
    // so a native site is its function.
    if (!site || !site->isPython() || !bySource || site->source.empty()) return siteText(site, cwd);
    return fmt::format("{} ({}): {}", core::frameName(*site), relativeFile(site->file, cwd),
                       site->source);
}

TraceDiff diffTraces(const core::Trace& base, const core::Trace& current, size_t top) {
    const core::ProcessTrace& a = launched(base, "the base");
    const core::ProcessTrace& b = launched(current, "the new");
    TraceDiff d;
    std::map<std::string, DeviceDelta> devices;
    // Each device, and each caching-allocator pool as a row of its own (cuda:0.active).
    auto foldDevices = [&](const core::ProcessTrace& p, bool base) {
        auto fold = [&](const std::string& name, const core::PoolTotals& t) {
            auto& x = devices[name];
            x.device = name;
            (base ? x.basePeak : x.newPeak) = t.peakBytes;
            (base ? x.baseAllocated : x.newAllocated) = t.allocatedBytes;
            (base ? x.baseLeaked : x.newLeaked) = t.leakedBytes;
        };
        for (const auto& [name, t] : p.devices) {
            fold(name, t);
            for (const auto& [pool, pt] : t.pools) fold(name + "." + pool, pt);
        }
    };
    foldDevices(a, true);
    foldDevices(b, false);
    for (auto& [name, x] : devices) d.devices.push_back(x);

    std::map<std::pair<std::string, std::string>, SiteDelta> sites;
    std::set<std::pair<std::string, std::string>> inBase, inNew;
    const bool bySource = keepsSource(a) && keepsSource(b);
    auto foldSites = [&](const core::ProcessTrace& p, bool base) {
        for (const auto& h : p.hotspots) {
            const core::Frame* site = siteFrame(p, h);
            auto key = std::make_pair(h.device, siteIdentity(site, p.cwd, bySource));
            auto& s = sites[key];
            s.device = h.device;
            if (s.site.empty() || !base) s.site = siteText(site, p.cwd);  // the new line
            (base ? s.basePeak : s.newPeak) += h.peakBytes;
            (base ? s.baseAllocated : s.newAllocated) += h.allocatedBytes;
            (base ? inBase : inNew).insert(key);
        }
    };
    foldSites(a, true);
    foldSites(b, false);
    for (auto& [key, s] : sites) {
        s.isNew = !inBase.count(key);
        s.isGone = !inNew.count(key);
        if (s.newPeak > s.basePeak || (s.isNew && s.newAllocated > 0)) d.sites.push_back(s);
        if (s.newPeak < s.basePeak || (s.isGone && s.baseAllocated > 0)) d.shrunk.push_back(s);
    }
    // Largest change first (peak, then allocated).
    auto byChange = [](int sign) {
        return [sign](const SiteDelta& x, const SiteDelta& y) {
            int64_t gx = sign * delta(x.basePeak, x.newPeak),
                    gy = sign * delta(y.basePeak, y.newPeak);
            if (gx != gy) return gx > gy;
            return sign * delta(x.baseAllocated, x.newAllocated) >
                   sign * delta(y.baseAllocated, y.newAllocated);
        };
    };
    std::stable_sort(d.sites.begin(), d.sites.end(), byChange(1));
    std::stable_sort(d.shrunk.begin(), d.shrunk.end(), byChange(-1));
    if (d.sites.size() > top) d.sites.resize(top);
    if (d.shrunk.size() > top) d.shrunk.resize(top);
    return d;
}

void renderDiffText(const TraceDiff& d, std::ostream& out, core::ByteUnits units) {
    // Sizes as --bytes asks; columns as wide as the widest size (deltas: its sign too).
    const size_t w = core::byteColumnWidth(units), dw = w + 1;
    auto bytes = [units](uint64_t v) { return core::formatBytes(v, units); };
    auto change = [units](uint64_t a, uint64_t b) {
        return core::formatBytesDelta(delta(a, b), units);
    };
    out << fmt::format("{:<15} {:>{}} {:>{}} {:>{}} {:>9}   {:>{}} {:>9}   {:>{}} {:>9}\n",
                       "Device", "Base peak", w, "New peak", w, "Peak Δ", dw, "%", "Allocated Δ",
                       dw, "%", "Leaked Δ", dw, "%");
    for (const auto& x : d.devices) {
        out << fmt::format(
            "{:<15} {:>{}} {:>{}} {:>{}} {:>9}   {:>{}} {:>9}   {:>{}} {:>9}\n", x.device,
            bytes(x.basePeak), w, bytes(x.newPeak), w, change(x.basePeak, x.newPeak), dw,
            percent(x.basePeak, x.newPeak), change(x.baseAllocated, x.newAllocated), dw,
            percent(x.baseAllocated, x.newAllocated), change(x.baseLeaked, x.newLeaked), dw,
            percent(x.baseLeaked, x.newLeaked));
    }
    auto table = [&](const std::vector<SiteDelta>& sites, const char* title, const char* none) {
        if (sites.empty()) {
            out << "\n" << none << '\n';
            return;
        }
        out << "\n" << title << '\n';
        out << fmt::format("{:<8} {:>{}} {:>{}} {:>{}}  {}\n", "Device", "Base", w, "New", w, "Δ",
                           dw, "Site");
        for (const auto& s : sites) {
            out << fmt::format("{:<8} {:>{}} {:>{}} {:>{}}  {}{}\n", s.device, bytes(s.basePeak), w,
                               bytes(s.newPeak), w, change(s.basePeak, s.newPeak), dw, s.site,
                               s.isNew    ? "  [new]"
                               : s.isGone ? "  [gone]"
                                          : "");
        }
    };
    table(d.sites, "Call sites whose contribution to the peak grew most",
          "No call site's contribution to the peak grew.");
    table(d.shrunk, "Call sites whose contribution to the peak shrank most, or that are gone",
          "No call site's contribution to the peak shrank.");
}

void renderDiffJson(const TraceDiff& d, std::ostream& out) {
    nlohmann::json devices = nlohmann::json::array(), sites = nlohmann::json::array();
    for (const auto& x : d.devices) {
        devices.push_back({{"device", x.device},
                           {"base_peak_bytes", x.basePeak},
                           {"new_peak_bytes", x.newPeak},
                           {"peak_delta_bytes", delta(x.basePeak, x.newPeak)},
                           {"base_allocated_bytes", x.baseAllocated},
                           {"new_allocated_bytes", x.newAllocated},
                           {"allocated_delta_bytes", delta(x.baseAllocated, x.newAllocated)},
                           {"base_leaked_bytes", x.baseLeaked},
                           {"new_leaked_bytes", x.newLeaked},
                           {"leaked_delta_bytes", delta(x.baseLeaked, x.newLeaked)}});
    }
    auto siteJson = [](const SiteDelta& s) {
        return nlohmann::json{{"device", s.device},
                              {"site", s.site},
                              {"new", s.isNew},
                              {"gone", s.isGone},
                              {"base_peak_bytes", s.basePeak},
                              {"new_peak_bytes", s.newPeak},
                              {"peak_delta_bytes", delta(s.basePeak, s.newPeak)},
                              {"allocated_delta_bytes", delta(s.baseAllocated, s.newAllocated)}};
    };
    nlohmann::json shrunk = nlohmann::json::array();
    for (const auto& s : d.sites) sites.push_back(siteJson(s));
    for (const auto& s : d.shrunk) shrunk.push_back(siteJson(s));
    out << nlohmann::json{{"devices", devices}, {"sites", sites}, {"shrunk_sites", shrunk}}.dump(2)
        << '\n';
}

}  // namespace memtool::reporters
