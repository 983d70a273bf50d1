// libFuzzer harness: an event log from someone else (trace/EventLogFile.h),
// through the reader and everything that reads one: the events before each
// focus, what was live at moments, PyTorch's snapshot. core::Error (bad input,
// exit 2) is the expected answer to a bad log; anything else that escapes, and
// any sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "core/Error.h"
#include "reporters/EventReporter.h"
#include "reporters/EventViews.h"
#include "reporters/TorchSnapshot.h"
#include "trace/EventLogFile.h"

namespace {

using namespace memtool;

// A trace whose processes name the log's entries, as memtool run writes it.
core::Trace traceOf(const core::EventLog& log) {
    core::Trace t;
    for (size_t i = 0; i < log.processes.size(); ++i) {
        core::ProcessTrace p;
        p.pid = log.processes[i].pid;
        p.devices["cpu"].peakBytes = 64;
        p.events = core::EventsSummary{i, log.processes[i].mode, 0, 0, 0, 0};
        t.processes.push_back(std::move(p));
    }
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const core::EventLog log = reporters::eventLogFromBytes(data, size, "fuzz");
        const core::Trace trace = traceOf(log);
        std::ostringstream out;
        reporters::ReportOptions o;
        reporters::renderEventsBefore(trace, log, 5, o, out);
        reporters::eventsBeforeJson(trace, log, 5, o).dump();
        for (const core::ProcessEvents& p : log.processes) {
            reporters::renderTorchSnapshot(p);
            for (double at : {0.0, 1e-3, 1.0}) {
                try {
                    reporters::liveAt(p, static_cast<uint64_t>(at * 1e9));
                } catch (const core::Error&) {
                }
            }
        }
    } catch (const core::Error&) {
    }
    return 0;
}
