#pragma once
// Which processes of a trace `report`, `check` and `diff` look at: all of them, or
// those `--pid` or `--rank` names. check and diff then take, of those, every
// process that allocated (reporters/Check.h, reporters/Diff.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::reporters {

struct ProcessFilter {
    std::optional<int64_t> pid;
    std::optional<int64_t> rank;
    bool any() const { return pid || rank; }
};

// The trace with only the processes the filter names, in their order. Throws
// core::Error (exit 2) when it names none of them; `what` names the trace in the
// message ("the trace", "the baseline").
core::Trace selectProcesses(const core::Trace& trace, const ProcessFilter& filter,
                            const std::string& what = "the trace");

// "-" or the rank, as the reports show it.
std::string rankText(const core::ProcessTrace& p);

// It allocated memory memtool tracks (on any device).
bool allocated(const core::ProcessTrace& p);
// How it ended: "exit code 0", "killed by signal 9", "exec'd another program"...
std::string exitText(const core::ProcessTrace& p);
// The sentence a report shows for a process without a device: whether memtool
// never saw an allocator it tracks, or saw one that allocated nothing.
std::string noAllocationsText(const core::ProcessTrace& p);
// An argv as a shell command: its words joined by spaces, each quoted as a
// POSIX shell (bash for control characters) reads it back; a process's.
std::string commandLine(const std::vector<std::string>& argv);
std::string commandLine(const core::ProcessTrace& p);
// Its command contains `text`, as its words joined by spaces or as shown.
bool commandContains(const core::ProcessTrace& p, const std::string& text);
// `text` cut to `maxCharacters` (UTF-8 characters) where longer, the last three
// then "...".
std::string shortText(const std::string& text, size_t maxCharacters);
// Its command line, cut so.
std::string shortCommand(const core::ProcessTrace& p, size_t maxCharacters);
// Where it came from: "forked from 41" (a fork child), "started by 41" (a
// program its parent, a process of the trace, ran: subprocess, torchrun's
// ranks), or "" (the program memtool ran, or a parent the trace lacks).
std::string parentText(const core::Trace& trace, const core::ProcessTrace& p);
// "pid 42 (python3 train.py)": the command cut to 60 characters.
std::string processLabel(const core::ProcessTrace& p);
// The processes whose command line contains `text` (every one for ""), in order.
// Throws core::Error (exit 2) when none does, listing those `what` holds: a typo
// must not pass.
std::vector<const core::ProcessTrace*> withCommand(const core::Trace& trace,
                                                   const std::string& text,
                                                   const std::string& what);

}  // namespace memtool::reporters
