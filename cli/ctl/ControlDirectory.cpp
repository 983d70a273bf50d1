#include "cli/ctl/ControlDirectory.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli/run/FileLimit.h"
#include "core/Error.h"

namespace memtool::cli {

namespace {

// XDG_RUNTIME_DIR, when set to a directory of this user's.
std::string userRuntimeDir() {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    struct stat st {};
    if (!xdg || xdg[0] != '/' || lstat(xdg, &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid())
        return {};
    return xdg;
}

}  // namespace

std::string controlDirectory(bool create, int exitCode) {
    std::string dir;
    if (const char* over = std::getenv("MEMTOOL_CONTROL_DIR"); over && *over)
        dir = over;
    else if (std::string runtime = userRuntimeDir(); !runtime.empty())
        dir = runtime + "/memtool";
    else
        dir = fmt::format("/tmp/memtool-{}", geteuid());
    if (create && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw core::Error(exitCode, fmt::format("cannot create the control directory {}: {}", dir,
                                                std::strerror(errno)));
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT && !create) return dir;  // nothing runs yet: an empty directory's worth
        throw core::Error(exitCode, fmt::format("cannot read the control directory {}: {}", dir,
                                                std::strerror(errno)));
    }
    // lstat: a symbolic link someone planted is refused like any other stranger's file.
    if (!S_ISDIR(st.st_mode))
        throw core::Error(
            exitCode, fmt::format("refusing the control directory {}: it is not a directory", dir));
    if (st.st_uid != geteuid())
        throw core::Error(
            exitCode,
            fmt::format("refusing the control directory {}: it belongs to uid {}, not to you", dir,
                        st.st_uid));
    if (st.st_mode & 077)
        throw core::Error(
            exitCode,
            fmt::format("refusing the control directory {}: others may use it (mode {:04o}; "
                        "it must be 0700)",
                        dir, st.st_mode & 07777));
    return dir;
}

int acceptPeer(int listenFd) {
    bool shed = false;
    int fd = FileLimit::acceptOrShed(listenFd, &shed);
    if (shed) return kRefusedPeer;  // no descriptor left: closed unheard
    if (fd < 0) return -1;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) {
        close(fd);
        return kRefusedPeer;
    }
    return fd;
}

}  // namespace memtool::cli
