#include "cli/CollectorConnection.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace memtool::cli {

CollectorConnection::CollectorConnection(int fd) : fd_(fd) {}

CollectorConnection::~CollectorConnection() { close(); }

void CollectorConnection::close() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    closed_ = std::chrono::steady_clock::now();
}

double CollectorConnection::connectedS() const {
    return std::chrono::duration<double>((open() ? std::chrono::steady_clock::now() : closed_) -
                                         opened_)
        .count();
}

void CollectorConnection::symbolizeNew() {
    const auto& modules = aggregator_.modules();
    for (; modulesSeen_ < modules.size(); ++modulesSeen_)
        symbolizer_.addModule(modules[modulesSeen_]);
    const auto& nodes = aggregator_.nativeNodes();
    for (; nodesSeen_ < nodes.size(); ++nodesSeen_) symbolizer_.symbolize(nodes[nodesSeen_].ip);
}

ElfSymbolizer& CollectorConnection::symbolizer() {
    symbolizeNew();
    return symbolizer_;
}

void CollectorConnection::readAvailable(std::vector<uint8_t>& buffer) {
    if (!open()) return;
    ssize_t r = read(fd_, buffer.data(), buffer.size());
    if (r > 0) {
        try {
            decoder_.feed(buffer.data(), static_cast<size_t>(r));
            symbolizeNew();
        } catch (const core::ProtocolError& e) {
            error_ = std::string("the stream broke: ") + e.what();
            close();
        }
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (r < 0) error_ = std::string("reading the stream failed: ") + std::strerror(errno);
        close();
    }
}

}  // namespace memtool::cli
