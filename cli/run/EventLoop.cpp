#include "cli/run/EventLoop.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/Error.h"

namespace memtool::cli {

void EventLoop::watch(int fd, Handler onReady) {
    watches_.push_back(Watch{fd, nextSerial_++, std::move(onReady)});
}

void EventLoop::unwatch(int fd) {
    watches_.erase(std::remove_if(watches_.begin(), watches_.end(),
                                  [fd](const Watch& w) { return w.fd == fd; }),
                   watches_.end());
}

bool EventLoop::waitOnce(int timeoutMs) {
    std::vector<pollfd> fds;
    std::vector<uint64_t> serials;
    for (const Watch& w : watches_) {
        fds.push_back({w.fd, POLLIN, 0});
        serials.push_back(w.serial);
    }
    int n = poll(fds.data(), fds.size(), timeoutMs);
    if (n < 0 && errno != EINTR)
        throw core::Error(core::kExitRunFailed, std::string("poll: ") + std::strerror(errno));
    if (n <= 0) {
        if (afterWait_) afterWait_();
        return false;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        // Looked up again: an earlier handler may have unwatched it. The handler is
        // copied because it may unwatch itself.
        auto w = std::find_if(watches_.begin(), watches_.end(),
                              [&](const Watch& x) { return x.serial == serials[i]; });
        if (w == watches_.end()) continue;
        Handler onReady = w->onReady;
        onReady();
    }
    if (afterWait_) afterWait_();
    return true;
}

}  // namespace memtool::cli
