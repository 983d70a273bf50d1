#pragma once
// memtool run holds descriptors for every process of the run: its socket, its
// shared send buffer, and the object files its stacks are named from. A run of
// hundreds of processes (a fork pool, a launcher's ranks and their workers)
// would pass a soft limit of 1,024, and the run would be lost at the end, with
// no descriptor left to write the trace. So the CLI raises its own soft limit to
// the hard one, and the program gets the limit memtool started with; a spare
// descriptor is kept for the moment one runs out (refusing a connection rather
// than spinning on it; writing the trace).

#include <sys/resource.h>

namespace memtool::cli {

class FileLimit {
public:
    // Raises this process's soft RLIMIT_NOFILE to its hard limit (at most 2^20),
    // remembering the original, and opens the spare descriptor. Call once, early.
    static void raise();
    // The limit memtool started with, for the program: async-signal-safe (a fork
    // child calls it before exec).
    static void restoreForChild();
    // The soft limit in force now.
    static rlim_t current();
    // Frees the spare descriptor, so that the next open or accept can succeed;
    // false when there is none to free.
    static bool releaseSpare();
    // Takes the spare descriptor again, if it was released (and one is free).
    static void retakeSpare();
    // accept4(listenFd, SOCK_CLOEXEC | SOCK_NONBLOCK). With no descriptor left, or
    // fewer than 16 besides the one accepted, the waiting connection is closed at
    // once (taken with the spare when need be; *shed true, and -1 with errno EMFILE
    // or ENFILE), rather than left to make the listening socket readable again and
    // again. -1 with errno as accept4 left it otherwise.
    static int acceptOrShed(int listenFd, bool* shed);
};

}  // namespace memtool::cli
