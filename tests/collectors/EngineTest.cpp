// The collector's engine in-process, over a socketpair, as heaptrack tests its
// tracker: what goes in (alloc, free, notes, fork, a peer that goes away) and
// exactly which records come out, decoded by the CLI's own decoder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "collectors/engine/Engine.h"
#include "collectors/engine/SocketSink.h"
#include "core/Aggregator.h"
#include "core/StreamDecoder.h"

using namespace memtool;
using namespace memtool::collectors;

namespace {

// Every record of a stream, as a short token, and the folded result.
struct Recorded : core::RecordSink {
    std::vector<std::string> log;
    core::Aggregator agg;
    std::vector<core::AllocRecord> allocs;
    std::vector<core::FreeRecord> frees;
    std::vector<core::NoteRecord> notes;
    core::EndFields end;
    void onHandshake(const core::Handshake& h) override { agg.onHandshake(h), log.push_back("H"); }
    void onModule(const core::ModuleRecord& m) override { agg.onModule(m), log.push_back("M"); }
    void onPyCode(const core::PyCodeRecord& c) override { agg.onPyCode(c), log.push_back("C"); }
    void onNativeNode(const core::NativeNodeRecord& n) override {
        agg.onNativeNode(n), log.push_back("N");
    }
    void onPyNode(const core::PyNodeRecord& n) override { agg.onPyNode(n), log.push_back("P"); }
    void onAlloc(const core::AllocRecord& a) override {
        agg.onAlloc(a), allocs.push_back(a), log.push_back("A");
    }
    void onFree(const core::FreeRecord& f) override {
        agg.onFree(f), frees.push_back(f), log.push_back("F");
    }
    // Logged as the two events it stands for; shortLived counts the records.
    void onShortLived(const core::AllocRecord& a, const core::FreeRecord& f) override {
        agg.onShortLived(a, f), ++shortLived;
        allocs.push_back(a), frees.push_back(f), log.push_back("A"), log.push_back("F");
    }
    size_t shortLived = 0;
    void onNote(const core::NoteRecord& n) override {
        // "L": the collector's lock counts, before every End.
        agg.onNote(n), notes.push_back(n),
            log.push_back(n.key == core::kNoteCollectorLock ? "L" : "W");
    }
    void onRegion(const core::RegionRecord& g) override { agg.onRegion(g), log.push_back("R"); }
    void onControl(const core::ControlRecord& x) override {
        agg.onControl(x), controls.push_back(x), log.push_back("X");
    }
    void onReply(const core::ReplyRecord& y) override {
        agg.onReply(y), replies.push_back(y), log.push_back("Y");
    }
    std::vector<core::ControlRecord> controls;
    std::vector<core::ReplyRecord> replies;
    void onEnd(const core::EndFields& e) override { agg.onEnd(e), end = e, log.push_back("E"); }
    // Logged as one token: which events it folded is the aggregator's to say.
    void onWindow(const core::WindowRecord& w) override {
        agg.onWindow(w), ++windows, log.push_back("B");
    }
    size_t windows = 0;
    // The log without node records (their number depends on the stack depth).
    std::vector<std::string> events() const {
        std::vector<std::string> out;
        for (const auto& t : log)
            if (t != "N" && t != "P") out.push_back(t);
        return out;
    }
};

// An engine whose stream goes into one end of a socketpair; the test reads the other.
struct Stream {
    int fds[2] = {-1, -1};
    SocketSink sink;
    Engine engine;
    // Folding off unless asked for: most tests here read the stream's events one
    // by one (WindowCompactorTest and the tests of folding below ask for it).
    explicit Stream(bool nativeStacks = false, int fold = 0) {
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        EngineOptions o;
        o.nativeStacks = nativeStacks;
        o.pythonStacks = false;
        o.fold = fold;
        const char* why = nullptr;
        EXPECT_TRUE(engine.configure(o, &why)) << why;
        sink.adopt(fds[0]);
    }
    ~Stream() {
        if (fds[1] >= 0) close(fds[1]);
    }
    bool connect(const std::string& command = std::string("prog\0--flag\0", 12),
                 uint64_t pid = 4242) {
        StreamIdentity id;
        id.pid = pid;
        id.ppid = 1;
        id.startUnixNs = 1700000000000000000ull;
        id.command = command.data();
        id.commandBytes = command.size();
        return engine.connect(sink, id);
    }
    // Reads to end-of-file (the engine closed its end) and decodes everything.
    void readAll(Recorded& out) {
        core::StreamDecoder decoder(out);
        std::vector<uint8_t> buf(1 << 16);
        for (ssize_t n; (n = read(fds[1], buf.data(), buf.size())) > 0;)
            decoder.feed(buf.data(), static_cast<size_t>(n));
    }
};

// The text a callback wrote to stderr.
template <typename Fn>
std::string stderrOf(Fn fn) {
    int pipeFds[2];
    EXPECT_EQ(pipe2(pipeFds, O_CLOEXEC), 0);
    int saved = dup(STDERR_FILENO);
    dup2(pipeFds[1], STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(pipeFds[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = read(pipeFds[0], buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(n));
    close(pipeFds[0]);
    return text;
}

__attribute__((noinline)) void allocateHere(Engine& e, uint64_t key) {
    e.alloc(core::kDeviceCpu, key, 64);
    asm volatile("");  // keep the call a call, not a tail jump
}

}  // namespace

// The kernel holds two of the writer's 256 KiB buffers: a full one is sent
// without the program sleeping until memtool run has read part of it. Linux
// doubles what is asked for, up to twice net.core.wmem_max.
TEST(SocketSink, TheKernelHoldsTwoBuffersOfRecords) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    SocketSink sink;
    sink.adopt(fds[0]);
    int got = 0;
    socklen_t len = sizeof got;
    ASSERT_EQ(getsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &got, &len), 0);
    long wmemMax = 0;
    FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fscanf(f, "%ld", &wmemMax), 1);
    std::fclose(f);
    EXPECT_EQ(got, 2 * std::min<long>(2 * 256 * 1024, wmemMax));
    sink.close();
    close(fds[1]);
}

