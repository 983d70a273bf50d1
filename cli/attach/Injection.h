#pragma once
// memtool attach's way into a running process: what is checked before it is
// touched (checkAttachable: each refusal a one-line core::Error), and the
// injection itself (inject): the process's main thread is stopped, made to call
// its C library's dlopen on the collector and then the collector's
// memtool_attach_start, and let go, its registers as they were.
//
// At every step the process is either untouched, or holds the collector loaded
// and idle, or is tracked; between the steps it is in a ptrace stop with its own
// registers, so that memtool dying there (a test kills it at each, through
// MEMTOOL_ATTACH_DIE_AT=stopped|loaded|started) leaves it running on.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memtool::cli {

// What the collector is started with: memtool run's variables for a program.
struct InjectionPlan {
    pid_t pid = 0;
    std::string collector;      // the collector library's path
    std::string socket;         // MEMTOOL_SOCKET
    std::string options;        // MEMTOOL_OPTIONS
    std::string backupDir;      // MEMTOOL_BACKUP_DIR
    std::string pythonPackage;  // the directory that holds memtool's Python package
};

// Throws core::Error (kExitBadInput) when `pid` is no process memtool can attach
// to: none, a zombie, pid 1, another user's, not x86-64, another C library than
// memtool's own (statically linked), nothing memtool tracks loaded (libc10,
// CUDA), or profiled by memtool run already. `procRoot`: where /proc is (tests).
void checkAttachable(pid_t pid, const std::string& procRoot = "/proc");

// Loads the collector into plan.pid and starts its track. Throws core::Error:
// kExitBadInput for what the process refuses (traced already, attached already),
// kExitRunFailed for what failed on the way (the process ended meanwhile).
void inject(const InjectionPlan& plan);

// Memtool's own C library as process `pid` maps it: a function's address there
// is memtool's own, moved by where the same file starts in each. Throws
// core::Error (kExitBadInput) when `pid` does not map memtool's C library.
class RemoteLibc {
public:
    explicit RemoteLibc(pid_t pid, const std::string& procRoot = "/proc");
    // The C library function `name`'s address in the process.
    uint64_t function(const char* name) const;
    // Whether `address` is code of the process's C library or dynamic loader: a
    // thread stopped there may hold malloc's or the loader's lock, which the
    // collector's dlopen would then wait for forever.
    bool inLockingCode(uint64_t address) const;

private:
    uint64_t own_ = 0, remote_ = 0;  // where the file starts here, and there
    std::vector<std::pair<uint64_t, uint64_t>> lockingCode_;  // [start, end) executable
};

}  // namespace memtool::cli
