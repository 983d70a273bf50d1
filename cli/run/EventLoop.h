#pragma once
// The one thread of `memtool run` waits here: poll(2) over the descriptors that
// something listens on (the signalfd, the collectors' socket, each collector's
// stream, the control socket `memtool ctl` connects to, the live view's keys),
// each with its handler. The live view redraws between waits (waitOnce with a
// timeout).

#include <cstdint>
#include <functional>
#include <vector>

namespace memtool::cli {

class EventLoop {
public:
    using Handler = std::function<void()>;

    // From now on `onReady` runs whenever `fd` is readable, hung up or in error.
    void watch(int fd, Handler onReady);
    // Before the descriptor is closed: a closed one would wake every wait.
    void unwatch(int fd);

    // Waits up to `timeoutMs` (-1: until a descriptor is ready; EINTR returns
    // early) and runs the handlers of the ready ones, in the order they were
    // watched. Handlers may watch and unwatch. Throws core::Error (125) when poll fails.
    // Returns whether any descriptor was ready.
    bool waitOnce(int timeoutMs);
    // Runs after every wait, ready descriptors or not (memtool attach's session
    // looks at the streams there).
    void afterEachWait(Handler f) { afterWait_ = std::move(f); }

private:
    Handler afterWait_;
    struct Watch {
        int fd;
        uint64_t serial;  // tells a watch apart from a later one on the same descriptor number
        Handler onReady;
    };
    std::vector<Watch> watches_;
    uint64_t nextSerial_ = 0;
};

}  // namespace memtool::cli
