// Folding a send buffer's events into Window records changes what travels, never
// what the reader ends with: the same records written by a writer that folds and
// by one that does not must leave two aggregators equal in every figure, the
// timelines' samples, each stack's bytes at its device's peak and the table of
// live blocks included.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "collectors/engine/RecordWriter.h"
#include "core/Aggregator.h"
#include "core/Records.h"
#include "core/StreamDecoder.h"
#include "core/Tail.h"
#include "tests/collectors/BufferSink.h"

using namespace memtool;
using namespace memtool::collectors;

namespace {

// Counts the Window records among what it passes on to an aggregator.
struct Counting : core::Aggregator {
    size_t windows = 0;
    void onWindow(const core::WindowRecord& w) override {
        ++windows;
        core::Aggregator::onWindow(w);
    }
};

// A stream's first record, written into `writer`; where it lies in the buffer.
uint8_t* writeHandshake(RecordWriter& writer) {
    const std::vector<uint8_t> h = core::encodeHandshake(core::Handshake{});
    uint8_t* p = writer.reserve(h.size());
    std::memcpy(p, h.data(), h.size());
    writer.commit(p + h.size());
    return p;
}

// One writer and where its bytes go (a writer is large: on the heap).
struct Writer {
    BufferSink sink;
    std::unique_ptr<RecordWriter> writer = std::make_unique<RecordWriter>();
    explicit Writer(RecordWriter::Folding folding) {
        writer->open(&sink, 0, folding);
        writeHandshake(*writer);
    }
};

void expectSame(const core::Aggregator& a, const core::Aggregator& b);

// Random programs of allocations and frees on three devices from a few stacks,
// written alike to a writer that folds every buffer and one that never folds.
class Program {
public:
    explicit Program(uint32_t seed) : rng_(seed) {}

    void run(size_t ops) {
        for (uint64_t n = 1; n <= 6; ++n) definition(n);
        for (size_t i = 0; i < ops; ++i) {
            const unsigned op = pick(100);
            if (op < 40)
                alloc();
            else if (op < 75)
                free();
            else if (op < 90)
                shortLived();
            else if (op < 93)
                definition(++nodes_);
            else if (op < 95)
                note();
            else if (op < 97)
                flush();
            else
                jump();
        }
        flush();
    }