TEST(Engine, RecordsExactlyWhatItIsTold) {
    Stream s;
    ASSERT_TRUE(s.connect());
    EXPECT_TRUE(s.engine.active());
    s.engine.alloc(core::kDeviceCpu, 0x1000, 100);
    s.engine.alloc(core::cudaDevice(1), 0x2000, 200);
    s.engine.free(0x1000);
    s.engine.free(0x3000);  // never allocated through the engine: nothing to say
    s.engine.note(core::kNoteWarning, "a note");
    s.engine.free(0x2000);  // reported on the device it was allocated on
    s.engine.alloc(core::kDeviceCpu, 0x4000, 50);
    s.engine.finish(core::ExitKind::Immediate);
    EXPECT_FALSE(s.engine.active());

    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "A", "A", "F", "W", "F", "A", "L", "E"}));
    ASSERT_TRUE(r.agg.handshake());
    EXPECT_EQ(r.agg.handshake()->pid, 4242);
    EXPECT_EQ(r.agg.handshake()->command, (std::vector<std::string>{"prog", "--flag"}));
    EXPECT_FALSE(r.agg.handshake()->nativeStacks);
    ASSERT_EQ(r.allocs.size(), 3u);
    EXPECT_EQ(r.allocs[1].f.device, core::cudaDevice(1));
    EXPECT_EQ(r.allocs[1].f.address, 0x2000u);
    EXPECT_EQ(r.allocs[1].f.size, 200u);
    EXPECT_EQ(r.allocs[0].f.nativeNode, 0u);
    ASSERT_EQ(r.frees.size(), 2u);
    EXPECT_EQ(r.frees[0].f.device, core::kDeviceCpu);
    EXPECT_EQ(r.frees[1].f.device, core::cudaDevice(1));
    EXPECT_EQ(r.notes.at(0).text, "a note");
    // One thread: it never found the lock held.
    EXPECT_EQ(r.notes.at(1).key, core::kNoteCollectorLock);
    EXPECT_EQ(r.notes.at(1).text, "0 0");
    EXPECT_EQ(r.end.allocCount, 3u);
    EXPECT_EQ(r.end.freeCount, 2u);
    EXPECT_EQ(r.end.allocatedBytes, 350u);
    EXPECT_EQ(r.end.freedBytes, 300u);
    EXPECT_EQ(r.end.recordCount, 8u);  // the handshake and seven records
    EXPECT_EQ(r.end.missedEvents, 0u);
    EXPECT_EQ(r.end.exitKind, static_cast<uint64_t>(core::ExitKind::Immediate));
    EXPECT_TRUE(r.agg.streamVerified());
    EXPECT_EQ(r.agg.devices().at(core::kDeviceCpu).peakBytes, 100u);
    EXPECT_EQ(r.agg.devices().at(core::kDeviceCpu).currentBytes, 50u);
}

