#pragma once
// The private (0700) directory of one `memtool run`: $TMPDIR/memtool-run-XXXXXX,
// holding the collectors' socket and run.pid (memtool's pid, its start time and
// its pid namespace). The run removes it on every way out it lives to see, a
// failed start included. A run that was killed (SIGKILL) cannot, so each run
// removes the directories of runs their pid files show are gone, once its
// program has started (removeDeadNeighbours: reading a /tmp of 500 entries took
// a millisecond, which the program's start need not wait for).

#include <cstddef>
#include <string>

namespace memtool::cli {

class RunDirectory {
public:
    // Throws core::Error (125) when the directory or its pid file cannot be made.
    RunDirectory();
    ~RunDirectory();  // removes what the run put there, then the directory
    RunDirectory(const RunDirectory&) = delete;
    RunDirectory& operator=(const RunDirectory&) = delete;

    const std::string& path() const { return path_; }
    // Where the collectors connect; RunDirectory removes it.
    std::string socketPath() const { return path_ + "/" + kSocketName; }

    static constexpr const char* kSocketName = "collector.sock";
    static constexpr const char* kPidFile = "run.pid";

    // Removes the directories in `parent` of this user's runs that are no longer
    // alive (their pid names no process, or another one, in this pid namespace).
    // Only a run's own files are removed: a directory holding anything else stays.
    // Returns how many were removed.
    static size_t removeDeadRuns(const std::string& parent);
    // removeDeadRuns in the directory this one was made in.
    size_t removeDeadNeighbours() const { return removeDeadRuns(parent_); }

private:
    std::string parent_;
    std::string path_;
};

}  // namespace memtool::cli
