#include "cli/run/RunEvents.h"

#include "cli/stream/CollectorConnection.h"
#include "core/Error.h"

namespace memtool::cli {

void RunEvents::add(core::ProcessTrace& p, CollectorConnection& c) {
    EventRecorder* recorder = c.events();
    if (!recorder) return;
    const reporters::EventSection& s = recorder->section(c.symbolizer());
    core::EventsSummary summary;
    summary.section = sections_.size();
    summary.mode = s.process.mode;
    summary.limit = s.process.limit;
    summary.seen = s.process.seen;
    summary.kept = s.eventCount;
    summary.folded = s.process.folded;
    p.events = summary;
    sections_.push_back(&s);
}

void RunEvents::write(core::Trace& trace, const std::string& tracePath) const {
    std::vector<const reporters::EventSection*> mine;
    for (core::ProcessTrace& p : trace.processes) {
        if (!p.events) continue;
        const uint64_t position = mine.size();
        mine.push_back(sections_.at(p.events->section));
        p.events->section = position;
    }
    if (mine.empty()) return;
    const std::string name = reporters::eventLogName(tracePath);
    reporters::writeEventLog(reporters::eventLogPath(tracePath, name), mine, core::kExitRunFailed);
    trace.eventsFile = name;
}

}  // namespace memtool::cli
