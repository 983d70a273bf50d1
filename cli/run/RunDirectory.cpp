#include "cli/run/RunDirectory.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "cli/run/ProcStat.h"
#include "core/Error.h"

namespace memtool::cli {

namespace {

constexpr const char* kPrefix = "memtool-run-";

std::string tmpDir() {
    const char* tmp = std::getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

// What run.pid says: "PID START-TICKS PID-NAMESPACE".
struct PidFile {
    pid_t pid = 0;
    uint64_t startTicks = 0;
    std::string pidNamespace;
};

std::string pidFileText() {
    const std::optional<ProcStat> self = readProcStat(getpid());
    return fmt::format("{} {} {}\n", getpid(), self ? self->startTicks : 0, pidNamespace());
}

// run.pid in the directory `dirFd`, when it is a small regular file of ours.
std::optional<PidFile> readPidFile(int dirFd) {
    const int fd = openat(dirFd, RunDirectory::kPidFile,
                          O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    char text[256] = {};
    const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    const ssize_t n = regular ? read(fd, text, sizeof text - 1) : -1;
    close(fd);
    if (n <= 0) return std::nullopt;
    std::istringstream in(std::string(text, static_cast<size_t>(n)));
    PidFile p;
    if (!(in >> p.pid >> p.startTicks >> p.pidNamespace)) return std::nullopt;
    return p;
}

// The run is gone: its pid names no process, or one that started at another time.
bool gone(const PidFile& run) {
    const std::optional<ProcStat> now = readProcStat(run.pid);
    return !now || now->startTicks != run.startTicks;
}

// `name` in `parent` is a run directory of this user's (0700, not a link).
int openRunDirectory(int parentFd, const char* name) {
    const int fd = openat(parentFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700) {
        close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

RunDirectory::RunDirectory() : parent_(tmpDir()) {
    std::string tmpl = parent_ + "/" + kPrefix + "XXXXXX";
    if (!mkdtemp(tmpl.data()))
        throw core::Error(core::kExitRunFailed,
                          "cannot create a directory in " + parent_ + ": " + std::strerror(errno));
    path_ = tmpl;
    const std::string pidPath = path_ + "/" + kPidFile;
    const int fd = open(pidPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const std::string text = pidFileText();
    const bool written =
        fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int err = errno;
    if (fd >= 0) close(fd);
    if (!written) {
        unlink(pidPath.c_str());
        rmdir(path_.c_str());
        throw core::Error(core::kExitRunFailed,
                          "cannot write " + pidPath + ": " + std::strerror(err));
    }
}

RunDirectory::~RunDirectory() {
    unlink(socketPath().c_str());
    unlink((path_ + "/" + kPidFile).c_str());
    rmdir(path_.c_str());
}

size_t RunDirectory::removeDeadRuns(const std::string& parent) {
    // Without /proc no run can be told alive: touch nothing.
    const std::string ns = pidNamespace();
    if (ns.empty() || !readProcStat(getpid())) return 0;
    DIR* d = opendir(parent.c_str());
    if (!d) return 0;
    size_t removed = 0;
    while (const dirent* e = readdir(d)) {
        if (std::strncmp(e->d_name, kPrefix, std::strlen(kPrefix)) != 0) continue;
        const int fd = openRunDirectory(dirfd(d), e->d_name);
        if (fd < 0) continue;
        const std::optional<PidFile> run = readPidFile(fd);
        // A run of another pid namespace (a container sharing /tmp) cannot be told.
        if (run && run->pidNamespace == ns && gone(*run)) {
            unlinkat(fd, kSocketName, 0);
            unlinkat(fd, kPidFile, 0);
            removed += unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0;
        }
        close(fd);
    }
    closedir(d);
    return removed;
}

}  // namespace memtool::cli
