#include "reporters/Check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/Error.h"
#include "core/Units.h"
#include "reporters/Markup.h"
#include "reporters/ProcessSelection.h"
#include "reporters/RankSummary.h"
#include "trace/HotspotSelection.h"

namespace memtool::reporters {

namespace {

[[noreturn]] void usage(const std::string& message) {
    throw core::Error(core::kExitBadInput, message);
}

const core::ProcessTrace& launched(const core::Trace& t, const std::string& what) {
    if (t.processes.empty()) usage(what + " holds no process");
    return t.processes[0];
}

// A measured size in a message: "12.00 MiB (12582912 bytes)", or with --bytes
// exact just "12,582,912 B" (the figure is already whole bytes).
std::string sized(uint64_t bytes, core::ByteUnits units) {
    if (units == core::ByteUnits::Exact) return core::formatBytes(bytes, units);
    return fmt::format("{} ({} bytes)", core::formatBytes(bytes, units), bytes);
}

// The processes a limit or baseline is held against: those --pid/--rank (already
// applied to the trace) and --command name, else every process that allocated. A
// --command that names none is a usage error (a typo must not pass).
std::vector<const core::ProcessTrace*> checkedProcesses(const core::Trace& t,
                                                        const CheckOptions& o) {
    std::vector<const core::ProcessTrace*> out;
    for (const core::ProcessTrace* p : withCommand(t, o.command, "the trace"))
        if (o.named || !o.command.empty() || allocated(*p)) out.push_back(p);
    return out;
}

// The devices a selector names in this process, among those it has. "cuda" names
// every cuda:N present, "npu" every npu:N.
std::vector<std::string> devicesFor(const DeviceSelector& s, const core::ProcessTrace& p) {
    std::vector<std::string> out;
    const bool kind = s.device == "cuda" || s.device == "npu";
    for (const auto& [name, d] : p.devices)
        if (kind ? name.rfind(s.device + ":", 0) == 0 : name == s.device) out.push_back(name);
    return out;
}

uint64_t measure(const core::ProcessTrace& p, const std::string& device, const std::string& pool,
                 Metric m) {
    auto it = p.devices.find(device);
    if (!pool.empty()) {
        // A bridge that saw no private pool: nothing was held in one.
        const bool privatePool = pool == core::kPoolGraphs || pool == core::kPoolGraphsActive;
        if (privatePool && it != p.devices.end() && it->second.pools.count(core::kPoolReserved) &&
            !it->second.pools.count(pool))
            return 0;
        if (it == p.devices.end() || !it->second.pools.count(pool))
            usage(fmt::format(
                "the trace has no {} figures for {} (the torch bridge was not attached)", pool,
                device));
        return metricTotal(it->second.pools.at(pool), m);
    }
    return it == p.devices.end() ? 0 : metricTotal(it->second, m);
}

}  // namespace

Metric parseMetric(const std::string& text) {
    if (text == "peak") return Metric::Peak;
    if (text == "allocated") return Metric::Allocated;
    if (text == "leaked") return Metric::Leaked;
    if (text == "held-at-exit") return Metric::HeldAtExit;
    usage("unknown metric '" + text + "' (use peak, allocated, leaked or held-at-exit)");
}

const char* metricName(Metric m) {
    switch (m) {
        case Metric::Peak:
            return "peak";
        case Metric::Allocated:
            return "allocated";
        case Metric::Leaked:
            return "leaked";
        case Metric::HeldAtExit:
            return "held-at-exit";
    }
    return "peak";
}

// std::regex recurses per character: a long argument overflowed the stack. No
// device, percentage or size is longer than this.
constexpr size_t kMaxArgumentBytes = 64;

DeviceSelector parseDeviceSelector(const std::string& text) {
    // An ordinal as PyTorch numbers devices (cuda:0 ... cuda:999), never one that
    // overflows on the way.
    static const std::regex form(
        R"((cpu|pinned|shared|cuda|cuda:\d{1,3}|npu|npu:\d{1,2})(\.(active|reserved|graphs|graphs_active))?)");
    std::smatch m;
    if (text.size() > kMaxArgumentBytes || !std::regex_match(text, m, form) ||
        (m[1] == "cpu" && m[3].matched) || (m[1] == "pinned" && m[3].matched) ||
        (m[1] == "shared" && m[3].matched) || (m[1] == "cuda" && m[3].matched) ||
        (m[1].str().rfind("npu", 0) == 0 && m[3].matched)) {
        usage("bad device '" + text +
              "' (use cpu, pinned, shared, cuda, cuda:N, cuda:N.active, cuda:N.reserved, "
              "cuda:N.graphs, cuda:N.graphs_active, npu or npu:N)");
    }
    return DeviceSelector{m[1], m[3].matched ? m[3].str() : "", text};
}

PeakLimit parsePeakLimit(const std::string& text) {
    size_t eq = text.find('=');
    if (eq == std::string::npos)
        usage("bad limit '" + text + "' (use DEVICE=SIZE, e.g. cpu=512MiB)");
    PeakLimit l;
    l.selector = parseDeviceSelector(text.substr(0, eq));
    std::string size = text.substr(eq + 1);
    auto bytes = core::parseSize(size);
    if (!bytes && !size.empty() && std::isdigit(static_cast<unsigned char>(size.back())) &&
        size.find('.') != std::string::npos)
        usage("bad size '" + size +
              "': a size without a unit is whole bytes (write 1.5GiB, 1.5GB, "
              "1.5MiB, ...)");
    if (!bytes) usage("bad size '" + size + "' (use bytes or a unit: 123456, 512MiB, 2GB, 1.5GiB)");
    l.bytes = *bytes;
    return l;
}

Increase parseIncrease(const std::string& text) {
    Increase inc;
    inc.text = text;
    if (!text.empty() && text.back() == '%') {
        std::string num = text.substr(0, text.size() - 1);
        static const std::regex decimal(R"(\d+(\.\d+)?)");
        if (num.size() > kMaxArgumentBytes || !std::regex_match(num, decimal))
            usage("bad increase '" + text + "' (use a percentage like 5% or a size)");
        inc.percent = true;
        // strtod, not stod: a percentage past double's range is bad input, not an exception.
        inc.value = std::strtod(num.c_str(), nullptr);
        if (!std::isfinite(inc.value))
            usage("bad increase '" + text + "' (use a percentage like 5% or a size)");
        return inc;
    }
    auto bytes = core::parseSize(text);
    if (!bytes)
        usage("bad increase '" + text + "' (use a percentage like 5% or a size like 64MiB)");
    inc.value = static_cast<double>(*bytes);
    return inc;
}

Increase parseRankSpread(const std::string& text) {
    Increase inc = parseIncrease(text);
    if (!inc.percent)
        throw core::Error(core::kExitBadInput,
                          "--max-rank-spread '" + text +
                              "': give a percentage, how much more the largest rank may hold "
                              "than the smallest (50%: 1.5x)");
    return inc;
}

namespace {

// The trace is whole (the launched process's, and each checked one's), and the
// program was not killed before its collector could end the stream (the
// kernel's OOM killer, a CI timeout): its trace may be whole (its send buffer
// read back), the run still failed. A program that dies of Ctrl-C after
// finalizing ended its stream; a process it started and ended by a signal (a
// pool's worker) fails nothing that way.
void completenessChecks(const core::Trace& trace,
                        const std::vector<const core::ProcessTrace*>& selected,
                        const CheckOptions& options, std::vector<CheckResult>& results) {
    const char* allowed = options.allowIncomplete ? " (allowed by --allow-incomplete)" : "";
    auto fail = [&](const core::ProcessTrace& q, std::string message) {
        CheckResult r;
        r.kind = "complete";
        r.name = "trace complete";
        r.pid = q.pid;
        r.passed = options.allowIncomplete;
        r.message = std::move(message) + allowed;
        results.push_back(r);
    };
    std::vector<const core::ProcessTrace*> whose{&trace.processes[0]};
    for (const core::ProcessTrace* q : selected)
        if (q != whose[0]) whose.push_back(q);
    if (const core::ProcessTrace& p = *whose[0]; p.complete && p.stream.readBack)
        fail(p, fmt::format("the program was killed{} before memtool's collector could end its "
                            "stream",
                            p.exitSignal ? fmt::format(" by signal {}", *p.exitSignal) : ""));
    for (const core::ProcessTrace* q : whose)
        if (!q->complete)
            fail(*q, fmt::format("the trace {}is incomplete: {}",
                                 q == whose[0] ? "" : "of " + processLabel(*q) + " ",
                                 q->incompleteReason));
}

// A run that hit out-of-memory failed, whatever its peaks say (any process's).
void oomChecks(const core::Trace& trace, const CheckOptions& options,
               std::vector<CheckResult>& results) {
    for (const core::ProcessTrace& q : trace.processes) {
        if (q.oom.empty()) continue;
        const core::OomEvent& e = q.oom.front();
        CheckResult r;
        r.kind = "oom";
        r.name = "no out-of-memory";
        r.device = e.device;
        r.pid = q.pid;
        r.value = e.requestedBytes;
        r.passed = options.allowOom;
        r.message = fmt::format(
            "process {} ran out of memory on {}: {} requested at {} while {} were held{}{}", q.pid,
            e.device, core::formatBytes(e.requestedBytes, options.bytes),
            shownSite(q, e.siteFrame, core::kNoStackSite),
            core::formatBytes(e.liveBytes, options.bytes),
            q.oomCount > 1 ? fmt::format(" ({} out-of-memory events)", q.oomCount) : "",
            options.allowOom ? " (allowed by --allow-oom)" : "");
        results.push_back(r);
    }
}

// Limits and baselines need something measured: a trace of a program that never
// loaded torch (or of a wrapper whose child was not traced) must not pass them.
// Returns whether anything was.
bool measuredCheck(const core::Trace& trace, const std::vector<const core::ProcessTrace*>& selected,
                   const CheckOptions& options, std::vector<CheckResult>& results) {
    for (const core::ProcessTrace* q : selected)
        if (allocated(*q)) return true;
    size_t tracked = 0;
    for (const core::ProcessTrace& q : trace.processes) tracked += q.tracked;
    CheckResult r;
    r.kind = "measured";
    r.name = "memory was measured";
    r.passed = options.allowEmpty;
    const std::string unloadable = tracked == 0 && !trace.processes.empty()
                                       ? core::collectorUnloadable(trace.processes.front())
                                       : "";
    if (!unloadable.empty())
        r.message = "nothing was measured: " + unloadable;
    else if (tracked == 0)
        r.message =
            "nothing was measured: no process loaded an allocator memtool tracks (PyTorch's "
            "libc10, CUDA); did the program import torch, under the python that has it?";
    else if (options.named || !options.command.empty())
        r.message =
            "nothing was measured: the processes checked allocated no memory memtool tracks";
    else
        r.message = fmt::format(
            "nothing was measured: {} that loaded an allocator memtool tracks allocated nothing",
            tracked == 1 ? "the process" : fmt::format("the {} processes", tracked));
    if (options.allowEmpty) r.message += " (allowed by --allow-empty)";
    results.push_back(r);
    return false;
}

// Shown before a check's figures when the trace holds (or held, before --pid or
// --rank) more than one process.
std::string labelFor(const core::Trace& trace, const core::ProcessTrace& p,
                     const CheckOptions& options) {
    return trace.processes.size() > 1 || options.named ? processLabel(p) + " " : "";
}

// A held-at-exit limit on a process whose globals were never listed (a C or C++
// program, a stream without Python's moment): the figure is unknown, not 0.
bool heldUnknown(const core::ProcessTrace& p, Metric m, const std::string& label, CheckResult& r) {
    if (m != Metric::HeldAtExit || p.heldAtExitKnown) return false;
    r.passed = false;
    r.message = fmt::format("{}{} held-at-exit is unknown: leak_moment {} listed no Python globals",
                            label, r.device, p.leakMoment);
    return true;
}

void limitChecks(const core::Trace& trace, const std::vector<const core::ProcessTrace*>& selected,
                 const CheckOptions& options, std::vector<CheckResult>& results) {
    for (const PeakLimit& l : options.limits) {
        const Metric m = l.metric.value_or(options.metric);
        const char* metric = metricName(m);
        bool seen = false;
        for (const core::ProcessTrace* p : selected) {
            for (const std::string& device : devicesFor(l.selector, *p)) {
                seen = true;
                std::string shown =
                    l.selector.pool.empty() ? device : device + "." + l.selector.pool;
                std::string label = labelFor(trace, *p, options);
                CheckResult r;
                r.kind = "limit";
                r.device = shown;
                r.pid = p->pid;
                r.rank = p->rank;
                r.value = measure(*p, device, l.selector.pool, m);
                r.limit = l.bytes;
                r.passed = r.value <= r.limit;
                r.name = fmt::format("{}{} {} <= {}", label, shown, metric,
                                     core::formatBytes(l.bytes, options.bytes));
                if (heldUnknown(*p, m, label, r)) {
                    results.push_back(r);
                    continue;
                }
                const core::ByteUnits u = options.bytes;
                r.message = r.passed ? fmt::format("{}{} {} {} is within {}", label, shown, metric,
                                                   sized(r.value, u), sized(r.limit, u))
                                     : fmt::format("{}{} {} {} exceeds {} by {}", label, shown,
                                                   metric, sized(r.value, u), sized(r.limit, u),
                                                   sized(r.value - r.limit, u));
                results.push_back(r);
            }
        }
        if (seen) continue;
        // A device the run never used is not a pass at 0 bytes: the limit was meant
        // for memory that was not measured (a CPU-only run, a wrong cuda:N).
        std::set<std::string> saw;
        for (const core::ProcessTrace* p : selected)
            for (const auto& [name, d] : p->devices) saw.insert(name);
        std::string sawText;
        for (const auto& name : saw) sawText += (sawText.empty() ? "" : ", ") + name;
        CheckResult r;
        r.kind = "limit";
        r.device = l.selector.text;
        r.limit = l.bytes;
        r.passed = false;
        r.name = fmt::format("{} {} <= {}", l.selector.text, metric,
                             core::formatBytes(l.bytes, options.bytes));
        r.message =
            fmt::format("{} {}: the trace never saw {} (it saw {})", l.selector.text, metric,
                        l.selector.device == "cuda"  ? "a CUDA device"
                        : l.selector.device == "npu" ? "an NPU"
                                                     : l.selector.device,
                        sawText.empty() ? "no device" : sawText);
        results.push_back(r);
    }
}

// Pairs each checked process with the baseline's process of the same command line
// (in order, for repeats), the rest in order; a process the baseline lacks is
// compared with nothing (0 bytes).
std::vector<const core::ProcessTrace*> pairWithBaseline(
    const std::vector<const core::ProcessTrace*>& selected, const core::Trace& base,
    const CheckOptions& options, const std::string& basePath) {
    std::vector<const core::ProcessTrace*> candidates;
    for (const core::ProcessTrace& b : base.processes)
        if (allocated(b) && (options.command.empty() || commandContains(b, options.command)))
            candidates.push_back(&b);
    if (candidates.empty())
        usage(basePath + " holds no process that allocated memory memtool tracks" +
              (options.command.empty() ? ""
                                       : " with a command containing '" + options.command + "'"));
    std::vector<const core::ProcessTrace*> paired(selected.size(), nullptr);
    std::vector<bool> used(candidates.size(), false);
    for (size_t i = 0; i < selected.size(); ++i)
        for (size_t j = 0; j < candidates.size(); ++j)
            if (!used[j] && candidates[j]->command == selected[i]->command) {
                paired[i] = candidates[j];
                used[j] = true;
                break;
            }
    size_t next = 0;
    for (size_t i = 0; i < selected.size(); ++i) {
        while (!paired[i] && next < candidates.size()) {
            if (!used[next]) {
                paired[i] = candidates[next];
                used[next] = true;
            }
            ++next;
        }
    }
    return paired;
}

// The baseline figure process i is held to: its pair's. Processes of one command
// line paired with the baseline's of that line are interchangeable (a DataLoader's
// workers: which of them held the shared batch at the peak differs from run to
// run), so they are compared as a set: i with the baseline figure that ranks among
// theirs as i's ranks among its peers' (the largest with the largest), and
// identical runs compare equal.
uint64_t baselineFigure(size_t i, const std::vector<const core::ProcessTrace*>& selected,
                        const std::vector<const core::ProcessTrace*>& bases,
                        const std::string& device, const std::string& pool, Metric metric) {
    static const core::ProcessTrace kNone;
    const auto pairedByCommand = [&](size_t k) {
        return bases[k] && bases[k]->command == selected[k]->command &&
               selected[k]->command == selected[i]->command;
    };
    if (!pairedByCommand(i)) return measure(bases[i] ? *bases[i] : kNone, device, pool, metric);
    std::vector<std::pair<uint64_t, size_t>> now;  // i's peers' figures, and who
    std::vector<uint64_t> was;
    for (size_t k = 0; k < selected.size(); ++k)
        if (pairedByCommand(k)) {
            now.emplace_back(measure(*selected[k], device, pool, metric), k);
            was.push_back(measure(*bases[k], device, pool, metric));
        }
    std::sort(now.begin(), now.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::sort(was.begin(), was.end(), std::greater<uint64_t>());
    size_t rank = 0;
    while (now[rank].second != i) ++rank;
    return was[rank];
}

void baselineChecks(const core::Trace& trace,
                    const std::vector<const core::ProcessTrace*>& selected,
                    const CheckOptions& options, std::vector<CheckResult>& results) {
    static const core::ProcessTrace kNone;
    const char* metric = metricName(options.metric);
    const std::vector<const core::ProcessTrace*> bases =
        pairWithBaseline(selected, *options.baseline, options, options.baselinePath);
    for (size_t i = 0; i < selected.size(); ++i) {
        const core::ProcessTrace& p = *selected[i];
        const core::ProcessTrace& base = bases[i] ? *bases[i] : kNone;
        const std::string label = labelFor(trace, p, options);
        // Every device of either trace, and each caching-allocator pool that both have.
        std::map<std::string, std::pair<std::string, std::string>>
            devices;  // shown -> (device, pool)
        for (const auto* t : {&base, &p})
            for (const auto& [name, d] : t->devices) devices[name] = {name, ""};
        for (const auto& [name, d] : p.devices) {
            auto b = base.devices.find(name);
            for (const auto& [pool, totals] : d.pools)
                if (b != base.devices.end() && b->second.pools.count(pool))
                    devices[name + "." + pool] = {name, pool};
        }
        for (const auto& [device, which] : devices) {
            uint64_t was =
                baselineFigure(i, selected, bases, which.first, which.second, options.metric);
            uint64_t now = measure(p, which.first, which.second, options.metric);
            const Increase& inc = *options.maxIncrease;
            // Allowed growth in whole bytes, rounded down: 0% allows none at all.
            long double grow = std::floor(
                inc.percent ? static_cast<long double>(was) * inc.value / 100.0L : inc.value);
            // A growth past 64 bits allows everything.
            uint64_t allowed = grow >= static_cast<long double>(UINT64_MAX - was)
                                   ? UINT64_MAX
                                   : was + static_cast<uint64_t>(grow);
            CheckResult r;
            r.kind = "baseline";
            r.device = device;
            r.pid = p.pid;
            r.rank = p.rank;
            r.value = now;
            r.limit = allowed;
            r.passed = now <= allowed;
            r.name = fmt::format("{}{} {} grows at most {} over baseline", label, device, metric,
                                 inc.text);
            double pct = was ? 100.0 * (static_cast<double>(now) - static_cast<double>(was)) /
                                   static_cast<double>(was)
                             : (now ? INFINITY : 0.0);
            std::string change = fmt::format(
                "{} ({:+.2f}%)",
                core::formatBytesDelta(static_cast<int64_t>(now - was), options.bytes), pct);
            const core::ByteUnits u = options.bytes;
            std::string baseText =
                bases[i] ? "baseline " + sized(was, u)
                         : std::string("no process of the baseline ran this command (0 bytes)");
            r.message = r.passed ? fmt::format("{}{} {} {}, {}: {} within +{}", label, device,
                                               metric, sized(now, u), baseText, change, inc.text)
                                 : fmt::format("{}{} {} {}, {}: {} exceeds the allowed {} by {}",
                                               label, device, metric, sized(now, u), baseText,
                                               change, sized(allowed, u), sized(now - allowed, u));
            results.push_back(r);
        }
    }
}

}  // namespace

namespace {

// --max-rank-spread: per kind of device the ranks used, the largest rank's peak
// against the smallest's times (1 + P%), rounded down to whole bytes. Fewer than
// two ranks to compare fails: a limit on ranks that were not there passes nothing.
void rankSpreadChecks(const core::Trace& trace, const CheckOptions& options,
                      std::vector<CheckResult>& results) {
    const RankSummary s = summarizeRanks(trace, RankFigures::WithoutHostPeaks);
    const Increase& inc = *options.maxRankSpread;
    const core::ByteUnits u = options.bytes;
    for (const RankSpread& spread : s.spreads) {
        CheckResult r;
        r.kind = "rank-spread";
        r.device = spread.kind;
        r.pid = trace.processes[spread.largest.process].pid;
        r.rank = spread.largest.rank;
        r.leastRank = spread.smallest.rank;
        r.value = spread.largest.peakBytes;
        const long double allowed = std::floor(static_cast<long double>(spread.smallest.peakBytes) *
                                               (1.0L + inc.value / 100.0L));
        r.limit = allowed >= static_cast<long double>(UINT64_MAX) ? UINT64_MAX
                                                                  : static_cast<uint64_t>(allowed);
        r.passed = r.value <= r.limit;
        r.name = fmt::format("{} rank spread <= {}", spread.kind, inc.text);
        r.message = fmt::format(
            "{} rank spread: rank {} holds {}, rank {} {}: {} {} {}", spread.kind,
            spread.largest.rank, sized(spread.largest.peakBytes, u), spread.smallest.rank,
            sized(spread.smallest.peakBytes, u),
            spread.spread
                ? fmt::format("{:.2f}x (+{:.2f}%)", *spread.spread, spreadPercent(*spread.spread))
                : std::string("the least held nothing"),
            r.passed ? "is within" : "exceeds", inc.text);
        results.push_back(r);
    }
    if (!s.spreads.empty()) return;
    CheckResult r;
    r.kind = "rank-spread";
    r.name = fmt::format("rank spread <= {}", inc.text);
    r.passed = false;
    r.message =
        s.ranks == 0
            ? "rank spread: no process checked has a rank (RANK, SLURM_PROCID, "
              "OMPI_COMM_WORLD_RANK or PMI_RANK, as a launcher sets them); a job's traces go in "
              "together: memtool check rank0.json rank1.json ..."
            : fmt::format(
                  "rank spread: fewer than two ranks allocated on one kind of device "
                  "({} rank{} checked)",
                  s.ranks, s.ranks == 1 ? "" : "s");
    results.push_back(r);
}

}  // namespace

std::vector<CheckResult> runChecks(const core::Trace& trace, const CheckOptions& options) {
    std::vector<CheckResult> results;
    launched(trace, "the trace");
    const std::vector<const core::ProcessTrace*> selected = checkedProcesses(trace, options);
    completenessChecks(trace, selected, options, results);
    oomChecks(trace, options, results);

    if (options.maxRankSpread) rankSpreadChecks(trace, options, results);
    // Asked for nothing else, check says that these two held.
    if (options.limits.empty() && !options.baseline && !options.maxRankSpread) {
        bool oom = false;
        for (const core::ProcessTrace& q : trace.processes) oom |= !q.oom.empty();
        auto held = [&](const char* kind, const char* name, const char* message) {
            CheckResult r;
            r.kind = kind;
            r.name = name;
            r.passed = true;
            r.message = message;
            results.push_back(r);
        };
        bool complete = true;
        for (const auto& r : results) complete &= r.kind != "complete";
        if (complete) held("complete", "trace complete", "the trace is complete");
        if (!oom) held("oom", "no out-of-memory", "no process ran out of memory");
        return results;
    }

    if (options.limits.empty() && !options.baseline) return results;
    if (!measuredCheck(trace, selected, options, results)) return results;
    limitChecks(trace, selected, options, results);
    if (options.baseline && options.maxIncrease) baselineChecks(trace, selected, options, results);
    return results;
}

void renderCheckText(const std::vector<CheckResult>& results, std::ostream& out) {
    size_t failed = 0;
    for (const auto& r : results) {
        failed += !r.passed;
        out << (r.passed ? "PASS  " : "FAIL  ") << r.message << '\n';
    }
    out << fmt::format("memtool check: {} check{}, {} failed\n", results.size(),
                       results.size() == 1 ? "" : "s", failed);
}

void renderCheckJson(const std::vector<CheckResult>& results, std::ostream& out) {
    nlohmann::json checks = nlohmann::json::array();
    bool passed = true;
    for (const auto& r : results) {
        passed &= r.passed;
        nlohmann::json c = {
            {"name", r.name}, {"kind", r.kind}, {"passed", r.passed}, {"message", r.message}};
        if (r.kind == "oom") {
            if (!r.device.empty()) {  // one happened (and may be allowed)
                c["device"] = r.device;
                c["requested_bytes"] = r.value;
            }
        } else if (r.kind == "rank-spread") {
            c["device"] = r.device;
            c["rank"] = r.rank ? nlohmann::json(*r.rank) : nlohmann::json(nullptr);
            c["least_rank"] = r.leastRank ? nlohmann::json(*r.leastRank) : nlohmann::json(nullptr);
            c["value_bytes"] = r.value;
            c["limit_bytes"] = r.limit;
        } else if (r.kind == "limit" || r.kind == "baseline") {
            c["pid"] = r.pid ? nlohmann::json(r.pid) : nlohmann::json(nullptr);
            c["rank"] = r.rank ? nlohmann::json(*r.rank) : nlohmann::json(nullptr);
            c["device"] = r.device;
            c["value_bytes"] = r.value;
            c["limit_bytes"] = r.limit;
            c["excess_bytes"] = r.value > r.limit ? r.value - r.limit : 0;
        }
        checks.push_back(c);
    }
    out << nlohmann::json{{"passed", passed}, {"checks", checks}}.dump(2) << '\n';
}

void renderCheckJunit(const std::vector<CheckResult>& results, const std::string& tracePath,
                      std::ostream& out) {
    size_t failures = 0;
    for (const auto& r : results) failures += !r.passed;
    out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out << fmt::format("<testsuites name=\"memtool check\" tests=\"{}\" failures=\"{}\">\n",
                       results.size(), failures);
    out << fmt::format(
        "  <testsuite name=\"memtool check {}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
        escapeMarkup(tracePath), results.size(), failures);
    for (const auto& r : results) {
        out << fmt::format("    <testcase classname=\"memtool.check\" name=\"{}\"",
                           escapeMarkup(r.name));
        if (r.passed) {
            out << fmt::format(">\n      <system-out>{}</system-out>\n    </testcase>\n",
                               escapeMarkup(r.message));
        } else {
            out << fmt::format(
                ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
                escapeMarkup(r.message), r.kind, escapeMarkup(r.message));
        }
    }
    out << "  </testsuite>\n</testsuites>\n";
}

}  // namespace memtool::reporters