    Writer folded{RecordWriter::Folding::Always};
    Writer plain{RecordWriter::Folding::Never};

private:
    unsigned pick(unsigned n) { return std::uniform_int_distribution<unsigned>(0, n - 1)(rng_); }
    uint8_t device() {
        static const uint8_t kDevices[] = {core::kDeviceCpu, core::cudaDevice(0),
                                           core::cudaDevice(0, core::DevicePool::Active)};
        return kDevices[pick(3)];
    }
    uint64_t delta() {
        // Mostly 0 (the coarse clock), sometimes a few µs: buckets fill and turn over.
        const unsigned r = pick(10);
        return r < 6 ? 0 : r < 9 ? pick(3000) : 100'000 + pick(1'000'000);
    }
    uint64_t size() {
        // A few sizes again and again (peaks repeat exactly), some odd ones.
        static constexpr uint64_t kSizes[] = {64, 256, 4096, 1 << 20};
        return pick(4) ? kSizes[pick(4)] : 1 + pick(100'000);
    }
    uint64_t address() {
        if (!freed_.empty() && pick(2)) {  // an address reused, as allocators do
            const size_t i = pick(static_cast<unsigned>(freed_.size()));
            const uint64_t a = freed_[i];
            freed_[i] = freed_.back();
            freed_.pop_back();
            if (!live_.count(a)) return a;
        }
        return next_ += 0x40;
    }
    template <typename Commit>
    void both(size_t bytes, Commit commit) {
        for (Writer* w : {&folded, &plain}) {
            uint8_t* p = w->writer->reserve(bytes);
            ASSERT_NE(p, nullptr);
            commit(*w->writer, p);
        }
    }
    // Native node `id`, under one defined before it.
    void definition(uint64_t id) {
        const uint64_t parent = id > 1 ? pick(static_cast<unsigned>(id - 1)) : 0;
        both(core::kMaxFixedRecordBytes, [&](RecordWriter& w, uint8_t* p) {
            w.commitDefinition(core::encodeNativeNode(p, parent, 0x1000 + id));
        });
    }
    core::AllocFields fields(uint8_t dev) {
        core::AllocFields a;
        a.device = dev;
        a.address = address();
        a.size = size();
        a.nativeNode = 1 + pick(static_cast<unsigned>(nodes_));
        a.timeDeltaNs = delta();
        return a;
    }
    // As the engine does: every allocation is held back (the next record settles
    // it; its free, if next, makes a ShortLived record of it), or with `now`
    // written at once (a region's); its tag goes with the block to its free.
    void alloc(core::AllocFields a, bool now = false) {
        Block& b = live_[a.address];
        b.device = a.device;
        b.size = a.size;
        bytes_[a.device] += a.size;
        for (size_t i = 0; i < 2; ++i) {
            RecordWriter& w = *(i == 0 ? folded : plain).writer;
            b.tag[i] = w.prepareEvent();
            if (!now) {
                w.deferAlloc(a, bytes_[a.device]);
                continue;
            }
            uint8_t* p = w.reserve(core::kMaxFixedRecordBytes);
            ASSERT_NE(p, nullptr);
            w.commitAlloc(core::encodeAlloc(p, a), a, bytes_[a.device]);
        }
    }
    void alloc() { alloc(fields(device()), pick(4) == 0); }
    void free(uint64_t address) {
        const Block b = live_.at(address);
        live_.erase(address);
        core::FreeFields f;
        f.device = b.device;
        f.address = address;
        f.timeDeltaNs = delta();
        bytes_[f.device] -= b.size;
        freed_.push_back(address);
        for (size_t i = 0; i < 2; ++i) {
            RecordWriter& w = *(i == 0 ? folded : plain).writer;
            core::AllocFields held;
            uint64_t heldLive = 0;
            const bool shortLived = w.takeDeferred(f.device, address, &held, &heldLive);
            uint8_t* p = w.reserve(core::kMaxFixedRecordBytes);
            ASSERT_NE(p, nullptr);
            if (shortLived)
                w.commitShortLived(core::encodeShortLived(p, held, f.timeDeltaNs), held,
                                   f.timeDeltaNs, heldLive, bytes_[f.device]);
            else
                w.commitFree(core::encodeFree(p, f), f, bytes_[f.device], b.tag[i]);
        }
    }
    void free() {
        if (live_.empty()) return;
        auto it = live_.begin();
        std::advance(it, pick(static_cast<unsigned>(std::min<size_t>(live_.size(), 64))));
        free(it->first);
    }
    void shortLived() {
        const core::AllocFields a = fields(device());
        alloc(a);
        free(a.address);
    }
    void note() {
        both(core::noteBytes(4, 1), [&](RecordWriter& w, uint8_t* p) {
            w.commit(core::encodeNote(p, "test", 4, "x", 1));
        });
    }
    // Both streams sent to here: the readers stand alike after every send, not
    // only at the end (a stack's bytes at a peak that a later one replaces).
    void flush() {
        ASSERT_TRUE(folded.writer->flush());
        ASSERT_TRUE(plain.writer->flush());
        for (auto [w, decoder, read] : {std::tuple{&folded, &foldedDecoder_, &foldedRead_},
                                        std::tuple{&plain, &plainDecoder_, &plainRead_}}) {
            decoder->feed(w->sink.bytes.data() + *read, w->sink.bytes.size() - *read);
            *read = w->sink.bytes.size();
        }
        expectSame(foldedReader, plainReader);
    }

public:
    Counting foldedReader, plainReader;

private:
    core::StreamDecoder foldedDecoder_{foldedReader}, plainDecoder_{plainReader};
    size_t foldedRead_ = 0, plainRead_ = 0;
    // Time moves on by seconds: the reader's buckets widen between two windows.
    void jump() {
        const core::AllocFields a = [&] {
            core::AllocFields x = fields(core::kDeviceCpu);
            x.timeDeltaNs = (1ull << 30) + pick(1u << 30);
            return x;
        }();
        alloc(a);
    }

    struct Block {
        uint8_t device;
        uint64_t size;
        uint64_t tag[2];  // from each writer
    };
    std::mt19937 rng_;
    uint64_t nodes_ = 6;
    uint64_t next_ = 0x10000;
    std::map<uint64_t, Block> live_;
    std::vector<uint64_t> freed_;
    uint64_t bytes_[256] = {};
};

void decode(const std::vector<uint8_t>& bytes, core::Aggregator& into) {
    core::StreamDecoder decoder(into);
    decoder.feed(bytes.data(), bytes.size());
    EXPECT_EQ(decoder.pendingBytes(), 0u);
}

void expectSame(const core::Aggregator& a, const core::Aggregator& b) {
    ASSERT_FALSE(::testing::Test::HasFailure());  // one difference is enough to read
    EXPECT_EQ(a.allocsReceived(), b.allocsReceived());
    EXPECT_EQ(a.freesReceived(), b.freesReceived());
    EXPECT_EQ(a.unmatchedFrees(), b.unmatchedFrees());
    EXPECT_EQ(a.doubleAllocs(), b.doubleAllocs());
    EXPECT_EQ(a.lastTimeNs(), b.lastTimeNs());
    ASSERT_EQ(a.devices().size(), b.devices().size());
    for (const auto& [code, d] : a.devices()) {
        const core::DeviceState& e = b.devices().at(code);
        SCOPED_TRACE("device " + std::to_string(code));
        EXPECT_EQ(d.currentBytes, e.currentBytes);
        EXPECT_EQ(d.peakBytes, e.peakBytes);
        EXPECT_EQ(d.peakTimeNs, e.peakTimeNs);
        EXPECT_EQ(d.allocatedBytes, e.allocatedBytes);
        EXPECT_EQ(d.freedBytes, e.freedBytes);
        EXPECT_EQ(d.allocCount, e.allocCount);
        EXPECT_EQ(d.freeCount, e.freeCount);
        const auto x = d.timeline.samples(), y = e.timeline.samples();
        ASSERT_EQ(x.size(), y.size());
        for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_EQ(x[i].timeNs, y[i].timeNs) << "sample " << i;
            EXPECT_EQ(x[i].bytes, y[i].bytes) << "sample " << i;
        }
        const auto& la = a.liveBlocks(code);
        const auto& lb = b.liveBlocks(code);
        ASSERT_EQ(la.size(), lb.size());
        for (const auto& [address, block] : la) {
            auto it = lb.find(address);
            ASSERT_NE(it, lb.end());
            EXPECT_EQ(block.size, it->second.size);
            const core::StackState& sa = a.stacks()[block.stack];
            const core::StackState& sb = b.stacks()[it->second.stack];
            EXPECT_EQ(sa.nativeNode, sb.nativeNode);
        }
    }
    // Stacks may be numbered in another order: matched by what they are.
    std::map<std::tuple<uint8_t, uint64_t, uint64_t>, const core::StackState*> byKey;
    for (const core::StackState& s : b.stacks()) byKey[{s.device, s.nativeNode, s.pyNode}] = &s;
    ASSERT_EQ(a.stacks().size(), b.stacks().size());
    for (const core::StackState& s : a.stacks()) {
        const core::StackState* t = byKey.at({s.device, s.nativeNode, s.pyNode});
        SCOPED_TRACE("stack " + std::to_string(s.nativeNode) + " on " + std::to_string(s.device));
        EXPECT_EQ(s.allocatedBytes, t->allocatedBytes);
        EXPECT_EQ(s.count, t->count);
        EXPECT_EQ(s.liveBytes, t->liveBytes);
        EXPECT_EQ(s.maxDeviceBytesAtAlloc, t->maxDeviceBytesAtAlloc);
        EXPECT_EQ(a.liveAtPeak(s), b.liveAtPeak(*t));
    }
}

}  // namespace

