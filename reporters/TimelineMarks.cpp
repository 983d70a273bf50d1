#include "reporters/TimelineMarks.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/Units.h"

namespace memtool::reporters {

std::vector<TimelineMark> timelineMarks(const core::ProcessTrace& p, const core::Trace* trace) {
    std::vector<TimelineMark> marks;
    if (trace)
        for (const core::PolicyAction& a : trace->policyActions) {
            if (a.pid != p.pid) continue;
            TimelineMark m;
            m.timeS = a.timeS;
            m.kind = "policy";
            m.device = a.device;
            m.bytes = a.bytes;
            m.failed = !a.ok;
            m.label = fmt::format("rule {}: {}; read {} ({} {})", a.rule, a.ruleText,
                                  core::formatBytes(a.readingBytes), a.action,
                                  a.ok ? "ok" : "FAILED: " + a.message);
            marks.push_back(std::move(m));
        }
    for (const core::ControlEvent& e : p.control) {
        TimelineMark m;
        m.timeS = e.timeS;
        m.kind = e.action;
        m.device = e.device;
        m.bytes = e.bytes;
        m.failed = !e.ok;
        m.label =
            fmt::format("{} {} ({}) {}", e.action, e.tag, e.origin, core::formatBytes(e.bytes));
        if (!e.ok) m.label += " FAILED: " + e.message;
        marks.push_back(std::move(m));
    }
    for (const core::OomEvent& e : p.oom) {
        TimelineMark m;
        m.timeS = e.timeS;
        m.kind = "oom";
        m.device = e.device;
        m.bytes = e.requestedBytes;
        m.label = fmt::format("OOM {} requested", core::formatBytes(e.requestedBytes));
        marks.push_back(std::move(m));
    }
    std::stable_sort(marks.begin(), marks.end(), [](const TimelineMark& a, const TimelineMark& b) {
        return a.timeS < b.timeS;
    });
    return marks;
}

std::map<std::string, core::TimelineSeries> polledSeries(const core::Trace& trace,
                                                         const core::ProcessTrace& p) {
    std::map<std::string, core::TimelineSeries> out;
    if (!trace.polls || !p.startUnixS) return out;
    const double shift = trace.polls->startUnixS - *p.startUnixS;
    for (const auto& [name, series] : trace.polls->series) {
        core::TimelineSeries& s = out[name];
        s.bucketS = series.bucketS;
        for (const core::TimelinePoint& point : series.points)
            if (point.timeS + shift >= 0) s.points.push_back({point.timeS + shift, point.bytes});
    }
    return out;
}

}  // namespace memtool::reporters
