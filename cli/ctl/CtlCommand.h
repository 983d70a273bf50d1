#pragma once
// `memtool ctl`: commands for processes that run under `memtool run`.
//
//   memtool ctl list                      the user's processes that accept commands
//   memtool ctl PID status                their regions by tag, bytes and state
//   memtool ctl PID pause [TAG...]        release the memory of those tags (all: none named)
//   memtool ctl PID resume [TAG...]       give it back
//   memtool ctl PID yield / restore       Courtesy: all of its memory, to host or disk
//   memtool ctl PID tensors [--device D] [--verbose] [--wait S]
//                                         its live tensors (memlab's table), the rest of
//                                         its memory by site, and how they add up
//   memtool ctl PID snapshot [-o FILE]    a trace.json of it as of now (stdout: none or -)
//   memtool ctl PID policy FILE|off|show  its memory policy set, ended or shown (cli/policy)
//   memtool ctl --all|--rank N|--run ID COMMAND
//                                         the same to every process selected
//                                         (CtlSelection.h), all at once, each
//                                         answering for itself: in text each of its
//                                         lines headed "[pid P rank R] ", in JSON
//                                         {"processes":[{pid, rank, run, exit,
//                                         status, body|file, error}...], "left_out":
//                                         [pids not connected yet]}; snapshot needs
//                                         -o FILE, with %p (the pid) for several
//
// The command runs in the target (its collector's control thread) and the reply
// says what it did. Exit codes: 0 done (a selection: every process selected
// succeeded); 1 the command ran and failed (or a program under an older memtool
// does not know it), or, for a selection, some process did not succeed (each
// one's own code is in its answer: kExitSomeFailed); 2 a usage error, an unknown
// command included; 3 the process does not run under memtool (or is gone), or a
// selection selects none; 4 it belongs to another user.

#include <optional>
#include <string>
#include <vector>

#include "cli/ctl/CtlSelection.h"

namespace memtool::cli {

struct CtlOptions {
    std::vector<std::string> words;         // "list", or PID then the command and its arguments
    std::string format = "text";            // "text" or "json"
    double timeoutS = 600;                  // how long to wait for the answer
    std::string output;                     // snapshot: where the trace goes (empty or "-": stdout)
    std::optional<CtlSelection> selection;  // --all, --rank N, --run ID: no pid in `words`
};

inline constexpr int kExitNoSuchProcess = 3;
inline constexpr int kExitOtherUser = 4;
// A selection's command: some selected process did not succeed.
inline constexpr int kExitSomeFailed = 1;

int ctlCommand(const CtlOptions& options);

// ctl's own options taken out of `options.words` wherever they stand (--format,
// --timeout, -o, and the selection: takeSelection); the words left are list, or
// the pid and the command, or (with a selection) the command. Usage errors throw
// core::Error (exit 2).
CtlOptions withTrailingOptions(CtlOptions options);

// --timeout's value: seconds above 0, at most 10,000,000 (nan, inf and what does
// not parse: none).
std::optional<double> ctlTimeoutSeconds(const std::string& text);
inline constexpr const char* kCtlTimeoutRule = "takes seconds (above 0, at most 10000000)";

}  // namespace memtool::cli
