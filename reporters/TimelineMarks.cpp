#include "reporters/TimelineMarks.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/Units.h"

namespace memtool::reporters {

std::vector<TimelineMark> timelineMarks(const core::ProcessTrace& p) {
    std::vector<TimelineMark> marks;
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

}  // namespace memtool::reporters
