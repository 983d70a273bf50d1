#pragma once
// Where collectors meet `memtool run`: a listening Unix socket in the run's private
// directory (RunDirectory), named to the target in MEMTOOL_SOCKET, and one
// CollectorConnection per collector that connected, in connection order. Every
// process that loads a tracked allocator connects once (exec'd children too).
//
// Only the target and its descendants may join: a connection from another user's
// process, or from one of this user's that does not descend from the target, is
// closed unread (SO_PEERCRED gives the peer's pid and uid; ProcStat.h how descent
// is told). Each refusal is kept, for the trace's warnings.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/run/RunDirectory.h"
#include "cli/stream/CollectorConnection.h"

namespace memtool::cli {

class EventLoop;

class CollectorListener {
public:
    CollectorListener();   // throws core::Error (125) when the socket cannot be made
    ~CollectorListener();  // closes the socket; the RunDirectory removes it
    CollectorListener(const CollectorListener&) = delete;
    CollectorListener& operator=(const CollectorListener&) = delete;

    std::string socketPath() const { return directory_.socketPath(); }
    // Removes the directories that killed runs left beside this one's.
    size_t removeDeadRuns() const { return directory_.removeDeadNeighbours(); }

    // Every stream accepted from now on keeps its events so (memtool run --events).
    void keepEvents(const EventsOption& events) { events_ = events; }

    // From now on the loop accepts the collectors of `target` and its descendants
    // and reads their streams.
    void attach(EventLoop& loop, pid_t target);

    size_t openStreams() const;
    // A collector still waits in the listen queue (connected, not yet accepted).
    bool connectionWaiting() const;
    // Called after every read of a stream (the ctl server's: a request may wait for
    // a stream's handshake).
    void onStreamRead(std::function<void()> f) { streamRead_ = std::move(f); }
    const std::vector<std::unique_ptr<CollectorConnection>>& connections() const {
        return connections_;
    }
    // One line per connection refused, saying whose and why.
    const std::vector<std::string>& refusals() const { return refusals_; }
    // Connections whose streams have ended, and the refusals, are forgotten: the
    // next trace of a companion serving block after block starts without them.
    void forgetEnded();
    // The run's object files are let go of, by every stream's symbolizer and by
    // the store (once the trace's frames are named).
    void closeObjectFiles();

private:
    void acceptWaiting(EventLoop& loop);
    // Why the peer of `fd` may not join; empty when it may.
    // Why the connection on `fd` is refused (empty: it is not); its peer's pid.
    std::string refusal(int fd, pid_t* peerPid) const;
    // The stream a continuing stream continues (its handshake names it), with every
    // record it sent so far read; null when there is none.
    const core::Aggregator* continued(const core::Handshake& h, const CollectorConnection* asking);
    // Reads what has arrived on `c` now, outside the loop's turn.
    void drain(CollectorConnection& c);

    RunDirectory directory_;  // first made, last removed
    int fd_ = -1;
    EventLoop* loop_ = nullptr;
    pid_t target_ = 0;
    std::vector<std::unique_ptr<CollectorConnection>> connections_;
    std::vector<std::string> refusals_;
    std::function<void()> streamRead_;
    EventsOption events_;
    ReadBuffer buffer_{1 << 20};       // one read's worth, shared by all streams
    ReadBuffer drainBuffer_{1 << 16};  // for reads made while buffer_ is being folded
};

}  // namespace memtool::cli
