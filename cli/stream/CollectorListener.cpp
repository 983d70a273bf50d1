#include "cli/stream/CollectorListener.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/run/EventLoop.h"
#include "cli/run/FileLimit.h"
#include "cli/run/ProcStat.h"
#include "cli/symbols/ObjectFiles.h"
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
    loop_ = &loop;
    loop.watch(fd_, [this, &loop] { acceptWaiting(loop); });
}

std::string CollectorListener::refusal(int fd, pid_t* peerPid) const {
    ucred peer{};
    socklen_t len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0)
        return fmt::format("a connection whose peer cannot be told ({})", std::strerror(errno));
    *peerPid = peer.pid;
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

void CollectorListener::forgetEnded() {
    std::erase_if(connections_,
                  [](const std::unique_ptr<CollectorConnection>& c) { return !c->open(); });
    refusals_.clear();
}

void CollectorListener::closeObjectFiles() {
    for (const auto& c : connections_) c->symbolizer().closeFiles();
    ObjectFiles::shared().closeAll();
}

void CollectorListener::acceptWaiting(EventLoop& loop) {
    for (;;) {
        bool shed = false;
        int fd = FileLimit::acceptOrShed(fd_, &shed);
        if (shed) {  // no descriptor left for it: its process runs on, unprofiled
            refusals_.push_back(fmt::format(
                "refused a collector connection: memtool run has no descriptor left ({}; its "
                "limit is {})",
                std::strerror(errno), FileLimit::current()));
            continue;
        }
        if (fd < 0) return;
        pid_t peer = 0;
        if (std::string why = refusal(fd, &peer); !why.empty()) {
            refusals_.push_back("refused a collector connection from " + why);
            close(fd);
            continue;
        }
        // The collector waits for this byte before it records anything, so that a
        // process cannot exit (and be reaped) before its descent was checked.
        const char admitted = static_cast<char>(core::RecordTag::Admitted);
        if (send(fd, &admitted, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
            refusals_.push_back(
                fmt::format("a collector connection that closed before it was admitted ({})",
                            std::strerror(errno)));
            close(fd);
            continue;
        }
        connections_.push_back(std::make_unique<CollectorConnection>(fd, peer, events_));
        CollectorConnection* c = connections_.back().get();
        c->setStreamLookup([this, c](const core::Handshake& h) { return continued(h, c); });
        loop.watch(fd, [this, c, fd, &loop] {
            c->readAvailable(buffer_);
            if (!c->open()) loop.unwatch(fd);
            if (streamRead_) streamRead_();
        });
    }
}

const core::Aggregator* CollectorListener::continued(const core::Handshake& h,
                                                     const CollectorConnection* asking) {
    // The stream continued connected first (so it was accepted first), and what it
    // sent before the fork was in its socket before the child existed: reading what
    // has arrived on it gives every record the child's ids may name. Streams whose
    // handshake is still unread are read first: it may be among them.
    for (const auto& c : connections_)
        if (c.get() != asking && !c->aggregator().handshake()) drain(*c);
    for (auto it = connections_.rbegin(); it != connections_.rend(); ++it) {
        CollectorConnection& c = **it;
        const auto& from = c.aggregator().handshake();
        if (&c == asking || !from || from->notice ||
            from->pid != static_cast<int64_t>(h.continues->pid) ||
            from->startUnixNs != h.continues->startUnixNs)
            continue;
        drain(c);
        return &c.aggregator();
    }
    return nullptr;
}

void CollectorListener::drain(CollectorConnection& c) {
    if (!c.open() || c.busy()) return;
    const int fd = c.fd();
    c.drain(drainBuffer_);
    if (!c.open() && loop_) loop_->unwatch(fd);
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
