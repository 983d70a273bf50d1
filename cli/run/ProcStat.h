#pragma once
// What /proc/PID/stat tells about another process: its parent and when it started.
// Enough to tell whether a process descends from another (the chain of parents),
// and whether a pid still names the process it named before (the start time).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace memtool::cli {

struct ProcStat {
    std::string name;  // COMM (field 2), without its parentheses
    pid_t ppid = 0;
    uint64_t startTicks = 0;  // clock ticks after boot (field 22)
};

// nullopt when the process does not exist (or /proc is not mounted).
std::optional<ProcStat> readProcStat(pid_t pid);

// This process's pid namespace ("pid:[4026531836]"), "" when unknown: pids mean
// something only within one.
std::string pidNamespace();

// `pid` is `ancestor` or a descendant of it, or was re-parented to `adopter` (a
// child subreaper whose only children are `ancestor` and its descendants): its
// chain of parents in /proc reaches one of them before init. False when `pid` is
// gone (its chain can no longer be read).
bool descendsFrom(pid_t pid, pid_t ancestor, pid_t adopter);

// The processes whose parent is `parent`, by pid, with their names.
std::map<pid_t, std::string> childrenOf(pid_t parent);

}  // namespace memtool::cli
