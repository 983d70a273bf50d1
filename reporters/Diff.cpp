#include "reporters/Diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/Error.h"
#include "core/Units.h"
#include "reporters/ProcessSelection.h"
#include "trace/HotspotSelection.h"
#include "trace/RecordedSources.h"

namespace memtool::reporters {

namespace {

int64_t delta(uint64_t a, uint64_t b) { return static_cast<int64_t>(b - a); }

std::string percent(uint64_t a, uint64_t b) {
    if (a == b) return "0.00%";  // unchanged: no sign (a change too small to show keeps one)
    if (a == 0) return "new";
    return fmt::format("{:+.2f}%", 100.0 * (static_cast<double>(b) - static_cast<double>(a)) /
                                       static_cast<double>(a));
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

// The code of a frame's line as the trace recorded it: in `sources`, or in the
// frame itself (traces of the memtool before `sources`); "" when it has none.
std::string lineCode(const core::ProcessTrace& p, const core::Frame& f) {
    std::string code = recordedLineCode(p, f.file, f.line);
    return code.empty() ? f.source : code;
}

// Whether a process's trace keeps the code of its user lines (memtool run does
// since it began to): then sites can be matched by it.
bool keepsSource(const core::ProcessTrace& p) {
    if (!p.sources.empty()) return true;
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

std::string siteIdentity(const core::Frame* site, const std::string& cwd, const std::string& code) {
    // Python sites keep file:line (a moved line is a different site) unless their
    // code says which line is which; native line numbers shift with every rebuild,
    // so a native site is its function.
    if (!site || !site->isPython() || code.empty()) return siteText(site, cwd);
    return fmt::format("{} ({}): {}", core::frameName(*site), relativeFile(site->file, cwd), code);
}

namespace {

ProcessDiff diffProcesses(const core::ProcessTrace& a, const core::ProcessTrace& b, size_t top) {
    ProcessDiff d;
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
            const std::string code = bySource && site ? lineCode(p, *site) : "";
            auto key = std::make_pair(h.device, siteIdentity(site, p.cwd, code));
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

ProcessName nameOf(const core::ProcessTrace& p) {
    ProcessName n{p.pid, p.command, p.rank, processLabel(p), {}};
    for (const auto& [device, totals] : p.devices) n.peaks[device] = totals.peakBytes;
    return n;
}

using Processes = std::vector<const core::ProcessTrace*>;

// The processes of one trace a diff compares: those that allocated, of those whose
// command line has options.command; the first of them when none allocated (the
// launched program, as diff compared before it compared several).
Processes compared(const core::Trace& t, const DiffOptions& options, const std::string& what) {
    if (t.processes.empty()) throw core::Error(core::kExitBadInput, what + " holds no process");
    const Processes named = withCommand(t, options.command, what);
    Processes out;
    for (const core::ProcessTrace* p : named)
        if (allocated(*p) || (options.pid && p->pid == *options.pid)) out.push_back(p);
    if (out.empty()) out.push_back(named.front());
    return out;
}

struct Pair {
    const core::ProcessTrace* base;
    const core::ProcessTrace* current;
    const char* matchedBy;
};

// The matching rule of Diff.h, step by step; `base` and `current` keep what is left.
std::vector<Pair> matchProcesses(Processes& base, Processes& current) {
    std::vector<Pair> pairs;
    auto step = [&](const char* by, auto matches) {
        for (auto& a : base) {
            if (!a) continue;
            for (auto& b : current) {
                if (!b || !matches(*a, *b)) continue;
                pairs.push_back({a, b, by});
                a = b = nullptr;
                break;
            }
        }
    };
    step("rank", [](const core::ProcessTrace& a, const core::ProcessTrace& b) {
        return a.rank && a.rank == b.rank && a.command == b.command;
    });
    step("rank", [](const core::ProcessTrace& a, const core::ProcessTrace& b) {
        return a.rank && a.rank == b.rank;
    });
    step("command", [](const core::ProcessTrace& a, const core::ProcessTrace& b) {
        return !a.rank && !b.rank && a.command == b.command;
    });
    step("order", [](const core::ProcessTrace& a, const core::ProcessTrace& b) {
        return !a.rank && !b.rank;
    });
    std::erase(base, nullptr);
    std::erase(current, nullptr);
    std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& x, const Pair& y) {
        return x.base < y.base;  // the base trace's order: its processes lie in one vector
    });
    return pairs;
}

}  // namespace

TraceDiff diffTraces(const core::Trace& base, const core::Trace& current,
                     const DiffOptions& options) {
    Processes a = compared(base, options, "the base trace");
    Processes b = compared(current, options, "the new trace");
    auto holds = [&](const Processes& ps) {
        return std::any_of(ps.begin(), ps.end(), [&](auto* p) { return p->pid == *options.pid; });
    };
    if (options.pid && !holds(a) && !holds(b)) {
        std::string present;
        for (const Processes* ps : {&a, &b})
            for (const core::ProcessTrace* p : *ps)
                present += (present.empty() ? "" : ", ") + processLabel(*p);
        throw core::Error(core::kExitBadInput,
                          fmt::format("neither trace has a process with pid {} that diff "
                                      "compares (they have: {})",
                                      *options.pid, present));
    }
    TraceDiff d;
    for (const Pair& pair : matchProcesses(a, b)) {
        if (options.pid && pair.base->pid != *options.pid && pair.current->pid != *options.pid)
            continue;
        ProcessDiff pd = diffProcesses(*pair.base, *pair.current, options.top);
        pd.base = nameOf(*pair.base);
        pd.current = nameOf(*pair.current);
        pd.matchedBy = pair.matchedBy;
        d.processes.push_back(std::move(pd));
    }
    for (const auto& [left, into] : {std::pair{&a, &d.onlyInBase}, std::pair{&b, &d.onlyInNew}})
        for (const core::ProcessTrace* p : *left)
            if (!options.pid || p->pid == *options.pid) into->push_back(nameOf(*p));
    return d;
}

namespace {

void renderProcessText(const ProcessDiff& d, std::ostream& out, core::ByteUnits units) {
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

// "pid 7 (python3 train.py): cpu peak 4.00 MiB, cuda:0 peak 1.00 GiB".
std::string aloneText(const ProcessName& p, core::ByteUnits units) {
    std::string text = p.label;
    if (p.rank) text += fmt::format(", rank {}", *p.rank);
    const char* separator = ": ";
    for (const auto& [device, peak] : p.peaks) {
        text += fmt::format("{}{} peak {}", separator, device, core::formatBytes(peak, units));
        separator = ", ";
    }
    return text;
}

const char* matchedByText(const std::string& by) {
    return by == "rank"      ? "the same rank"
           : by == "command" ? "the same command line"
                             : "order of start";
}

}  // namespace

void renderDiffText(const TraceDiff& d, std::ostream& out, core::ByteUnits units) {
    // One process in each trace: its tables alone, as diff has always printed them.
    if (!d.several()) {
        for (const ProcessDiff& p : d.processes) renderProcessText(p, out, units);
        return;
    }
    out << fmt::format(
        "{} process{} compared, {} only in the base trace, {} only in the new trace\n",
        d.processes.size(), d.processes.size() == 1 ? "" : "es", d.onlyInBase.size(),
        d.onlyInNew.size());
    for (const ProcessDiff& p : d.processes) {
        out << fmt::format("\n## {} → {}{} (matched by {})\n", p.base.label, p.current.label,
                           p.base.rank ? fmt::format(", rank {}", *p.base.rank) : "",
                           matchedByText(p.matchedBy));
        renderProcessText(p, out, units);
    }
    for (const auto& [alone, where] :
         {std::pair{&d.onlyInBase, "base"}, std::pair{&d.onlyInNew, "new"}}) {
        if (alone->empty()) continue;
        out << fmt::format("\nOnly in the {} trace:\n", where);
        for (const ProcessName& p : *alone) out << "  " << aloneText(p, units) << '\n';
    }
}

namespace {

nlohmann::json processJson(const ProcessDiff& d) {
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
    return {{"devices", devices}, {"sites", sites}, {"shrunk_sites", shrunk}};
}

nlohmann::json nameJson(const ProcessName& p) {
    return {{"pid", p.pid},
            {"command", p.command},
            {"rank", p.rank ? nlohmann::json(*p.rank) : nlohmann::json(nullptr)}};
}

}  // namespace

void renderDiffJson(const TraceDiff& d, std::ostream& out) {
    // The first pair's tables also at the top, where diff wrote its one process's.
    nlohmann::json j =
        d.processes.empty() ? processJson(ProcessDiff{}) : processJson(d.processes[0]);
    nlohmann::json processes = nlohmann::json::array();
    for (const ProcessDiff& p : d.processes) {
        nlohmann::json e = {
            {"base", nameJson(p.base)}, {"new", nameJson(p.current)}, {"matched_by", p.matchedBy}};
        e.update(processJson(p));
        processes.push_back(std::move(e));
    }
    auto alone = [](const std::vector<ProcessName>& names) {
        nlohmann::json list = nlohmann::json::array();
        for (const ProcessName& p : names) {
            nlohmann::json e = nameJson(p);
            e["peak_bytes"] = p.peaks;
            list.push_back(std::move(e));
        }
        return list;
    };
    j["processes"] = std::move(processes);
    j["only_in_base"] = alone(d.onlyInBase);
    j["only_in_new"] = alone(d.onlyInNew);
    out << j.dump(2) << '\n';
}

}  // namespace memtool::reporters
