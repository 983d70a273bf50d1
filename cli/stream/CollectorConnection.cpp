#include "cli/stream/CollectorConnection.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "cli/symbols/BackgroundSymbolizer.h"
#include "core/Tail.h"

namespace memtool::cli {

namespace {

// The pid `pid` has in its own pid namespace, where it runs in one of its own
// (`unshare --pid`): the last field of NSpid in /proc/PID/status; 0 when unknown.
int64_t innermostPid(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("NSpid:", 0) != 0) continue;
        const size_t last = line.find_last_of(" \t");
        return last == std::string::npos ? 0 : std::strtoll(line.c_str() + last + 1, nullptr, 10);
    }
    return 0;
}

}  // namespace

CollectorConnection::CollectorConnection(int fd, pid_t peerPid, const EventsOption& events)
    : fd_(fd),
      recorder_(events.on() ? std::make_unique<EventRecorder>(aggregator_, events) : nullptr),
      decoder_(recorder_ ? static_cast<core::RecordSink&>(*recorder_) : aggregator_),
      peerPid_(peerPid) {}

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
    if (tailFd_ >= 0) ::close(tailFd_);
    tailFd_ = -1;
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    closed_ = std::chrono::steady_clock::now();
    // Requests the process will never answer now.
    const std::set<uint64_t> unanswered = std::move(outstanding_);
    outstanding_.clear();
    for (uint64_t id : unanswered)
        if (onReply_)
            onReply_(core::ReplyRecord{id, core::ReplyStatus::Failed, kEndedBeforeAnswer});
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

void CollectorConnection::drain(ReadBuffer& buffer) {
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        if (!open() || poll(&p, 1, 0) <= 0) return;
        readAvailable(buffer);
    }
}

ssize_t CollectorConnection::receive(ReadBuffer& buffer) {
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t r = recvmsg(fd_, &m, MSG_CMSG_CLOEXEC);
    if (r < 0) return r;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            struct stat st {};
            // One regular file (a memfd), from the stream's first bytes; anything else is closed.
            if (tailFd_ < 0 && received_ == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                tailFd_ = fd;
            else
                ::close(fd);
        }
    }
    received_ += static_cast<uint64_t>(r);
    return r;
}

bool CollectorConnection::unsentTail(std::vector<uint8_t>* bytes, core::EndFields* counts) const {
    if (tailFd_ < 0 || decoder_.sawEnd() || !aggregator_.handshake()) return false;
    core::TailHeader h;
    if (pread(tailFd_, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return false;
    // What it says is the dead process's word: checked against what arrived.
    if (h.magic != core::kTailMagic || h.half > 1) return false;
    const uint64_t used = h.used[h.half];
    if (used > core::kTailBufferBytes || h.bufferStart > received_ ||
        received_ - h.bufferStart > used)
        return false;
    const uint64_t skip = received_ - h.bufferStart;
    bytes->assign(used - skip, 0);
    const uint64_t at = core::kTailHeaderBytes + h.half * core::kTailBufferBytes + skip;
    if (!bytes->empty() && pread(tailFd_, bytes->data(), bytes->size(), static_cast<off_t>(at)) !=
                               static_cast<ssize_t>(bytes->size()))
        return false;
    if (h.deferred == 1) {
        uint8_t record[core::kMaxFixedRecordBytes];
        bytes->insert(bytes->end(), record, core::encodeAlloc(record, h.deferredAlloc));
    }
    *counts = core::EndFields{};
    counts->recordCount = h.records[h.half];
    counts->allocCount = h.allocs;
    counts->freeCount = h.frees;
    counts->missedEvents = h.missed;
    return true;
}

void CollectorConnection::fold(const uint8_t* data, size_t len) {
    try {
        decoder_.feed(data, len);
        if (!peerChecked_ && aggregator_.handshake()) {
            // A process announces its own pid (as its pid namespace numbers it): one
            // that claims another's (a run's target, to answer for it to ctl) is
            // refused, whatever else it sends.
            peerChecked_ = true;
            const core::Handshake& h = *aggregator_.handshake();
            if (!h.notice && peerPid_ > 0 && h.pid != static_cast<int64_t>(peerPid_) &&
                h.pid != innermostPid(peerPid_)) {
                refusal_ = fmt::format(
                    "refused a collector connection from pid {}: its handshake names pid {}",
                    peerPid_, h.pid);
                close();
                return;
            }
        }
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
}

void CollectorConnection::readAvailable(ReadBuffer& buffer) {
    if (!open() || busy_) return;
    struct Busy {
        bool& flag;
        explicit Busy(bool& f) : flag(f) { flag = true; }
        ~Busy() { flag = false; }
    } busy(busy_);
    ssize_t r = receive(buffer);
    if (r > 0) {
        fold(buffer.data(), static_cast<size_t>(r));
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        // A Unix socket's peer that closes with bytes of ours unread (the admission
        // byte, a request) ends our reading with ECONNRESET once everything it sent
        // was read: an end like any.
        if (r < 0 && errno != ECONNRESET)
            error_ = std::string("reading the stream failed: ") + std::strerror(errno);
        // What it recorded and had not sent, if it died first: folded like the
        // rest, and checked against the counts it kept beside it.
        std::vector<uint8_t> tail;
        core::EndFields counts;
        if (unsentTail(&tail, &counts)) {
            const uint64_t before = decoder_.recordCount();
            if (!tail.empty()) fold(tail.data(), tail.size());
            recovered_ = decoder_.recordCount() - before;
            if (open()) aggregator_.onRecoveredCounts(counts);  // the tail decoded whole
        }
        close();
    }
}

}  // namespace memtool::cli
