#pragma once
// Where the engine's records go. One sink per stream; the engine calls write()
// under its lock, so a sink need not be thread-safe for writers.

#include <cstddef>
#include <cstdint>

namespace memtool::collectors {

class Sink {
public:
    virtual ~Sink() = default;
    // Sends all of [data, data + len). False when the peer is gone or the channel
    // is no longer ours; the sink has then given up and later writes fail at once.
    virtual bool write(const uint8_t* data, size_t len) = 0;
    // Ends the stream (the peer sees end-of-file).
    virtual void close() = 0;
    // In a fork child: drop this process's reference to the channel without
    // ending it, since the parent still writes into it.
    virtual void abandon() = 0;
    // Why the last write failed, for the one warning the engine prints.
    virtual const char* failure() const = 0;
    // The descriptor of the shared send buffer (core::TailHeader), to go to the
    // reader with the next bytes written, where the channel can carry one.
    virtual void attachTail(int /*fd*/) {}
};

}  // namespace memtool::collectors
