#include "cli/FileLimit.h"

#include <fcntl.h>
#include <unistd.h>

namespace memtool::cli {

namespace {

rlimit gOriginal{};
bool gRaised = false;
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

}  // namespace memtool::cli
