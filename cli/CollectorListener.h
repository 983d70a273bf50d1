#pragma once
// Where collectors meet `memtool run`: a private (0700) directory holding a
// listening Unix socket, named to the target in MEMTOOL_SOCKET, and one
// CollectorConnection per collector that connected, in connection order. Every
// process that loads a tracked allocator connects once (exec'd children too).

#include <memory>
#include <string>
#include <vector>

#include "cli/CollectorConnection.h"

namespace memtool::cli {

class EventLoop;

class CollectorListener {
public:
    CollectorListener();   // throws core::Error (125) when the socket cannot be made
    ~CollectorListener();  // removes the socket and its directory
    CollectorListener(const CollectorListener&) = delete;
    CollectorListener& operator=(const CollectorListener&) = delete;

    const std::string& socketPath() const { return path_; }

    // From now on the loop accepts collectors and reads their streams.
    void attach(EventLoop& loop);

    size_t openStreams() const;
    // A collector still waits in the listen queue (connected, not yet accepted).
    bool connectionWaiting() const;
    const std::vector<std::unique_ptr<CollectorConnection>>& connections() const {
        return connections_;
    }

private:
    void acceptWaiting(EventLoop& loop);

    std::string dir_, path_;
    int fd_ = -1;
    std::vector<std::unique_ptr<CollectorConnection>> connections_;
    std::vector<uint8_t> buffer_ =
        std::vector<uint8_t>(1 << 20);  // one read's worth, shared by all streams
};

}  // namespace memtool::cli
