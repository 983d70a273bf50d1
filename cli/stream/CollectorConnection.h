#pragma once
// One collector's stream, folded as it arrives: bytes -> StreamDecoder ->
// Aggregator. Nothing else happens on this path, so the CLI drains the socket
// as fast as the collector fills it and the target never waits on a full buffer.
// Native frames are symbolized each distinct address once (ElfSymbolizer), on
// BackgroundSymbolizer's thread as they arrive, until something asks for this
// stream's symbols (the trace, a ctl command, the live view), which then takes
// the symbolizer back and names the rest itself.
//
// The socket is a stream socket and so two-way: the control plane (`memtool ctl`
// commands forwarded to one process's collector) would write its commands here,
// and the replies would arrive among the records.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/stream/EventRecorder.h"
#include "cli/symbols/ElfSymbolizer.h"
#include "core/Aggregator.h"
#include "core/StreamDecoder.h"

namespace memtool::cli {

// Room for one read. Its bytes are left as the allocator gives them (a large one
// fresh pages, not yet mapped): a run whose streams send little touches little
// of it, where a zero-filled megabyte cost every run 256 page faults before its
// target started.
class ReadBuffer {
public:
    explicit ReadBuffer(size_t size) : bytes_(new uint8_t[size]), size_(size) {}
    uint8_t* data() { return bytes_.get(); }
    size_t size() const { return size_; }

private:
    std::unique_ptr<uint8_t[]> bytes_;
    size_t size_;
};

class CollectorConnection {
public:
    // Takes the accepted socket; `peerPid`: the process that connected (SO_PEERCRED),
    // which its handshake must name (0: not checked). With `events` on, its
    // events are kept as they are folded (EventRecorder).
    explicit CollectorConnection(int fd, pid_t peerPid = 0, const EventsOption& events = {});
    ~CollectorConnection();
    CollectorConnection(const CollectorConnection&) = delete;
    CollectorConnection& operator=(const CollectorConnection&) = delete;

    int fd() const { return fd_; }
    bool open() const { return fd_ >= 0; }

    // Reads what has arrived (one read into `buffer`) and folds it. The connection
    // closes at the end of the stream, on a read error or on bytes that can never
    // be a stream; error() says which of the last two.
    void readAvailable(ReadBuffer& buffer);
    // Reads and folds everything that has arrived by now (without waiting): what
    // the process wrote before it asked memtool run a question is then counted.
    void drain(ReadBuffer& buffer);

    // Sends a request down the stream; its reply comes to the reply handler. A
    // stream that ends first answers every outstanding request with a Failed reply
    // whose body says so. False when the stream is closed or the write failed.
    bool sendRequest(uint64_t id, const std::vector<std::string>& argv);
    static constexpr const char* kEndedBeforeAnswer =
        R"({"error":"the process's stream ended before it answered"})";
    using ReplyHandler = std::function<void(const core::ReplyRecord&)>;
    void onReply(ReplyHandler handler) { onReply_ = std::move(handler); }

    const core::Aggregator& aggregator() const { return aggregator_; }
    // Its event log (--events), or null.
    EventRecorder* events() { return recorder_.get(); }
    // Its handshake arrived and it is a process's stream (not a notice about one).
    // A stream whose handshake named another process than the one that connected
    // is refused (refusal() says so), and no process's.
    bool isStream() const {
        return aggregator_.handshake() && !aggregator_.handshake()->notice && refusal_.empty();
    }
    const std::string& refusal() const { return refusal_; }
    // Finds the stream a continuing stream (a fork child's) continues (Aggregator.h).
    void setStreamLookup(core::Aggregator::StreamLookup lookup) {
        aggregator_.setStreamLookup(std::move(lookup));
    }
    // Inside readAvailable(): its bytes are being folded, so it must not be read again
    // (a lookup made while folding another stream's handshake skips it).
    bool busy() const { return busy_; }
    // Knows every module received so far; from the first call on, it is this
    // thread's alone (no more background work for this stream).
    ElfSymbolizer& symbolizer();
    // Why the stream broke; empty when it ended (or runs) normally.
    const std::string& error() const { return error_; }
    // From accept to close, or to now while open.
    double connectedS() const;
    // Records read back from the process's send buffer after it died without its
    // End record (core::TailHeader): what it had not sent yet.
    uint64_t recoveredRecords() const { return recovered_; }

private:
    void deliverReplies();
    void close();
    // One read of the socket; a descriptor that comes with it (the first one: the
    // collector's shared send buffer) is kept, any other closed.
    ssize_t receive(ReadBuffer& buffer);
    // At the end of a stream without its End record: the bytes of whole records
    // the process had buffered and not sent, from its shared buffer (input like
    // any other: they go through fold()), and the counts it kept beside them.
    // False when there is no buffer to read, or it does not fit the stream.
    bool unsentTail(std::vector<uint8_t>* bytes, core::EndFields* counts) const;
    // Decodes and folds stream bytes; on bytes that can never be a stream, or a
    // fault of memtool's own, says why in error() and closes.
    void fold(const uint8_t* data, size_t len);
    // Hands the modules and frames that arrived since last time to the worker.
    void forwardNewFrames();
    // The worker may be using symbolizer_: it was given frames, and not taken back.
    bool inBackground() const { return nodesForwarded_ > 1 && !backgroundDone_; }

    int fd_;
    core::Aggregator aggregator_;
    std::unique_ptr<EventRecorder> recorder_;  // before decoder_, which passes records to it
    core::StreamDecoder decoder_;
    ElfSymbolizer symbolizer_;
    size_t modulesSeen_ = 0;       // added to symbolizer_, or queued for the worker
    size_t nodesForwarded_ = 1;    // native node 0 is the empty stack
    bool backgroundDone_ = false;  // symbolizer() was called: no more background work
    std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point closed_;
    std::string error_;
    bool busy_ = false;
    pid_t peerPid_ = 0;
    bool peerChecked_ = false;
    std::string refusal_;
    ReplyHandler onReply_;
    size_t repliesSeen_ = 0;
    std::set<uint64_t> outstanding_;
    int tailFd_ = -1;
    uint64_t received_ = 0;  // stream bytes read
    uint64_t recovered_ = 0;
};

}  // namespace memtool::cli
