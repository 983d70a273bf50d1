#include "cli/run/FileLimit.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace memtool::cli {

namespace {

rlimit gOriginal{};
bool gRaised = false;
constexpr rlim_t kHeadroom = 16;
int gSpare = -1;

}  // namespace

void FileLimit::raise() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
        gOriginal = limit;
        constexpr rlim_t kMost = rlim_t{1} << 20;
        const rlim_t want =
            limit.rlim_max == RLIM_INFINITY || limit.rlim_max > kMost ? kMost : limit.rlim_max;
        if (want > limit.rlim_cur) {
            limit.rlim_cur = want;
            gRaised = setrlimit(RLIMIT_NOFILE, &limit) == 0;
        }
    }
    retakeSpare();
}

void FileLimit::restoreForChild() {
    if (gRaised) setrlimit(RLIMIT_NOFILE, &gOriginal);
}

rlim_t FileLimit::current() {
    rlimit limit{};
    return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}

bool FileLimit::releaseSpare() {
    if (gSpare < 0) return false;
    close(gSpare);
    gSpare = -1;
    return true;
}

void FileLimit::retakeSpare() {
    if (gSpare < 0) gSpare = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int FileLimit::acceptOrShed(int listenFd, bool* shed) {
    *shed = false;
    const int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    // Descriptors are numbered lowest first: one this close to the limit leaves
    // too few for what a connection needs next (reading its peer's /proc entries
    // to check its descent, its send buffer, the object files its stacks name).
    if (fd >= 0 && static_cast<rlim_t>(fd) + kHeadroom >= current()) {
        close(fd);
        *shed = true;
        errno = EMFILE;
        return -1;
    }
    if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || !releaseSpare()) return fd;
    const int err = errno;
    const int taken = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (taken >= 0) close(taken);
    retakeSpare();
    *shed = taken >= 0;
    errno = err;
    return -1;
}

}  // namespace memtool::cli