// A block freed while its Alloc is the stream's last record goes as one
// ShortLived record; a block with anything recorded in between (another
// allocation, a note, a send), or served from a region, goes as two.
TEST(Engine, ABlockFreedBeforeAnythingElseIsOneShortLivedRecord) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.region(1, "weights", core::kDeviceCpu, core::BackupKind::None);
    s.engine.alloc(core::kDeviceCpu, 0x1000, 100);
    s.engine.free(0x1000);  // short-lived
    s.engine.alloc(core::kDeviceCpu, 0x2000, 200);
    s.engine.alloc(core::cudaDevice(1), 0x3000, 300);
    s.engine.free(0x2000);  // not the last record
    s.engine.free(0x3000);  // its Alloc is not the last record either
    s.engine.alloc(core::kDeviceCpu, 0x4000, 400);
    s.engine.note(core::kNoteWarning, "between");
    s.engine.free(0x4000);
    s.engine.alloc(core::kDeviceCpu, 0x5000, 500, FlushPolicy::Timed, 1);
    s.engine.free(0x5000);  // a region's block
    s.engine.alloc(core::cudaDevice(1), 0x6000, 600);
    s.engine.free(0x6000);  // short-lived, on its device
    s.engine.finish(core::ExitKind::Immediate);

    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.shortLived, 2u);
    EXPECT_EQ(r.end.allocCount, 6u);
    EXPECT_EQ(r.end.freeCount, 6u);
    EXPECT_EQ(r.end.recordCount, 14u);  // the handshake, the region, 12 others
    EXPECT_TRUE(r.agg.streamVerified());
    ASSERT_EQ(r.frees.size(), 6u);
    EXPECT_EQ(r.frees[0].f.address, 0x1000u);
    EXPECT_EQ(r.frees[5].f.address, 0x6000u);
    EXPECT_EQ(r.frees[5].f.device, core::cudaDevice(1));
    EXPECT_EQ(r.agg.devices().at(core::kDeviceCpu).peakBytes, 500u);  // the region's block
    EXPECT_EQ(r.agg.devices().at(core::cudaDevice(1)).peakBytes, 600u);
    EXPECT_EQ(r.agg.devices().at(core::kDeviceCpu).currentBytes, 0u);
}

// An Alloc held back for its Free to join is still sent by a flush: the CLI
// sees everything the program did up to a memtool_flush.
TEST(Engine, AFlushSendsAnAllocationHeldBackForItsFree) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.alloc(core::kDeviceCpu, 0x1000, 100);
    s.engine.flush();
    Recorded sent;
    {
        core::StreamDecoder decoder(sent);
        uint8_t buf[4096];
        // Everything sent so far, however many reads it takes (the handshake comes
        // alone: the shared buffer's descriptor rides with it).
        ssize_t n;
        while ((n = recv(s.fds[1], buf, sizeof buf, MSG_DONTWAIT)) > 0)
            decoder.feed(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(sent.events(), (std::vector<std::string>{"H", "A"}));
    s.engine.free(0x1000);
    s.engine.finish(core::ExitKind::Normal);
    // What follows the flush: the Free on its own (the Alloc is gone), then the end.
    uint8_t first = 0;
    ASSERT_EQ(read(s.fds[1], &first, 1), 1);
    EXPECT_EQ(first, static_cast<uint8_t>(core::RecordTag::Free));
}

TEST(Engine, NothingBeforeConnectOrAfterFinish) {
    Stream s;
    s.engine.alloc(core::kDeviceCpu, 0x1000, 1);  // not connected: dropped, not counted
    ASSERT_TRUE(s.connect());
    s.engine.finish(core::ExitKind::Normal);
    s.engine.alloc(core::kDeviceCpu, 0x2000, 2);
    s.engine.finish(core::ExitKind::Normal);  // once only
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "L", "E"}));
    EXPECT_TRUE(r.agg.streamVerified());
}

