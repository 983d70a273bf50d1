// A process that dies without its End record leaves its unsent records in the send
// buffer it shares with memtool run (core/Tail.h); the connection reads them back.
// Its header is the dead process's word: a send cut off mid-record is resumed where
// the socket stopped, and a header that does not square with what arrived reads
// nothing (these tests play the collector over a socketpair).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "cli/stream/CollectorConnection.h"
#include "collectors/engine/SocketSink.h"
#include "core/Records.h"
#include "core/Tail.h"

using namespace memtool;

namespace {

std::vector<uint8_t> allocBytes(uint64_t address, uint64_t size) {
    core::AllocFields a;
    a.address = address;
    a.size = size;
    a.timeDeltaNs = 10;
    uint8_t record[core::kMaxFixedRecordBytes];
    return {record, core::encodeAlloc(record, a)};
}

// A memfd laid out as the collector's: the header, then the buffer's bytes in
// the half the header names (the other half holds `other`).
int sharedBuffer(const core::TailHeader& h, const std::vector<uint8_t>& buffer,
                 size_t fileBytes = core::kTailMemfdBytes, const std::vector<uint8_t>& other = {}) {
    const int fd = memfd_create("test-tail", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(fileBytes)), 0);
    EXPECT_EQ(pwrite(fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    auto put = [&](const std::vector<uint8_t>& bytes, uint64_t half) {
        if (bytes.empty()) return;
        const off_t at = static_cast<off_t>(core::kTailHeaderBytes + half * core::kTailBufferBytes);
        EXPECT_EQ(pwrite(fd, bytes.data(), bytes.size(), at), static_cast<ssize_t>(bytes.size()));
    };
    put(buffer, h.half & 1);
    put(other, (h.half & 1) ^ 1);
    return fd;
}

// The handshake goes as the collector sends it: its SocketSink, the descriptor
// with the stream's first bytes.
void sendWithDescriptor(int socket, const std::vector<uint8_t>& bytes, int fd) {
    collectors::SocketSink sink;
    sink.adopt(::dup(socket));
    sink.attachTail(fd);
    ASSERT_TRUE(sink.write(bytes.data(), bytes.size()));
    sink.abandon();  // closes its copy only: the test goes on writing to `socket`
}

void sendAll(int socket, const uint8_t* data, size_t len) {
    ASSERT_EQ(send(socket, data, len, 0), static_cast<ssize_t>(len));
}

struct Folded {
    uint64_t allocs = 0;
    uint64_t recovered = 0;
    uint64_t cpuBytes = 0;
    std::string error;
};

// The peer's bytes up to its hang-up, folded as memtool run folds them.
Folded readToTheEnd(int socket) {
    cli::CollectorConnection connection(socket);
    cli::ReadBuffer buffer(64 * 1024);
    while (connection.open()) connection.readAvailable(buffer);
    Folded f;
    f.allocs = connection.aggregator().allocsReceived();
    f.recovered = connection.recoveredRecords();
    const auto& devices = connection.aggregator().devices();
    if (auto it = devices.find(core::kDeviceCpu); it != devices.end())
        f.cpuBytes = it->second.currentBytes;
    f.error = connection.error();
    return f;
}

// The stream as the tests' collector writes it: the handshake, sent alone with
// the descriptor, then `records` back to back; bufferStart is where they start.
struct ConnectionStream {
    std::vector<uint8_t> handshake = core::encodeHandshake(core::Handshake{});
    std::vector<uint8_t> records;
    uint64_t size3 = 0;
    ConnectionStream() {
        for (uint64_t i = 1; i <= 3; ++i) {
            const std::vector<uint8_t> r = allocBytes(0x10000 * i, 1000 * i);
            records.insert(records.end(), r.begin(), r.end());
        }
    }
    core::TailHeader header() const {
        core::TailHeader h;
        h.magic = core::kTailMagic;
        h.bufferStart = handshake.size();
        h.used[0] = records.size();
        return h;
    }
};

// The collector sends `sent` bytes of its records, then dies; memtool run reads the rest.
Folded dieAfter(const ConnectionStream& s, size_t sent, const core::TailHeader& h,
                int tailFd = -1) {
    int pair[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const int fd = tailFd >= 0 ? tailFd : sharedBuffer(h, s.records);
    sendWithDescriptor(pair[1], s.handshake, fd);
    ::close(fd);
    if (sent > 0) sendAll(pair[1], s.records.data(), sent);
    ::close(pair[1]);
    return readToTheEnd(pair[0]);
}

}  // namespace

TEST(CollectorConnection, ASendCutOffMidRecordIsResumedFromTheBuffer) {
    const ConnectionStream s;
    const size_t firstRecord = allocBytes(0x10000, 1000).size();
    // The first record and three bytes of the second arrived; the buffer holds all three.
    const Folded f = dieAfter(s, firstRecord + 3, s.header());
    EXPECT_EQ(f.allocs, 3u);
    EXPECT_EQ(f.recovered, 2u);
    EXPECT_EQ(f.cpuBytes, 6000u);
    EXPECT_EQ(f.error, "");
}

// The collector folds its buffer into the other half before it sends it, and
// names that half last: its records are read from the half the header names.
TEST(CollectorConnection, TheRecordsAreReadFromTheHalfTheHeaderNames) {
    const ConnectionStream s;
    core::TailHeader h = s.header();
    h.half = 1;
    h.used[1] = s.records.size();
    h.used[0] = 3;  // what the other half held before: not read
    const std::vector<uint8_t> stale(3, 0xff);
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const int fd = sharedBuffer(h, s.records, core::kTailMemfdBytes, stale);
    sendWithDescriptor(pair[1], s.handshake, fd);
    ::close(fd);
    ::close(pair[1]);
    const Folded f = readToTheEnd(pair[0]);
    EXPECT_EQ(f.allocs, 3u);
    EXPECT_EQ(f.recovered, 3u);
    EXPECT_EQ(f.cpuBytes, 6000u);
    EXPECT_EQ(f.error, "");
}

TEST(CollectorConnection, TheAllocationHeldBackForAShortLivedRecordIsReadBackToo) {
    const ConnectionStream s;
    core::TailHeader h = s.header();
    h.deferred = 1;
    h.deferredAlloc.address = 0x40000;
    h.deferredAlloc.size = 4000;
    const Folded f = dieAfter(s, 0, h);
    EXPECT_EQ(f.allocs, 4u);
    EXPECT_EQ(f.recovered, 4u);
    EXPECT_EQ(f.cpuBytes, 10000u);
}

TEST(CollectorConnection, AHeaderThatDoesNotSquareWithWhatArrivedReadsNothing) {
    const ConnectionStream s;
    const size_t firstRecord = allocBytes(0x10000, 1000).size();
    auto expectNothingRead = [&](const core::TailHeader& h, const char* what) {
        const Folded f = dieAfter(s, firstRecord, h);
        EXPECT_EQ(f.allocs, 1u) << what;
        EXPECT_EQ(f.recovered, 0u) << what;
        EXPECT_EQ(f.cpuBytes, 1000u) << what;
    };
    core::TailHeader h = s.header();
    h.magic ^= 1;
    expectNothingRead(h, "another magic");
    h = s.header();
    h.used[0] = core::kTailBufferBytes + 1;
    expectNothingRead(h, "more bytes than the buffer has");
    h = s.header();
    h.half = 2;
    expectNothingRead(h, "a third half");
    h = s.header();
    h.bufferStart = s.handshake.size() + firstRecord + 1;
    expectNothingRead(h, "a buffer that starts past what arrived");
    h = s.header();
    h.used[0] = firstRecord - 1;
    expectNothingRead(h, "fewer bytes than arrived from it");
    // The file cut short under its header: the bytes it names cannot be read.
    const int shortFile = sharedBuffer(s.header(), {}, core::kTailHeaderBytes + firstRecord + 2);
    const Folded f = dieAfter(s, firstRecord, s.header(), shortFile);
    EXPECT_EQ(f.allocs, 1u);
    EXPECT_EQ(f.recovered, 0u);
}

TEST(CollectorConnection, BytesReadBackThatAreNoStreamBreakItWithAReason) {
    const ConnectionStream s;
    core::TailHeader h = s.header();
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const int fd = sharedBuffer(h, std::vector<uint8_t>(s.records.size(), 0xee));
    sendWithDescriptor(pair[1], s.handshake, fd);
    ::close(fd);
    ::close(pair[1]);
    const Folded f = readToTheEnd(pair[0]);
    EXPECT_EQ(f.allocs, 0u);
    EXPECT_EQ(f.error.rfind("the stream broke: ", 0), 0u) << f.error;
}

TEST(CollectorConnection, OnlyARegularFileIsTakenAsTheBuffer) {
    const ConnectionStream s;
    int pipeFds[2];
    ASSERT_EQ(pipe(pipeFds), 0);
    const Folded f = dieAfter(s, 0, s.header(), pipeFds[0]);
    ::close(pipeFds[1]);
    EXPECT_EQ(f.allocs, 0u);
    EXPECT_EQ(f.recovered, 0u);
    EXPECT_EQ(f.error, "");
}

TEST(CollectorConnection, AStreamThatEndedIsNotReadBack) {
    ConnectionStream s;
    const core::TailHeader h = s.header();  // the three records, unsent as far as it says
    uint8_t end[core::kMaxFixedRecordBytes * 2];
    core::EndFields e;
    e.recordCount = 1;
    const std::vector<uint8_t> endBytes(end, core::encodeEnd(end, e));
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const int fd = sharedBuffer(h, s.records);
    sendWithDescriptor(pair[1], s.handshake, fd);
    ::close(fd);
    sendAll(pair[1], endBytes.data(), endBytes.size());
    ::close(pair[1]);
    const Folded f = readToTheEnd(pair[0]);
    EXPECT_EQ(f.allocs, 0u);
    EXPECT_EQ(f.recovered, 0u);
    EXPECT_EQ(f.error, "");
}
