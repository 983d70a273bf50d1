#include "core/Files.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/Error.h"
#include "core/Units.h"

namespace memtool::core {

namespace {

// Why a file of this type is not read; empty for a regular file.
std::string notRegular(mode_t mode) {
    if (S_ISREG(mode)) return {};
    const char* what = S_ISDIR(mode)    ? "a directory"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISCHR(mode)  ? "a character device"
                       : S_ISBLK(mode)  ? "a block device"
                       : S_ISSOCK(mode) ? "a socket"
                                        : "a special file";
    return std::string("it is ") + what + ", not a regular file";
}

// A pipe without a name (pipe(2), what a shell hands over as /dev/fd/N), not a
// FIFO in the file system: it lives on the kernel's pipe file system, the device
// of any pipe's inode. Told before anything is opened.
bool isAnonymousPipe(const struct stat& st) {
    if (!S_ISFIFO(st.st_mode)) return false;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    struct stat own {};
    const bool same = fstat(fds[0], &own) == 0 && own.st_dev == st.st_dev;
    close(fds[0]);
    close(fds[1]);
    return same;
}

std::string tooLarge(uint64_t bytes, uint64_t maxBytes) {
    return "it is larger than " + formatBytes(maxBytes) + " (" + std::to_string(bytes) + " bytes)";
}

// Closes a descriptor on every way out.
class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    // Closes it now; false (errno set) when close reports a failed write.
    bool close() {
        const int fd = fd_;
        fd_ = -1;
        return ::close(fd) == 0;
    }

private:
    int fd_;
};

// A descriptor for reading `path` when it is a regular file (or, with
// `anonymousPipes`, a pipe without a name); -1 with `why` set otherwise.
int openChecked(const std::string& path, std::string* why, bool anonymousPipes) {
    // stat before open: opening a device can do things (a tape rewinds), and
    // opening a FIFO waits for a writer.
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        *why = std::strerror(errno);
        return -1;
    }
    const bool pipe = anonymousPipes && isAnonymousPipe(st);
    if (*why = notRegular(st.st_mode); !why->empty() && !pipe) return -1;
    // O_NONBLOCK: a FIFO (or a name that has become one since) opens at once, and
    // fstat refuses it.
    Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0) {
        *why = std::strerror(errno);
        return -1;
    }
    if (*why = notRegular(st.st_mode); !why->empty()) {
        if (!pipe || !isAnonymousPipe(st)) return -1;
        why->clear();
        // Its writer is the user's command: wait for what it writes.
        fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    }
    return fd.release();
}

}  // namespace

int openRegularFile(const std::string& path, std::string* why) {
    return openChecked(path, why, false);
}

std::optional<std::string> readRegularFile(const std::string& path, uint64_t maxBytes,
                                           std::string* why, bool anonymousPipes) {
    Fd fd(openChecked(path, why, anonymousPipes));
    struct stat st {};
    if (fd.get() < 0) return std::nullopt;
    if (fstat(fd.get(), &st) != 0) {
        *why = std::strerror(errno);
        return std::nullopt;
    }
    // A pipe's size is 0: the read below keeps to the limit.
    if (static_cast<uint64_t>(st.st_size) > maxBytes) {
        *why = tooLarge(static_cast<uint64_t>(st.st_size), maxBytes);
        return std::nullopt;
    }
    std::string text;
    text.reserve(static_cast<size_t>(st.st_size));
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *why = std::strerror(errno);
            return std::nullopt;
        }
        if (n == 0) break;
        // The file may grow while it is read: the limit holds all the same.
        if (text.size() + static_cast<size_t>(n) > maxBytes) {
            *why = tooLarge(text.size() + static_cast<size_t>(n), maxBytes);
            return std::nullopt;
        }
        text.append(buf, static_cast<size_t>(n));
    }
    return text;
}

namespace {

// The temporary replaceFile writes first, beside `path`. mkostemp opens it with
// O_CREAT | O_EXCL under a name no one can guess: nothing that exists (a planted
// symbolic link included) is ever opened. -1 with errno when it cannot be made.
int makeTemporaryBeside(const std::string& path, std::string* tmp) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    *tmp = dir + "." + base + ".XXXXXX";
    return mkostemp(tmp->data(), O_CLOEXEC);
}

}  // namespace

void checkReplaceable(const std::string& path, int exitCode) {
    auto fail = [&](const std::string& why) {
        throw Error(exitCode, "cannot write " + path + ": " + why);
    };
    if (path.empty() || path.back() == '/') fail("not a file name");
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail(notRegular(st.st_mode));
    std::string tmp;
    Fd fd(makeTemporaryBeside(path, &tmp));
    if (fd.get() < 0) fail(std::strerror(errno));
    unlink(tmp.c_str());
}

void replaceFile(const std::string& path, const std::string& text, int exitCode) {
    const std::string_view whole(text);
    replaceFile(path, std::span<const std::string_view>(&whole, 1), exitCode);
}

void replaceFile(const std::string& path, std::span<const std::string_view> pieces, int exitCode) {
    std::string tmp;
    Fd fd(makeTemporaryBeside(path, &tmp));
    auto fail = [&](const std::string& what, int err, bool made) {
        if (made) unlink(tmp.c_str());
        throw Error(exitCode, "cannot write " + what + ": " + std::strerror(err));
    };
    if (fd.get() < 0) fail(path, errno, false);
    // mkostemp makes the file 0600; a trace is as readable as any new file.
    const mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd.get(), 0666 & ~mask) != 0) fail(tmp, errno, true);
    // writev, up to IOV_MAX pieces a call; a short write goes on where it stopped.
    std::vector<iovec> iov;
    iov.reserve(pieces.size());
    for (std::string_view piece : pieces)
        if (!piece.empty()) iov.push_back({const_cast<char*>(piece.data()), piece.size()});
    for (size_t first = 0; first < iov.size();) {
        const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
        const ssize_t n = writev(fd.get(), iov.data() + first, count);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(tmp, errno, true);
        if (n == 0) fail(tmp, EIO, true);  // nothing written of bytes given: never spin
        for (size_t left = static_cast<size_t>(n); left > 0;) {
            iovec& v = iov[first];
            const size_t step = std::min(left, v.iov_len);
            v.iov_base = static_cast<char*>(v.iov_base) + step;
            v.iov_len -= step;
            left -= step;
            if (v.iov_len == 0) ++first;
        }
    }
    if (!fd.close()) fail(tmp, errno, true);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, errno, true);
}

}  // namespace memtool::core
