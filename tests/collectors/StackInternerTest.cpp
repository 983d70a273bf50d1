// The native stack interner: a stack is the trie node of its innermost frame;
// the thread's last stack is remembered, so a repeat costs no lookup and a stack
// sharing its outer frames with it looks up only the inner ones. Every node new
// to the stream is written once.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "collectors/engine/RecordWriter.h"
#include "collectors/engine/ThreadState.h"
#include "collectors/stacks/StackInterner.h"
#include "tests/collectors/BufferSink.h"

using namespace memtool;
using namespace memtool::collectors;

namespace {

struct Interning {
    BufferSink sink;
    std::unique_ptr<RecordWriter> writer = std::make_unique<RecordWriter>();
    StackInterner interner;
    std::unique_ptr<ThreadState> ts = std::make_unique<ThreadState>();
    Interning() { writer->open(&sink, 0); }
    uint32_t intern(std::vector<uint64_t> innermostFirst) {
        return interner.native(*ts, innermostFirst.data(), static_cast<int>(innermostFirst.size()),
                               0, *writer);
    }
    // Frames in place, as the engine's walks leave them in the walk memo.
    uint32_t internAt(const uint64_t* ips, int count, uint64_t walkSerial) {
        return interner.native(*ts, ips, count, walkSerial, *writer);
    }
    // Node records written so far (nothing else is written here).
    uint64_t written() const { return writer->records(); }
};

}  // namespace

TEST(StackInterner, EachStackIsItsInnermostNodeAndEachNodeIsWrittenOnce) {
    Interning t;
    const uint64_t main = 0x1000, loop = 0x2000, a = 0x3000, b = 0x4000, c = 0x5000;
    const uint32_t first = t.intern({a, loop, main});
    EXPECT_EQ(first, 3u);
    EXPECT_EQ(t.intern({a, loop, main}), first);       // the last stack again
    const uint32_t other = t.intern({b, loop, main});  // shares the outer two
    EXPECT_EQ(other, 4u);
    EXPECT_EQ(t.intern({c, b, loop, main}), 5u);  // deeper, the last one as its outer part
    EXPECT_EQ(t.intern({loop, main}), 2u);        // shallower: a node already written
    EXPECT_EQ(t.intern({a, loop, main}), first);  // back to the first, through the trie
    EXPECT_EQ(t.intern({}), 0u);

    // main, loop, a; b; c: each once, ids dense in that order.
    EXPECT_EQ(t.interner.nativeCount(), 5u);
    EXPECT_EQ(t.written(), 5u);
}

TEST(StackInterner, ANewGenerationForgetsTheThreadsLastStack) {
    Interning t;
    const uint32_t before = t.intern({0x3000, 0x2000, 0x1000});
    t.interner.reset();
    EXPECT_EQ(t.intern({0x3000, 0x2000, 0x1000}), before);  // ids start again
    EXPECT_EQ(t.written(), 6u);                             // and every node is written again
}

// A replayed walk leaves the very frames of a kept walk where they were: the
// same serial at the same place as the thread's last stack is that stack, and
// its node comes without comparing a frame. Anything else is compared: another
// serial, another place, no serial, or a stack that was cut short.
TEST(StackInterner, TheSameKeptWalkInPlaceIsTheLastStackUncompared) {
    Interning t;
    uint64_t frames[3] = {0x3000, 0x2000, 0x1000};
    const uint32_t first = t.internAt(frames, 3, 7);
    EXPECT_EQ(first, 3u);
    // What the serial stands for: were the frames to differ (they cannot, when
    // the memo replays), the node would still be the last one. Nothing is compared.
    frames[0] = 0x3100;
    EXPECT_EQ(t.internAt(frames, 3, 7), first);
    EXPECT_EQ(t.written(), 3u);
    // The same frames under another serial, or none, are compared: a new node.
    EXPECT_EQ(t.internAt(frames, 3, 8), 4u);
    EXPECT_EQ(t.written(), 4u);
    frames[0] = 0x3200;
    EXPECT_EQ(t.internAt(frames, 3, 0), 5u);
    EXPECT_EQ(t.internAt(frames, 3, 0), 5u);  // compared, equal
    // Serial 0 never stands for anything, even twice at one place.
    frames[0] = 0x3300;
    EXPECT_EQ(t.internAt(frames, 3, 0), 6u);
    // The right serial at another place, or with another depth, is compared too.
    t.internAt(frames, 3, 9);
    uint64_t copy[3] = {0x3400, 0x2000, 0x1000};
    EXPECT_EQ(t.internAt(copy, 3, 9), 7u);
    EXPECT_EQ(t.internAt(copy + 1, 2, 9), 2u);
    EXPECT_EQ(t.written(), 7u);
    // A new generation forgets the serial with the stack.
    t.internAt(copy, 3, 10);
    t.interner.reset();
    copy[0] = 0x3500;
    EXPECT_EQ(t.internAt(copy, 3, 10), 3u);  // ids start again: 0x1000, 0x2000, 0x3500
}

// A thread's last stack outlives the interner that made it (the engines of a
// test binary, one after another on one thread): another interner, once reset,
// never takes its nodes, by comparison or by a walk's serial.
TEST(StackInterner, AnotherInternerNeverTakesTheThreadsLastStack) {
    Interning first, second;
    first.interner.reset();
    uint64_t frames[3] = {0x3000, 0x2000, 0x1000};
    EXPECT_EQ(first.internAt(frames, 3, 5), 3u);
    EXPECT_EQ(first.internAt(frames, 3, 6), 3u);  // its nodes: 1, 2, 3
    second.ts = std::move(first.ts);              // the same thread
    second.interner.reset();
    frames[0] = 0x4000;                            // the outer two in common with the last stack
    EXPECT_EQ(second.internAt(frames, 3, 7), 3u);  // 0x1000, 0x2000, 0x4000: ids from 1
    EXPECT_EQ(second.written(), 3u);
    frames[0] = 0x3000;
    first.ts = std::move(second.ts);  // back to the first, whose stack was 0x3000's
    first.interner.reset();
    EXPECT_EQ(first.internAt(frames, 3, 7), 3u);  // written again: a new stream
    EXPECT_EQ(first.written(), 6u);
}
