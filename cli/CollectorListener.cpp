#include "cli/CollectorListener.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/EventLoop.h"
#include "cli/ProcStat.h"
#include "core/Error.h"

namespace memtool::cli {

CollectorListener::CollectorListener() {
    const std::string path = socketPath();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    // On a throw the destructor does not run, but directory_'s does.
    if (path.size() >= sizeof addr.sun_path)
        throw core::Error(core::kExitRunFailed,
                          fmt::format("the collector socket's path {} is too long ({} bytes, at "
                                      "most {}): set TMPDIR to a shorter directory",
                                      path, path.size(), sizeof addr.sun_path - 1));
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(fd_, 128) != 0) {
        const std::string why = std::strerror(errno);
        if (fd_ >= 0) close(fd_);
        throw core::Error(core::kExitRunFailed, "cannot listen on " + path + ": " + why);
    }
}

CollectorListener::~CollectorListener() {
    if (fd_ >= 0) close(fd_);
}

void CollectorListener::attach(EventLoop& loop, pid_t target) {
    target_ = target;
    loop.watch(fd_, [this, &loop] { acceptWaiting(loop); });
}

std::string CollectorListener::refusal(int fd) const {
    ucred peer{};
    socklen_t len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0)
        return fmt::format("a connection whose peer cannot be told ({})", std::strerror(errno));
    if (peer.uid != geteuid())
        return fmt::format("pid {}, which runs as uid {}", peer.pid, peer.uid);
    // The chain is read now, while the peer is (normally) alive: one that connected
    // and exited before it was accepted cannot be told from a stranger.
    if (!descendsFrom(peer.pid, target_, getpid()))
        return readProcStat(peer.pid)
                   ? fmt::format("pid {}, which does not descend from the program", peer.pid)
                   : fmt::format("pid {}, which exited before its descent could be checked",
                                 peer.pid);
    return {};
}

void CollectorListener::acceptWaiting(EventLoop& loop) {
    for (;;) {
        int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        if (std::string why = refusal(fd); !why.empty()) {
            refusals_.push_back("refused a collector connection from " + why);
            close(fd);
            continue;
        }
        connections_.push_back(std::make_unique<CollectorConnection>(fd));
        CollectorConnection* c = connections_.back().get();
        loop.watch(fd, [this, c, fd, &loop] {
            c->readAvailable(buffer_);
            if (!c->open()) loop.unwatch(fd);
        });
    }
}

size_t CollectorListener::openStreams() const {
    size_t open = 0;
    for (const auto& c : connections_) open += c->open();
    return open;
}

bool CollectorListener::connectionWaiting() const {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

}  // namespace memtool::cli
