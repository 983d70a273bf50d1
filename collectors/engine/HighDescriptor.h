#pragma once
// Descriptors the collector keeps open in the program (its socket, its shared
// send buffer) live high in the descriptor table.

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace memtool::collectors {

// `fd` moved to a number high in the descriptor table (three quarters up to the
// soft limit, at most 767), closing the original: a program that closes the
// descriptors it thinks are its own usually closes a low range, and new
// descriptors take the lowest free number, so a collision with a program's own
// gets unlikely. Kept below 1024 (select()'s FD_SETSIZE matters to nobody here,
// but a huge number would grow the kernel's descriptor table of every profiled
// process). The same descriptor when it cannot be moved.
inline int moveHigh(int fd) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < 64) return fd;
    const rlim_t want = limit.rlim_cur / 4 * 3;
    const int floor = static_cast<int>(want < 767 ? want : 767);
    if (fd >= floor) return fd;
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (high < 0) return fd;
    ::close(fd);
    return high;
}

}  // namespace memtool::collectors
