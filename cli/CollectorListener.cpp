#include "cli/CollectorListener.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli/EventLoop.h"
#include "core/Error.h"

namespace memtool::cli {

CollectorListener::CollectorListener() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/memtool-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
        throw core::Error(core::kExitRunFailed,
                          "cannot create a directory in " + tmpl + ": " + std::strerror(errno));
    dir_ = buf.data();
    path_ = dir_ + "/collector.sock";
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    // The destructor does not run for a constructor that throws: clean up here.
    auto fail = [&](const std::string& message) {
        if (fd_ >= 0) close(fd_);
        unlink(path_.c_str());
        rmdir(dir_.c_str());
        throw core::Error(core::kExitRunFailed, message);
    };
    if (fd_ < 0 || path_.size() >= sizeof addr.sun_path)
        fail("cannot create the collector socket " + path_);
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 128) != 0)
        fail("cannot listen on " + path_ + ": " + std::strerror(errno));
}

CollectorListener::~CollectorListener() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
}

void CollectorListener::attach(EventLoop& loop) {
    loop.watch(fd_, [this, &loop] { acceptWaiting(loop); });
}

void CollectorListener::acceptWaiting(EventLoop& loop) {
    for (;;) {
        int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
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
