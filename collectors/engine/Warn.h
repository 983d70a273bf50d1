#pragma once
// The collector's one way to speak: a "memtool: " line on stderr, written with
// write(2) (hooks may run where stdio's locks are held, and stdio allocates).

#include <unistd.h>

#include <cstring>

namespace memtool::collectors {

inline void warn(const char* message) {
    const char prefix[] = "memtool: ";
    ssize_t ignored = write(STDERR_FILENO, prefix, sizeof prefix - 1);
    ignored = write(STDERR_FILENO, message, std::strlen(message));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
}

}  // namespace memtool::collectors
