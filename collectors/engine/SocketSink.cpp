#include "collectors/engine/SocketSink.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "collectors/engine/HighDescriptor.h"
#include "collectors/engine/OwnDescriptors.h"
#include "core/Protocol.h"
#include "core/Tail.h"

namespace memtool::collectors {

SocketSink::~SocketSink() { close(); }

bool SocketSink::connect(const char* path, const char** why) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const size_t len = std::strlen(path);
    if (len >= sizeof addr.sun_path) {
        *why = "socket path too long; this process is not profiled";
        return false;
    }
    std::memcpy(addr.sun_path, path, len + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = "cannot create a socket; this process is not profiled";
        return false;
    }
    int rc;
    do {
        rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        ::close(fd);
        *why = "cannot reach `memtool run` (socket gone); this process is not profiled";
        return false;
    }
    adopt(moveHigh(fd));
    return true;
}

bool SocketSink::awaitAdmission(int timeoutMs, const char** why) {
    const int fd = fd_.load();
    pollfd p{fd, POLLIN, 0};
    int ready;
    do {
        ready = poll(&p, 1, timeoutMs);
    } while (ready < 0 && errno == EINTR);
    char byte = 0;
    ssize_t n = 0;
    if (ready > 0) {
        do {
            n = ::recv(fd, &byte, 1, 0);
        } while (n < 0 && errno == EINTR);
    }
    if (n == 1 && byte == static_cast<char>(core::RecordTag::Admitted)) return true;
    *why = ready == 0 ? "`memtool run` did not admit this process in time; it is not profiled"
                      : "`memtool run` refused this process (see the trace's warnings)";
    close();
    return false;
}

void SocketSink::adopt(int fd) {
    // Room in the kernel for two of the writer's buffers: at the default (208 KiB)
    // every full buffer (256 KiB) made the program sleep until memtool run had read
    // part of it, a context switch per send (15 in a run of small_tensors). Asked
    // for, not required: the kernel caps it at net.core.wmem_max.
    const int sendBytes = static_cast<int>(2 * core::kTailBufferBytes);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sendBytes, sizeof sendBytes);
    struct stat st {};
    if (fstat(fd, &st) == 0) {
        device_ = st.st_dev;
        inode_ = st.st_ino;
    }
    failure_ = "";
    own::keep(fd);
    fd_.store(fd);
    closed_.store(false);
}

bool SocketSink::stillOurs(bool* gone) const {
    struct stat st {};
    const bool open = fstat(fd_.load(), &st) == 0;
    if (gone) *gone = !open && errno == EBADF;
    return open && S_ISSOCK(st.st_mode) && st.st_dev == device_ && st.st_ino == inode_;
}

bool SocketSink::write(const uint8_t* data, size_t len) {
    if (closed_.load()) return false;
    // One fstat per write: writes are whole buffers (up to 256 KiB) or the timer's
    // flush, so this costs nothing measurable and keeps records out of a channel
    // the program took over.
    bool gone = false;
    if (!stillOurs(&gone)) {
        failure_ = gone ? "the program closed memtool's socket; profiling stopped (the trace is "
                          "incomplete)"
                        : "the program closed memtool's socket and reused its descriptor; "
                          "profiling stopped (the trace is incomplete)";
        // Not ours any more: never shut down or close what the number now names.
        own::letGo(fd_.exchange(-1));
        closed_.store(true);
        if (takenOver_) takenOver_(failure_);
        return false;
    }
    const int fd = fd_.load();
    size_t sent = 0;
    while (sent < len) {
        ssize_t n;
        if (tailFd_ >= 0) {
            // The shared buffer's descriptor rides with these bytes.
            iovec iov{const_cast<uint8_t*>(data + sent), len - sent};
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
            msghdr m{};
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            m.msg_control = control;
            m.msg_controllen = sizeof control;
            cmsghdr* c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            std::memcpy(CMSG_DATA(c), &tailFd_, sizeof(int));
            n = ::sendmsg(fd, &m, MSG_NOSIGNAL);
            if (n > 0) tailFd_ = -1;
        } else {
            n = ::send(fd, data + sent, len - sent, MSG_NOSIGNAL);
        }
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            failure_ = "lost the connection to `memtool run`; profiling stopped";
            close();
            return false;
        }
        sent += static_cast<size_t>(n);
    }
    return true;
}

void SocketSink::close() {
    if (closed_.exchange(true)) return;
    const int fd = fd_.load();
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);  // wakes a blocked reader with end-of-file
    if (readers_.load() == 0) releaseDescriptor();
}

void SocketSink::abandon() {
    closed_.store(true);
    readers_.store(0);  // a fork child: the parent's reading thread is not in it
    // shutdown() would end the parent's connection too: the descriptor is shared.
    releaseDescriptor();
}

int SocketSink::acquire() {
    readers_.fetch_add(1);
    if (closed_.load()) {
        release();
        return -1;
    }
    return fd_.load();
}

void SocketSink::release() {
    if (readers_.fetch_sub(1) == 1 && closed_.load()) releaseDescriptor();
}

void SocketSink::releaseDescriptor() { own::release(fd_.exchange(-1)); }

}  // namespace memtool::collectors
