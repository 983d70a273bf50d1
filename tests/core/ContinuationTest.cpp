// Streams of a run's other processes, read the way the CLI reads them: a fork
// child's stream continues its parent's stack ids, an end before an exec that
// failed is followed by more of the same stream, and a handshake carries the
// launcher's variables and a notice.
#include <gtest/gtest.h>

#include <cstring>

#include "core/Aggregator.h"
#include "core/StreamDecoder.h"
#include "trace/TraceModel.h"

using namespace memtool::core;

namespace {

// Bytes of records, encoded with the collector's encoders.
struct Bytes {
    std::vector<uint8_t> out;
    uint8_t buf[4096];
    void put(uint8_t* end) { out.insert(out.end(), buf, end); }
};

Handshake handshakeOf(int64_t pid, uint64_t start) {
    Handshake h;
    h.pid = pid;
    h.ppid = 1;
    h.startUnixNs = start;
    h.command = {"python3", "train.py"};
    return h;
}

// A parent's stream: a module, two native nodes, a code object and a Python node,
// one allocation of 3,000,000 bytes. No end: it runs on while its child does.
std::vector<uint8_t> parentStream() {
    Handshake h = handshakeOf(100, 7);
    h.environment = {{"RANK", "1"}, {"WORLD_SIZE", "2"}};
    Bytes b;
    b.out = encodeHandshake(h);
    uint8_t* p = encodeModuleHead(b.buf, 1, "/lib/libc10.so", 14, 0x7f0000000000ull, 1);
    b.put(encodeModuleRange(p, 0x7f0000001000ull, 0x1000));
    b.put(encodeNativeNode(b.buf, 0, 0x7f0000001100ull));
    b.put(encodeNativeNode(b.buf, 1, 0x7f0000001200ull));
    b.put(encodePyCode(b.buf, "t.py", 4, "main", 4, 1));
    b.put(encodePyNode(b.buf, 0, 1, 3));
    b.put(encodeAlloc(b.buf, AllocFields{kDeviceCpu, 0x5000, 3000000, 2, 1, 10}));
    return b.out;
}

// The child: it continues the parent's first 2 native nodes, 1 code and 1 Python
// node, adds one of each, and allocates on cpu and in shared memory.
std::vector<uint8_t> childStream() {
    Handshake h = handshakeOf(101, 9);
    h.forked = true;
    h.continues = StreamContinuation{100, 7, 2, 1, 1, 1};
    Bytes b;
    b.out = encodeHandshake(h);
    b.put(encodeNativeNode(b.buf, 2, 0x7f0000001300ull));   // native 3
    b.put(encodePyCode(b.buf, "t.py", 4, "worker", 6, 9));  // code 2
    b.put(encodePyNode(b.buf, 1, 2, 10));                   // Python node 2
    b.put(encodeAlloc(b.buf, AllocFields{kDeviceCpu, 0x6000, 5000000, 3, 2, 10}));
    b.put(encodeAlloc(b.buf, AllocFields{kDeviceShared, 0x7000, 2000000, 3, 2, 10}));
    b.put(encodeFree(b.buf, FreeFields{kDeviceShared, 0x7000, 5}));
    EndFields e{2, 1, 7000000, 2000000, 7, 0, static_cast<uint64_t>(ExitKind::Immediate), 8};
    b.put(encodeEnd(b.buf, e));
    return b.out;
}

void feed(Aggregator& agg, const std::vector<uint8_t>& bytes) {
    StreamDecoder d(agg);
    d.feed(bytes.data(), bytes.size());
}

}  // namespace

TEST(Continuation, AHandshakeCarriesTheLaunchersVariables) {
    Aggregator agg;
    feed(agg, parentStream());
    ASSERT_TRUE(agg.handshake());
    EXPECT_EQ(agg.handshake()->environment, (std::vector<std::pair<std::string, std::string>>{
                                                {"RANK", "1"}, {"WORLD_SIZE", "2"}}));
    EXPECT_FALSE(agg.handshake()->forked);
    EXPECT_FALSE(agg.handshake()->continues);
}

TEST(Continuation, AForkChildTakesOverItsParentsStacks) {
    Aggregator parent;
    StreamDecoder parentDecoder(parent);
    const auto p = parentStream();
    parentDecoder.feed(p.data(), p.size());
    // The parent goes on after the fork: what it sends later is not the child's.
    Bytes later;
    later.put(encodeNativeNode(later.buf, 0, 0x7f0000001f00ull));
    later.put(encodePyCode(later.buf, "t.py", 4, "later", 5, 20));
    parentDecoder.feed(later.out.data(), later.out.size());

    Aggregator child;
    const Handshake* asked = nullptr;
    child.setStreamLookup([&](const Handshake& h) -> const Aggregator* {
        asked = &h;
        return h.continues->pid == 100 && h.continues->startUnixNs == 7 ? &parent : nullptr;
    });
    feed(child, childStream());
    ASSERT_NE(asked, nullptr);
    EXPECT_TRUE(child.handshake()->forked);
    EXPECT_TRUE(child.continuationProblem().empty());
    // Its tables: the parent's prefix, then its own, ids dense.
    ASSERT_EQ(child.nativeNodes().size(), 4u);
    EXPECT_EQ(child.nativeNodes()[2].ip, 0x7f0000001200ull);
    EXPECT_EQ(child.nativeNodes()[3].parent, 2u);
    ASSERT_EQ(child.pyCodes().size(), 3u);
    EXPECT_EQ(child.pyCodes()[1].name, "main");
    EXPECT_EQ(child.pyCodes()[2].name, "worker");
    ASSERT_EQ(child.pyNodes().size(), 3u);
    EXPECT_EQ(child.pyNodes()[2].parent, 1u);
    ASSERT_EQ(child.modules().size(), 1u);
    // Taken over, not copied: a run of many fork children keeps one record.
    EXPECT_EQ(child.modules()[0].get(), parent.modules()[0].get());
    // Only its own bytes: the parent's live storage is not the child's.
    EXPECT_EQ(child.devices().at(kDeviceCpu).peakBytes, 5000000u);
    EXPECT_EQ(child.devices().at(kDeviceShared).peakBytes, 2000000u);
    EXPECT_EQ(child.devices().at(kDeviceShared).currentBytes, 0u);
    EXPECT_TRUE(child.streamVerified());
    EXPECT_EQ(child.end()->exitStatus, 8u);  // _exit(7)
    EXPECT_EQ(deviceName(kDeviceShared), "shared");
}

