#pragma once
// memtool run --events: each trace file written gets its event log beside it
// (trace/EventLogFile.h), holding the entries of its processes. The entries are
// made as the trace is assembled, while the streams' symbolizers still read
// their object files; each process's summary names its entry by its position in
// the run first and in its file's log once that is written.

#include <string>
#include <vector>

#include "trace/EventLogFile.h"
#include "trace/TraceModel.h"

namespace memtool::cli {

class CollectorConnection;

class RunEvents {
public:
    // `p` is the trace entry of `c`'s stream: when it kept events, its entry is
    // made (symbolized) and p.events says where it is among the run's.
    void add(core::ProcessTrace& p, CollectorConnection& c);
    bool any() const { return !sections_.empty(); }
    // Writes the log of the processes of `trace` (the run's, or a part of it
    // with a file of its own) beside `tracePath` and names it in the trace.
    // Throws core::Error (125) when it cannot be written.
    void write(core::Trace& trace, const std::string& tracePath) const;

private:
    std::vector<const reporters::EventSection*> sections_;  // the recorders' own
};

}  // namespace memtool::cli
