#include "cli/ctl/ControlDirectory.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cli/run/FileLimit.h"
#include "core/Error.h"

namespace memtool::cli {

namespace {

// Why a directory (st: its lstat) is not this user's private one; "" when it is.
std::string whyNotPrivate(const struct stat& st) {
    // lstat: a symbolic link someone planted is refused like any other stranger's file.
    if (!S_ISDIR(st.st_mode)) return "it is not a directory";
    if (st.st_uid != geteuid()) return fmt::format("it belongs to uid {}, not to you", st.st_uid);
    if (st.st_mode & 077)
        return fmt::format("others may use it (mode {:04o}; it must be 0700)", st.st_mode & 07777);
    return {};
}

// A directory of this user's, when `path` names one (not a link).
bool ownDirectory(const char* path) {
    struct stat st {};
    return path && path[0] == '/' && lstat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
           st.st_uid == geteuid();
}

// `dir` made (0700) where missing and `create`, then checked: "" when it is private
// (or missing and not to be made), else the line that says why it is refused.
std::string prepare(const std::string& dir, bool create) {
    if (create && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return fmt::format("cannot create the control directory {}: {}", dir, std::strerror(errno));
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT && !create) return {};  // nothing runs yet: an empty directory's worth
        return fmt::format("cannot read the control directory {}: {}", dir, std::strerror(errno));
    }
    const std::string why = whyNotPrivate(st);
    return why.empty() ? why : fmt::format("refusing the control directory {}: {}", dir, why);
}

// Where runs go when /tmp/memtool-UID is taken by someone else: under the
// user's own cache directory ($XDG_CACHE_HOME, else ~/.cache), which no one else
// can create first. "" when there is none of the user's.
std::string cacheFallback(bool create) {
    std::string cache;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); ownDirectory(xdg))
        cache = xdg;
    else if (const char* home = std::getenv("HOME"); ownDirectory(home))
        cache = std::string(home) + "/.cache";
    else
        return {};
    if (create) {
        mkdir(cache.c_str(), 0700);
        mkdir((cache + "/memtool").c_str(), 0700);
    }
    return cache + "/memtool/control";
}

}  // namespace

std::string controlDirectory(bool create, int exitCode) {
    std::string dir;
    if (const char* over = std::getenv("MEMTOOL_CONTROL_DIR"); over && *over)
        dir = over;
    else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); ownDirectory(xdg))
        dir = std::string(xdg) + "/memtool";
    if (!dir.empty()) {
        if (std::string why = prepare(dir, create); !why.empty()) throw core::Error(exitCode, why);
        return dir;
    }
    // /tmp is everyone's: a directory there can be made first by someone else, to
    // stop this user's runs. Then the user's own cache directory serves instead,
    // and each run and ctl says what was wrong.
    const std::string shared = fmt::format("/tmp/memtool-{}", geteuid());
    const std::string why = prepare(shared, create);
    if (why.empty()) return shared;
    const std::string fallback = cacheFallback(create);
    if (fallback.empty())
        throw core::Error(exitCode, why +
                                        "; set MEMTOOL_CONTROL_DIR or XDG_RUNTIME_DIR to a "
                                        "directory of your own");
    if (std::string fallbackWhy = prepare(fallback, create); !fallbackWhy.empty())
        throw core::Error(exitCode, fallbackWhy);
    std::cerr << "memtool: warning: " << why << " (made by someone else?); using " << fallback
              << " instead\n";
    return fallback;
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