TEST(Continuation, WithoutItsParentTheInheritedFramesAreUnknown) {
    Aggregator child;  // no lookup: the parent's stream never arrived
    feed(child, childStream());
    EXPECT_FALSE(child.continuationProblem().empty());
    // The child's own ids move down to stay dense; what it inherited reads as 0.
    ASSERT_EQ(child.nativeNodes().size(), 2u);
    EXPECT_EQ(child.nativeNodes()[1].ip, 0x7f0000001300ull);
    EXPECT_EQ(child.nativeNodes()[1].parent, 0u);
    ASSERT_EQ(child.pyCodes().size(), 2u);
    EXPECT_EQ(child.pyCodes()[1].name, "worker");
    EXPECT_EQ(child.pyNodes()[1].parent, 0u);
    EXPECT_EQ(child.devices().at(kDeviceCpu).allocatedBytes, 5000000u);
    EXPECT_TRUE(child.streamVerified());
}

TEST(Continuation, AClaimPastThirtyTwoBitsIsRefused) {
    Handshake h = handshakeOf(101, 9);
    h.continues = StreamContinuation{100, 7, uint64_t{1} << 32, 0, 0, 0};
    Aggregator agg;
    StreamDecoder d(agg);
    const auto bytes = encodeHandshake(h);
    EXPECT_THROW(d.feed(bytes.data(), bytes.size()), ProtocolError);
}

TEST(Continuation, UnknownHandshakeFlagsAreRefused) {
    auto bytes = encodeHandshake(handshakeOf(1, 1));
    // The flags varint follows the preamble, tag, pid, ppid and start (one byte each).
    bytes[kPreambleBytes + 4] = 0x40;
    Aggregator agg;
    StreamDecoder d(agg);
    EXPECT_THROW(d.feed(bytes.data(), bytes.size()), ProtocolError);
}

TEST(Continuation, AnEndBeforeAFailedExecIsFollowedByTheSameStream) {
    Bytes b;
    b.out = encodeHandshake(handshakeOf(100, 7));
    b.put(encodeAlloc(b.buf, AllocFields{kDeviceCpu, 0x5000, 2000000, 0, 0, 10}));
    b.put(encodeEnd(b.buf,
                    EndFields{1, 0, 2000000, 0, 2, 0, static_cast<uint64_t>(ExitKind::Exec), 0}));
    // The exec failed: the stream goes on and ends for good.
    b.put(encodeAlloc(b.buf, AllocFields{kDeviceCpu, 0x6000, 500000, 0, 0, 10}));
    b.put(encodeEnd(b.buf,
                    EndFields{2, 0, 2500000, 0, 4, 0, static_cast<uint64_t>(ExitKind::Normal), 1}));
    Aggregator agg;
    feed(agg, b.out);
    ASSERT_TRUE(agg.end());
    EXPECT_EQ(agg.end()->exitKind, static_cast<uint64_t>(ExitKind::Normal));
    EXPECT_TRUE(agg.streamVerified());
    EXPECT_EQ(agg.devices().at(kDeviceCpu).currentBytes, 2500000u);
}

TEST(Continuation, AnEndBeforeAnExecThatSucceededIsTheEnd) {
    Bytes b;
    b.out = encodeHandshake(handshakeOf(100, 7));
    b.put(encodeAlloc(b.buf, AllocFields{kDeviceCpu, 0x5000, 2000000, 0, 0, 10}));
    b.put(encodeEnd(b.buf,
                    EndFields{1, 0, 2000000, 0, 2, 0, static_cast<uint64_t>(ExitKind::Exec), 0}));
    Aggregator agg;
    feed(agg, b.out);
    ASSERT_TRUE(agg.end());
    EXPECT_EQ(agg.end()->exitKind, static_cast<uint64_t>(ExitKind::Exec));
    EXPECT_TRUE(agg.streamVerified());
}

TEST(Continuation, ANoticeNamesTheStreamThatStopped) {
    Handshake h = handshakeOf(100, 7);
    h.notice = true;
    h.command.clear();
    Bytes b;
    b.out = encodeHandshake(h);
    b.put(encodeNote(b.buf, kNoteStreamLost, std::strlen(kNoteStreamLost), "why", 3));
    Aggregator agg;
    feed(agg, b.out);
    ASSERT_TRUE(agg.handshake());
    EXPECT_TRUE(agg.handshake()->notice);
    EXPECT_EQ(agg.handshake()->startUnixNs, 7u);
    ASSERT_EQ(agg.notes().size(), 1u);
    EXPECT_EQ(agg.notes()[0].text, "why");
}