// Folding pays from 2,000 event records a millisecond, judged over the
// buffer's span to the nanosecond: 24,000 records over 12.9 ms (1,860 a ms) are
// not folded, where a span in whole milliseconds (12) called them fast.
TEST(RecordWriter, ABufferIsFastFromTwoThousandEventsAMillisecond) {
    EXPECT_TRUE(RecordWriter::cameFastOver(24'000, 12'000'000));
    EXPECT_FALSE(RecordWriter::cameFastOver(24'000, 12'900'000));
    EXPECT_TRUE(RecordWriter::cameFastOver(2'000, 1'000'000));
    EXPECT_FALSE(RecordWriter::cameFastOver(2'000, 1'000'001));
    // Fewer than 1,024 records never fold, however fast they came.
    EXPECT_FALSE(RecordWriter::cameFastOver(1'023, 0));
    EXPECT_TRUE(RecordWriter::cameFastOver(1'024, 512'000));
    // A buffer that waited for years does not wrap around into a fast one.
    EXPECT_FALSE(RecordWriter::cameFastOver(65'536, UINT64_MAX));
}

namespace {
// A sink that keeps the writer's shared buffer descriptor (core/Tail.h).
struct TailSink : BufferSink {
    int tail = -1;  // the writer's own descriptor
    void attachTail(int fd) override { tail = fd; }
};
}  // namespace

// The shared buffer's pages come as records fill them (a fork child that
// records a few events must not pay for 64 pages), except in a stream with
// pausable regions, which has them all once it declares one: a paused
// process does not grow by the records it writes meanwhile.
TEST(RecordWriter, ItsBufferIsResidentAsFarAsItIsFilledUntilRegionsAskForAll) {
    TailSink sink;
    auto writer = std::make_unique<RecordWriter>();
    writer->open(&sink, 0, RecordWriter::Folding::Fast);
    ASSERT_GE(sink.tail, 0);
    auto residentBytes = [&] {
        struct stat st {};
        EXPECT_EQ(fstat(sink.tail, &st), 0);
        return static_cast<uint64_t>(st.st_blocks) * 512;  // the memfd's pages
    };
    const uint8_t* p = writeHandshake(*writer);
    EXPECT_LE(residentBytes(), uint64_t{2 * 4096});  // the header's page and the first
    writer->keepResident();
    const std::vector<uint8_t> hs = core::encodeHandshake(core::Handshake{});
    EXPECT_EQ(std::memcmp(p, hs.data(), hs.size()), 0);  // what was written stays
    EXPECT_GE(residentBytes(), uint64_t{RecordWriter::kBufferBytes});
    EXPECT_LE(residentBytes(), uint64_t{RecordWriter::kBufferBytes + 2 * 4096});
}

// A window goes only where it is smaller than its records: in these sparse
// programs some do and some do not, and either way the reader ends the same.
TEST(WindowCompactor, FoldedRecordsLeaveTheReaderWhereTheRecordsWould) {
    size_t windows = 0;
    for (uint32_t seed = 1; seed <= 24; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        Program program(seed);
        program.run(6000);
        const Counting& folded = program.foldedReader;
        const Counting& plain = program.plainReader;
        windows += folded.windows;
        EXPECT_EQ(plain.windows, 0u);
        EXPECT_LE(program.folded.sink.bytes.size(), program.plain.sink.bytes.size());
        expectSame(folded, plain);
        if (HasFailure()) break;
    }
    EXPECT_GT(windows, 24u);
}

// samples/libtorch/alloc_stress's loop: four stacks in turn, each block freed 16
// allocations later, on the coarse clock. A buffer of it is a few windows.
TEST(WindowCompactor, ALoopOfAllocationsTravelsAsAFewWindows) {
    Writer folded{RecordWriter::Folding::Always}, plain{RecordWriter::Folding::Never};
    for (Writer* w : {&folded, &plain}) {
        for (uint64_t n = 1; n <= 4; ++n) {
            uint8_t* p = w->writer->reserve(core::kMaxFixedRecordBytes);
            w->writer->commitDefinition(core::encodeNativeNode(p, 0, 0x1000 + n));
        }
        uint64_t live = 0, tags[64] = {};
        for (uint64_t i = 0; i < 100'000; ++i) {
            core::AllocFields a;
            a.address = 0x7f0000000000 + (i % 64) * 0x1000;
            a.size = 64 + (i % 4) * 64;
            a.nativeNode = 1 + i % 4;
            a.timeDeltaNs = i % 1000 == 0 ? 4'000'000 : 0;
            live += a.size;
            tags[i % 64] = w->writer->prepareEvent();
            w->writer->deferAlloc(a, live);
            if (i < 16) continue;
            core::FreeFields f;
            f.address = 0x7f0000000000 + ((i - 16) % 64) * 0x1000;
            live -= 64 + ((i - 16) % 4) * 64;
            uint8_t* p = w->writer->reserve(core::kMaxFixedRecordBytes);
            w->writer->commitFree(core::encodeFree(p, f), f, live, tags[(i - 16) % 64]);
        }
        ASSERT_TRUE(w->writer->flush());
    }
    Counting a, b;
    decode(folded.sink.bytes, a);
    decode(plain.sink.bytes, b);
    expectSame(a, b);
    EXPECT_EQ(a.allocsReceived(), 100'000u);
    EXPECT_EQ(a.freesReceived(), 99'984u);
    // Seventeen blocks right after an allocation, before its free: four of each
    // size and one more of 256 bytes (alloc_stress's traces say 2,816 too).
    EXPECT_EQ(a.devices().at(0).peakBytes, 4 * (64 + 128 + 192 + 256) + 256);
    EXPECT_EQ(a.liveBlocks(0).size(), 16u);
    // A buffer holds ~20,000 of these records; each goes as one window.
    EXPECT_GE(a.windows, 5u);
    EXPECT_LE(a.windows, 12u);
    EXPECT_LT(folded.sink.bytes.size() * 50, plain.sink.bytes.size());
}

// The shared buffer's header (core/Tail.h) after a folded send names the half
// the folded records went out of, with the count of records the reader got:
// what memtool run reads back after a kill agrees with what it was sent.
TEST(WindowCompactor, TheSharedHeaderNamesTheHalfThatWasSent) {
    TailSink sink;
    auto writer = std::make_unique<RecordWriter>();
    writer->open(&sink, 0, RecordWriter::Folding::Always);
    ASSERT_GE(sink.tail, 0);
    auto header = [&] {
        core::TailHeader h;
        EXPECT_EQ(pread(sink.tail, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
        return h;
    };
    writeHandshake(*writer);
    uint8_t* p = writer->reserve(core::kMaxFixedRecordBytes);
    writer->commitDefinition(core::encodeNativeNode(p, 0, 0x1000));
    uint64_t live = 0;
    for (uint64_t i = 0; i < 1000; ++i) {
        core::AllocFields a;
        a.address = 0x10000 + 0x100 * i;
        a.size = 64;
        a.nativeNode = 1;
        live += 64;
        writer->prepareEvent();
        p = writer->reserve(core::kMaxFixedRecordBytes);
        writer->commitAlloc(core::encodeAlloc(p, a), a, live);
    }
    core::TailHeader before = header();
    EXPECT_EQ(before.half, 0u);
    EXPECT_EQ(before.records[0], 1002u);
    EXPECT_GT(before.used[0], 1000u * 6);
    ASSERT_TRUE(writer->flush());
    const core::TailHeader after = header();
    EXPECT_EQ(after.half, 1u);
    EXPECT_EQ(after.used[1], 0u);     // sent
    EXPECT_EQ(after.records[1], 3u);  // the handshake, the node, one window
    EXPECT_EQ(after.bufferStart, sink.bytes.size());
    Counting reader;
    decode(sink.bytes, reader);
    EXPECT_EQ(reader.windows, 1u);
    EXPECT_EQ(reader.recordsReceived(), 3u);
    EXPECT_EQ(reader.liveBlocks(core::kDeviceCpu).size(), 1000u);  // the writer closes its memfd
}
