#pragma once
// This process's resident memory now, from /proc/self/statm, read with read(2)
// (no stdio on memtool's own threads); 0 when it cannot be read. What a yield's
// answer reports, and what a gc gave back.

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace memtool::collectors::control {

inline uint64_t residentBytes() {
    const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[128];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char* resident = std::strchr(buf, ' ');
    return resident ? std::strtoull(resident + 1, nullptr, 10) *
                          static_cast<uint64_t>(sysconf(_SC_PAGESIZE))
                    : 0;
}

}  // namespace memtool::collectors::control