TEST(Engine, RepeatedStacksCostNoNewNodes) {
    Stream s(/*nativeStacks=*/true);
    ASSERT_TRUE(s.connect());
    volatile int calls = 2;  // a loop the compiler cannot unroll: one call site, one stack
    for (int i = 0; i < calls; ++i) allocateHere(s.engine, 0x10 * static_cast<uint64_t>(i + 1));
    s.engine.finish(core::ExitKind::Normal);
    Recorded r;
    s.readAll(r);
    ASSERT_EQ(r.allocs.size(), 2u);
    EXPECT_NE(r.allocs[0].f.nativeNode, 0u);
    EXPECT_EQ(r.allocs[0].f.nativeNode, r.allocs[1].f.nativeNode);  // the same stack, the same node
    // Every node record comes before the first allocation: the second added none.
    size_t firstAlloc = 0;
    while (r.log[firstAlloc] != "A") ++firstAlloc;
    EXPECT_EQ(r.log.size(), firstAlloc + 4);  // A A L E
    EXPECT_TRUE(r.agg.streamVerified());
}

TEST(Engine, EventsInsideTheEngineAreCountedAsMissed) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.alloc(core::kDeviceCpu, 0x10, 8);
    {
        RecursionGuard ours;  // as if memtool's own code allocated
        s.engine.alloc(core::kDeviceCpu, 0x20, 8);
        s.engine.free(0x10);
    }
    s.engine.finish(core::ExitKind::Normal);
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.events(), (std::vector<std::string>{"H", "A", "L", "E"}));
    EXPECT_EQ(r.end.missedEvents, 2u);
    EXPECT_FALSE(r.agg.streamVerified());  // the trace will not claim what it missed
}

TEST(Engine, AForkChildNeverWritesIntoTheParentsStream) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.alloc(core::kDeviceCpu, 0x10, 1);
    s.engine.prepareFork();
    pid_t child = fork();
    if (child == 0) {
        s.engine.childAfterFork();
        s.engine.alloc(core::kDeviceCpu, 0x20, 2);
        s.engine.free(0x10);
        s.engine.finish(core::ExitKind::Normal);
        _exit(s.engine.active() ? 1 : 0);
    }
    s.engine.parentAfterFork();
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // The child dropped its copy of the socket without shutting it down.
    EXPECT_TRUE(s.engine.active());
    s.engine.alloc(core::kDeviceCpu, 0x30, 3);
    s.engine.finish(core::ExitKind::Normal);
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "A", "A", "L", "E"}));
    EXPECT_EQ(r.allocs.at(1).f.address, 0x30u);
    EXPECT_TRUE(r.agg.streamVerified());
}

// Reads one end of a socketpair to end-of-file and decodes it.
void decodeAll(int fd, Recorded& out) {
    core::StreamDecoder decoder(out);
    std::vector<uint8_t> buf(1 << 16);
    for (ssize_t n; (n = read(fd, buf.data(), buf.size())) > 0;)
        decoder.feed(buf.data(), static_cast<size_t>(n));
}

size_t nodeRecords(const Recorded& r) { return std::count(r.log.begin(), r.log.end(), "N"); }

// The child's own stream (the collector starts it at the child's first event)
// continues the parent's stack ids: the frames the parent already sent are not
// sent again, the parent's live blocks are not the child's, and _exit's status
// travels in its end.
TEST(Engine, AForkChildsStreamContinuesItsParentsStacks) {
    Stream s(/*nativeStacks=*/true);
    ASSERT_TRUE(s.connect());
    allocateHere(s.engine, 0x10);
    s.engine.prepareFork();
    pid_t child = fork();
    if (child == 0) {
        s.engine.childAfterFork();
        int fds[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) _exit(10);
        SocketSink sink;
        sink.adopt(fds[0]);
        StreamIdentity id;
        id.pid = 4243;
        id.ppid = 4242;
        id.forked = true;
        if (!s.engine.connect(sink, id)) _exit(11);
        allocateHere(s.engine, 0x20);
        s.engine.free(0x10);  // the parent's block: nothing to say
        s.engine.finish(core::ExitKind::Immediate, 3);
        Recorded r;
        decodeAll(fds[1], r);
        const auto& h = r.agg.handshake();
        if (!h || !h->forked || !h->continues || h->continues->pid != 4242 ||
            h->continues->startUnixNs != 1700000000000000000ull || h->continues->nativeNodes == 0)
            _exit(12);
        if (r.events() != std::vector<std::string>{"H", "A", "L", "E"}) _exit(13);
        if (r.end.exitStatus != 4 || r.end.freeCount != 0) _exit(14);
        // Only the frames from this test's body inwards are new to the stream.
        _exit(nodeRecords(r) < h->continues->nativeNodes ? 0 : 15);
    }
    s.engine.parentAfterFork();
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    s.engine.finish(core::ExitKind::Normal);
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.events(), (std::vector<std::string>{"H", "A", "L", "E"}));
    EXPECT_TRUE(r.agg.streamVerified());
}

