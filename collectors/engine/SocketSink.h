#pragma once
// A stream socket to `memtool run`. The sink owns its descriptor's lifetime:
// close() shuts the connection down (a thread blocked reading it wakes up with
// end-of-file) but releases the descriptor only once no reader holds it, so a
// reader can never find its descriptor number closed and reused under it.
//
// It also notices when the descriptor stops being its socket: a program that
// closes descriptors it does not own (and opens one of its own that gets the
// same number) would otherwise receive memtool's records in its own data.

#include <sys/types.h>

#include <atomic>

#include "collectors/engine/Sink.h"

namespace memtool::collectors {

class SocketSink final : public Sink {
public:
    SocketSink() = default;
    ~SocketSink() override;
    SocketSink(const SocketSink&) = delete;
    SocketSink& operator=(const SocketSink&) = delete;

    // Connects to the listening Unix socket at `path`. False, with the reason in
    // *why, when it cannot. The descriptor is moved to a high number, out of the
    // way of a program that closes and reuses low ones.
    bool connect(const char* path, const char** why);
    // Waits (at most `timeoutMs`) for `memtool run` to admit this connection (its
    // one byte, core::RecordTag::Admitted): until then the CLI may not have checked
    // that this process descends from the program, and a process that exited
    // before that would be refused. False, with the reason in *why, when it
    // refused or did not answer; the sink is then closed.
    bool awaitAdmission(int timeoutMs, const char** why);
    // Takes a connected descriptor (tests: one end of a socketpair).
    void adopt(int fd);

    bool write(const uint8_t* data, size_t len) override;
    void close() override;
    void abandon() override;
    const char* failure() const override { return failure_; }
    void attachTail(int fd) override { tailFd_ = fd; }

    // For a thread that reads from the same socket: the descriptor, held open
    // until release(); -1 once the sink is closed.
    int acquire();
    void release();
    // The descriptor still names the socket this sink connected (the program did
    // not close it and get the number back for something of its own). *gone: not
    // ours because nothing is open at that number.
    bool stillOurs(bool* gone = nullptr) const;
    // Called once, under the writer's lock, when the sink finds its descriptor
    // taken over: the collector tells `memtool run` why the stream stops.
    void onTakenOver(void (*handler)(const char* why)) { takenOver_ = handler; }

private:
    void releaseDescriptor();

    std::atomic<int> fd_{-1};
    int tailFd_ = -1;  // to send with the next bytes (SCM_RIGHTS), then forgotten
    std::atomic<int> readers_{0};
    std::atomic<bool> closed_{true};
    dev_t device_ = 0;  // the socket's identity, to tell it from a reused number
    ino_t inode_ = 0;
    const char* failure_ = "";
    void (*takenOver_)(const char* why) = nullptr;
};

}  // namespace memtool::collectors
