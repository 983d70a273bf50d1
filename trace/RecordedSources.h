#pragma once
// The code trace.json keeps of the user's own source files (ProcessTrace::sources,
// docs/TRACE.md): memtool run records it when the run ends, and the reports show
// it instead of the file as it is now, which may have changed since or not be on
// this machine at all. A file that is here and no longer hashes as it did is
// flagged, not silently shown with the wrong code.

#include <cstdint>
#include <string>

#include "trace/SourceFiles.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// A recorded line holds at most this many bytes: a longer one is not recorded, and
// a trace that holds one is not one memtool wrote.
inline constexpr uint64_t kMaxRecordedLineBytes = 64 * 1024;

// For every process, reads the user's own files (not the standard library's,
// site-packages' or system headers') that its line table, hotspot frames and
// out-of-memory events name, wherever they are (the program read them there),
// and keeps their hash and the lines the reports show: each line-table block from
// its `def` to its last row, each frame's line, each out-of-memory line. A file
// that cannot be read is left out.
void recordSources(core::Trace& trace);

// The code a report shows for `file` of process `p`: the recorded text when the
// trace has it (changed when `here`, the file as read now, hashes otherwise), else
// `here` itself.
SourceText reportedSource(const core::ProcessTrace& p, const std::string& file, SourceText here);

// "F changed since the run: lines shown as recorded".
std::string changedSourceNote(const std::string& file);

// The recorded code of `line` of `file`, without its indentation and trailing
// blanks; "" when the trace does not have it (memtool diff matches sites by it).
std::string recordedLineCode(const core::ProcessTrace& p, const std::string& file, uint64_t line);

}  // namespace memtool::reporters
