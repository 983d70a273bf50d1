#include "cli/CollectorConnection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/BackgroundSymbolizer.h"

namespace memtool::cli {

CollectorConnection::CollectorConnection(int fd) : fd_(fd) {}

CollectorConnection::~CollectorConnection() {
    if (inBackground()) BackgroundSymbolizer::shared().reclaim(&symbolizer_);
    close();
}

void CollectorConnection::forwardNewFrames() {
    BackgroundSymbolizer& worker = BackgroundSymbolizer::shared();
    const auto& modules = aggregator_.modules();
    for (; modulesSeen_ < modules.size(); ++modulesSeen_)
        worker.addModule(&symbolizer_, modules[modulesSeen_]);
    const auto& nodes = aggregator_.nativeNodes();
    const bool python = aggregator_.handshake() && aggregator_.handshake()->pythonStacks;
    worker.addNodes(&symbolizer_, nodesForwarded_, std::span(nodes).subspan(nodesForwarded_),
                    python);
    nodesForwarded_ = nodes.size();
}

void CollectorConnection::close() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    closed_ = std::chrono::steady_clock::now();
    // Requests the process will never answer now.
    const std::set<uint64_t> unanswered = std::move(outstanding_);
    outstanding_.clear();
    for (uint64_t id : unanswered)
        if (onReply_)
            onReply_(
                core::ReplyRecord{id, core::ReplyStatus::Failed,
                                  R"({"error":"the process's stream ended before it answered"})"});
}

bool CollectorConnection::sendRequest(uint64_t id, const std::vector<std::string>& argv) {
    if (!open()) return false;
    size_t bytes = 0;
    for (const auto& a : argv) bytes += a.size();
    std::vector<uint8_t> record(core::requestBytes(argv.size(), bytes));
    uint8_t* p = core::encodeRequestHead(record.data(), id, argv.size());
    for (const auto& a : argv) p = core::putString(p, a.data(), a.size());
    // A request is small and the collector's control thread reads at once: the
    // socket takes it whole; a full buffer gets a second's patience.
    const uint8_t* at = record.data();
    for (int waited = 0; at < p;) {
        ssize_t n = send(fd_, at, static_cast<size_t>(p - at), MSG_NOSIGNAL);
        if (n > 0) {
            at += n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR) && waited++ < 100) {
            pollfd w{fd_, POLLOUT, 0};
            poll(&w, 1, 10);
        } else {
            return false;
        }
    }
    outstanding_.insert(id);
    return true;
}

void CollectorConnection::deliverReplies() {
    const auto& replies = aggregator_.replies();
    for (; repliesSeen_ < replies.size(); ++repliesSeen_) {
        outstanding_.erase(replies[repliesSeen_].id);
        if (onReply_) onReply_(replies[repliesSeen_]);
    }
}

double CollectorConnection::connectedS() const {
    return std::chrono::duration<double>((open() ? std::chrono::steady_clock::now() : closed_) -
                                         opened_)
        .count();
}

ElfSymbolizer& CollectorConnection::symbolizer() {
    // The modules it had are added by now, the rest below.
    if (inBackground()) BackgroundSymbolizer::shared().reclaim(&symbolizer_);
    backgroundDone_ = true;
    const auto& modules = aggregator_.modules();
    for (; modulesSeen_ < modules.size(); ++modulesSeen_)
        symbolizer_.addModule(modules[modulesSeen_]);
    return symbolizer_;
}

void CollectorConnection::drain(std::vector<uint8_t>& buffer) {
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        if (!open() || poll(&p, 1, 0) <= 0) return;
        readAvailable(buffer);
    }
}

void CollectorConnection::readAvailable(std::vector<uint8_t>& buffer) {
    if (!open() || busy_) return;
    struct Busy {
        bool& flag;
        explicit Busy(bool& f) : flag(f) { flag = true; }
        ~Busy() { flag = false; }
    } busy(busy_);
    ssize_t r = read(fd_, buffer.data(), buffer.size());
    if (r > 0) {
        try {
            decoder_.feed(buffer.data(), static_cast<size_t>(r));
            deliverReplies();
            if (!backgroundDone_ && aggregator_.nativeNodes().size() > nodesForwarded_)
                forwardNewFrames();
        } catch (const core::ProtocolError& e) {
            deliverReplies();  // those that arrived whole before the bad bytes
            error_ = std::string("the stream broke: ") + e.what();
            close();
        } catch (const std::exception& e) {
            // A fault of memtool's own in folding this stream (or memory running
            // out): this process's stream ends here; the run and the other streams go on.
            deliverReplies();
            error_ = std::string("the stream broke: internal error: ") + e.what();
            close();
        }
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        // A Unix socket's peer that closes with bytes of ours unread (the admission
        // byte, a request) ends our reading with ECONNRESET once everything it sent
        // was read: an end like any.
        if (r < 0 && errno != ECONNRESET)
            error_ = std::string("reading the stream failed: ") + std::strerror(errno);
        close();
    }
}

}  // namespace memtool::cli