// An exec ends the image's stream with an end of kind Exec, and leaves it open:
// the exec closes it. One that fails goes on with the same stream.
TEST(Engine, AnExecThatFailsLeavesTheStreamGoingOn) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.alloc(core::kDeviceCpu, 0x10, 1);
    s.engine.suspendForExec();
    EXPECT_FALSE(s.engine.active());
    s.engine.resumeAfterFailedExec();
    EXPECT_TRUE(s.engine.active());
    s.engine.alloc(core::kDeviceCpu, 0x20, 2);
    s.engine.finish(core::ExitKind::Normal, 0);
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "A", "L", "E", "A", "L", "E"}));
    EXPECT_EQ(r.end.exitKind, static_cast<uint64_t>(core::ExitKind::Normal));
    EXPECT_EQ(r.end.exitStatus, 1u);
    EXPECT_TRUE(r.agg.streamVerified());
}

TEST(Engine, EventsWhileWaitingForAnExecAreMissed) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.suspendForExec();
    s.engine.alloc(core::kDeviceCpu, 0x20, 2);  // another thread's, say
    s.engine.resumeAfterFailedExec();
    s.engine.finish(core::ExitKind::Normal);
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "L", "E", "L", "E"}));
    EXPECT_EQ(r.end.missedEvents, 1u);
    EXPECT_FALSE(r.agg.streamVerified());
}

TEST(Engine, AnExecThatSucceedsLeavesAnEndOfKindExec) {
    Stream s;
    ASSERT_TRUE(s.connect());
    s.engine.alloc(core::kDeviceCpu, 0x10, 1);
    s.engine.suspendForExec();
    s.sink.abandon();  // what the exec does to the descriptor
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H", "A", "L", "E"}));
    EXPECT_EQ(r.end.exitKind, static_cast<uint64_t>(core::ExitKind::Exec));
    EXPECT_EQ(r.end.exitStatus, 0u);  // an image that execs has no exit status
    EXPECT_TRUE(r.agg.streamVerified());
}

TEST(Engine, DeactivatesOnceWhenThePeerGoesAway) {
    Stream s;
    ASSERT_TRUE(s.connect());
    close(s.fds[1]);
    s.fds[1] = -1;
    std::string said = stderrOf([&] {
        s.engine.alloc(core::kDeviceCpu, 0x10, 1);
        s.engine.flush();  // the send fails: the peer is gone
        s.engine.alloc(core::kDeviceCpu, 0x20, 2);
        s.engine.flush();
        s.engine.finish(core::ExitKind::Normal);
    });
    EXPECT_FALSE(s.engine.active());
    EXPECT_EQ(said, "memtool: lost the connection to `memtool run`; profiling stopped\n");
}

TEST(Engine, StopsWhenItsDescriptorIsClosedUnderIt) {
    Stream s;
    ASSERT_TRUE(s.connect());
    // The program closes memtool's descriptor by the system call (the preload
    // library's close would leave it open) and opens nothing in its place (inside
    // the capture of stderr, whose own descriptors would take the number).
    std::string said = stderrOf([&] {
        EXPECT_EQ(syscall(SYS_close, s.fds[0]), 0);
        s.engine.alloc(core::kDeviceCpu, 0x10, 1);
        s.engine.flush();
    });
    EXPECT_FALSE(s.engine.active());
    EXPECT_EQ(said,
              "memtool: the program closed memtool's socket; profiling stopped (the trace is "
              "incomplete)\n");
}

TEST(Engine, StopsWhenItsDescriptorIsTakenOver) {
    Stream s;
    ASSERT_TRUE(s.connect());
    // The program closes memtool's descriptor and gets the same number for a pipe.
    int pipeFds[2];
    ASSERT_EQ(pipe(pipeFds), 0);
    const int number = s.fds[0];
    ASSERT_EQ(dup2(pipeFds[1], number), number);
    close(pipeFds[1]);
    std::string said = stderrOf([&] {
        s.engine.alloc(core::kDeviceCpu, 0x10, 1);
        s.engine.flush();
    });
    EXPECT_FALSE(s.engine.active());
    EXPECT_EQ(said,
              "memtool: the program closed memtool's socket and reused its descriptor; profiling "
              "stopped (the trace "
              "is incomplete)\n");
    // Nothing reached the program's pipe, and the number is still the program's.
    close(number);
    char byte;
    EXPECT_EQ(read(pipeFds[0], &byte, 1), 0);
    close(pipeFds[0]);
    // The CLI's end sees the stream stop without its end record.
    Recorded r;
    s.readAll(r);
    EXPECT_EQ(r.log, (std::vector<std::string>{"H"}));
}

