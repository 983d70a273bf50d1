#include "reporters/PerfettoReporter.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/Units.h"
#include "reporters/ProcessSelection.h"
#include "reporters/RankSummary.h"
#include "reporters/TimelineMarks.h"

namespace memtool::reporters {

namespace {

using nlohmann::json;

// The trace-event format counts time in microseconds; to the nanosecond, so that
// 0.4900329 s is 490032.9, not the product's 490032.89999999997.
double micros(double seconds) { return std::round(seconds * 1e9) / 1e3; }

// A process's name in the viewer: its rank and host where a launcher or several
// hosts make them matter (Perfetto and Holistic Trace Analysis list ranks so),
// then its command on one line, as the reports show it.
std::string commandText(const core::ProcessTrace& p, bool hosts) {
    std::string who;
    if (p.rank) who = fmt::format("rank {} ", *p.rank);
    if (hosts) who += fmt::format("on {} ", hostText(p.host));
    if (!who.empty()) who += "· ";
    return who + (p.command.empty() ? "pid " + std::to_string(p.pid) : commandLine(p));
}

// A process's track: its pid, unless another host's process had it first.
struct Track {
    const core::ProcessTrace& p;
    int64_t id;
    double shiftS;  // its clock's zero on the shared clock
};

// The series' points as counter events: a counter holds its value until the next
// event, which is how the points read (the bytes right after each event). The
// device held nothing before its first point.
void counters(const Track& t, const std::map<std::string, core::TimelineSeries>& all,
              const std::string& prefix, json& events) {
    for (const auto& [key, series] : all) {
        const std::string name = prefix + key;
        if (series.points.empty()) continue;
        // The binding by name: clang before 16 cannot capture a structured binding.
        auto counter = [&, &name = name](double timeS, uint64_t bytes) {
            events.push_back({{"ph", "C"},
                              {"name", name},
                              {"pid", t.id},
                              {"tid", t.id},
                              {"ts", micros(t.shiftS + timeS)},
                              {"args", {{"bytes", bytes}}}});
        };
        if (series.points.front().timeS > 0) counter(0, 0);
        for (const auto& point : series.points) counter(point.timeS, point.bytes);
    }
}

json instant(const Track& t, const std::string& name, double timeS, json args) {
    return {{"ph", "i"},
            {"s", "p"},
            {"name", name},
            {"pid", t.id},
            {"tid", t.id},
            {"ts", micros(t.shiftS + timeS)},
            {"args", std::move(args)}};
}

void peaks(const Track& t, json& events) {
    auto peak = [&](const std::string& name, const core::PoolTotals& d) {
        if (d.allocCount == 0) return;
        events.push_back(instant(t, name + " peak " + core::formatBytes(d.peakBytes), d.peakTimeS,
                                 {{"device", name}, {"bytes", d.peakBytes}}));
    };
    for (const auto& [name, d] : t.p.devices) {
        peak(name, d);
        for (const auto& [pool, totals] : d.pools) peak(name + "." + pool, totals);
    }
}

void marks(const core::Trace& trace, const Track& t, json& events) {
    for (const TimelineMark& m : timelineMarks(t.p, &trace)) {
        json args = {{"kind", m.kind}, {"device", m.device}};
        if (m.kind == "oom") {
            args["requested_bytes"] = m.bytes;
        } else {
            args["bytes"] = m.bytes;
            args["ok"] = !m.failed;
        }
        events.push_back(instant(t, m.label, m.timeS, std::move(args)));
    }
}

}  // namespace

json renderPerfetto(const core::Trace& trace) {
    json events = json::array();
    const RankSummary s = summarizeRanks(trace, RankFigures::WithoutHostPeaks);
    std::set<int64_t> ids;
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const core::ProcessTrace& p = trace.processes[i];
        const int64_t id =
            ids.insert(p.pid).second ? p.pid : p.pid + 10'000'000 * static_cast<int64_t>(i + 1);
        ids.insert(id);
        const Track t{p, id, sharedTimeS(s, p, 0)};
        auto meta = [&](const char* name, json args) {
            events.push_back(
                {{"ph", "M"}, {"name", name}, {"pid", id}, {"tid", id}, {"args", std::move(args)}});
        };
        meta("process_name", {{"name", commandText(p, s.hosts > 1)}});
        // Ranks in rank order, the launcher and other processes after them.
        meta("process_sort_index", {{"sort_index", p.rank ? *p.rank : int64_t{1} << 30}});
        counters(t, p.timeline, "", events);
        // memtool run's readings of the machine, on the program's track.
        if (i == 0) counters(t, polledSeries(trace, p), "polled ", events);
        peaks(t, events);
        marks(trace, t, events);
    }
    return {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
}

}  // namespace memtool::reporters
