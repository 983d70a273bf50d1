#include "reporters/PerfettoReporter.h"

#include <cmath>

#include "core/Units.h"
#include "reporters/ProcessSelection.h"
#include "reporters/TimelineMarks.h"

namespace memtool::reporters {

namespace {

using nlohmann::json;

// The trace-event format counts time in microseconds; to the nanosecond, so that
// 0.4900329 s is 490032.9, not the product's 490032.89999999997.
double micros(double seconds) { return std::round(seconds * 1e9) / 1e3; }

// A process's name in the viewer: its command on one line, as the reports show it.
std::string commandText(const core::ProcessTrace& p) {
    return p.command.empty() ? "pid " + std::to_string(p.pid) : commandLine(p);
}

// The series' points as counter events: a counter holds its value until the next
// event, which is how the points read (the bytes right after each event). The
// device held nothing before its first point.
void counters(const core::ProcessTrace& p, const std::map<std::string, core::TimelineSeries>& all,
              const std::string& prefix, json& events) {
    for (const auto& [key, series] : all) {
        const std::string name = prefix + key;
        if (series.points.empty()) continue;
        // The binding by name: clang before 16 cannot capture a structured binding.
        auto counter = [&, &name = name](double timeS, uint64_t bytes) {
            events.push_back({{"ph", "C"},
                              {"name", name},
                              {"pid", p.pid},
                              {"tid", p.pid},
                              {"ts", micros(timeS)},
                              {"args", {{"bytes", bytes}}}});
        };
        if (series.points.front().timeS > 0) counter(0, 0);
        for (const auto& point : series.points) counter(point.timeS, point.bytes);
    }
}

json instant(const core::ProcessTrace& p, const std::string& name, double timeS, json args) {
    return {{"ph", "i"},
            {"s", "p"},
            {"name", name},
            {"pid", p.pid},
            {"tid", p.pid},
            {"ts", micros(timeS)},
            {"args", std::move(args)}};
}

void peaks(const core::ProcessTrace& p, json& events) {
    auto peak = [&](const std::string& name, const core::PoolTotals& d) {
        if (d.allocCount == 0) return;
        events.push_back(instant(p, name + " peak " + core::formatBytes(d.peakBytes), d.peakTimeS,
                                 {{"device", name}, {"bytes", d.peakBytes}}));
    };
    for (const auto& [name, d] : p.devices) {
        peak(name, d);
        for (const auto& [pool, totals] : d.pools) peak(name + "." + pool, totals);
    }
}

void marks(const core::Trace& trace, const core::ProcessTrace& p, json& events) {
    for (const TimelineMark& m : timelineMarks(p, &trace)) {
        json args = {{"kind", m.kind}, {"device", m.device}};
        if (m.kind == "oom") {
            args["requested_bytes"] = m.bytes;
        } else {
            args["bytes"] = m.bytes;
            args["ok"] = !m.failed;
        }
        events.push_back(instant(p, m.label, m.timeS, std::move(args)));
    }
}

}  // namespace

json renderPerfetto(const core::Trace& trace) {
    json events = json::array();
    for (const core::ProcessTrace& p : trace.processes) {
        events.push_back({{"ph", "M"},
                          {"name", "process_name"},
                          {"pid", p.pid},
                          {"tid", p.pid},
                          {"args", {{"name", commandText(p)}}}});
        counters(p, p.timeline, "", events);
        // memtool run's readings of the machine, on the program's track.
        if (&p == &trace.processes.front()) counters(p, polledSeries(trace, p), "polled ", events);
        peaks(p, events);
        marks(trace, p, events);
    }
    return {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
}

}  // namespace memtool::reporters