TEST(Engine, AHugeCommandLineTravelsWhole) {
    Stream s;
    std::string big(1 << 20, 'x');  // larger than the 256 KiB buffer
    big += '\0';
    big += "tail";
    big += '\0';
    std::string received;
    std::thread reader([&] {
        Recorded r;
        s.readAll(r);
        ASSERT_TRUE(r.agg.handshake());
        const auto& cmd = r.agg.handshake()->command;
        ASSERT_EQ(cmd.size(), 2u);
        received = cmd[0].substr(0, 3) + std::to_string(cmd[0].size()) + cmd[1];
        EXPECT_TRUE(r.agg.streamVerified());
    });
    ASSERT_TRUE(s.connect(big));
    s.engine.finish(core::ExitKind::Normal);
    reader.join();
    EXPECT_EQ(received, "xxx1048576tail");
}

namespace {

// Four threads allocate 20,000 blocks each and free every other one at once;
// `fold` as in EngineOptions. `r`: what the reader made of the stream.
void recordThreads(int fold, Recorded& r) {
    Stream s(/*nativeStacks=*/true, fold);
    constexpr int kThreads = 4, kPerThread = 20000;
    std::thread reader([&] { s.readAll(r); });
    ASSERT_TRUE(s.connect());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (uint64_t i = 0; i < kPerThread; ++i) {
                const uint64_t key = (static_cast<uint64_t>(t + 1) << 32) | (i * 64 + 64);
                s.engine.alloc(core::kDeviceCpu, key, 100 + static_cast<uint64_t>(t));
                if (i % 2 == 0) s.engine.free(key);
            }
        });
    }
    for (auto& th : threads) th.join();
    s.engine.finish(core::ExitKind::Normal);
    reader.join();
}

}  // namespace

TEST(Engine, ThreadsRecordEveryEventExactly) {
    constexpr int kThreads = 4, kPerThread = 20000;
    Recorded r;
    recordThreads(0, r);
    EXPECT_TRUE(r.agg.streamVerified());
    EXPECT_EQ(r.end.allocCount, uint64_t{kThreads * kPerThread});
    EXPECT_EQ(r.end.freeCount, uint64_t{kThreads * kPerThread / 2});
    const auto& cpu = r.agg.devices().at(core::kDeviceCpu);
    EXPECT_EQ(cpu.allocatedBytes, uint64_t{kPerThread} * (100 + 101 + 102 + 103));
    EXPECT_EQ(cpu.currentBytes, uint64_t{kPerThread / 2} * (100 + 101 + 102 + 103));
    EXPECT_EQ(r.agg.unmatchedFrees(), 0u);
}

// The same with every buffer folded into Window records: the engine's tags,
// held-back allocations and live bytes, written from four threads.
TEST(Engine, ThreadsRecordEveryEventExactlyFolded) {
    constexpr int kThreads = 4, kPerThread = 20000;
    Recorded r;
    recordThreads(2, r);
    EXPECT_GT(r.windows, 0u);
    EXPECT_TRUE(r.agg.streamVerified());
    EXPECT_EQ(r.agg.allocsReceived(), uint64_t{kThreads * kPerThread});
    EXPECT_EQ(r.agg.freesReceived(), uint64_t{kThreads * kPerThread / 2});
    const auto& cpu = r.agg.devices().at(core::kDeviceCpu);
    EXPECT_EQ(cpu.allocatedBytes, uint64_t{kPerThread} * (100 + 101 + 102 + 103));
    EXPECT_EQ(cpu.currentBytes, uint64_t{kPerThread / 2} * (100 + 101 + 102 + 103));
    EXPECT_EQ(cpu.peakBytes, cpu.currentBytes);  // nothing live is ever freed
    EXPECT_EQ(r.agg.liveBlocks(core::kDeviceCpu).size(), size_t{kThreads * kPerThread / 2});
    EXPECT_EQ(r.agg.unmatchedFrees(), 0u);
    EXPECT_EQ(r.agg.doubleAllocs(), 0u);
}
