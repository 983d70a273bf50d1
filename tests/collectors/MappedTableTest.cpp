#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "collectors/engine/MappedTable.h"

using namespace memtool::collectors;

TEST(PointerMap, MatchesAReferenceMapThroughGrowthAndDeletion) {
    PointerMap map;
    std::unordered_map<uint64_t, uint64_t> ref;
    std::mt19937_64 rng(7);
    for (int i = 0; i < 200000; ++i) {
        // Addresses cluster like a real heap (64-byte aligned, a small range) so
        // probe runs collide and deletions must shift entries back.
        uint64_t ptr = 0x7f0000000000ull + (rng() % 50000) * 64;
        if (rng() % 3 == 0) {
            uint64_t size = 0;
            bool had = ref.erase(ptr) == 1;
            EXPECT_EQ(map.erase(ptr, &size), had);
        } else if (!ref.count(ptr)) {
            ref[ptr] = i;
            ASSERT_TRUE(map.insert(ptr, i));
        }
    }
    EXPECT_EQ(map.size(), ref.size());
    for (const auto& [ptr, size] : ref) {
        uint64_t got = 0;
        ASSERT_TRUE(map.erase(ptr, &got));
        EXPECT_EQ(got, size);
    }
    EXPECT_EQ(map.size(), 0u);
    uint64_t size;
    EXPECT_FALSE(map.erase(0x1234, &size));
}

// A table starts small and grows with what it holds: a hash spreads its keys
// over every page it has, and each page first touched is a page fault.
TEST(PointerMap, StartsAtAFewPagesAndGrowsWithItsKeys) {
    PointerMap map;
    for (uint64_t i = 1; i <= 100; ++i) ASSERT_TRUE(map.insert(i * 64, i));
    EXPECT_EQ(map.mappedBytes(), 256u * 16);  // 256 slots of 16 bytes: one page
    for (uint64_t i = 101; i <= 10000; ++i) ASSERT_TRUE(map.insert(i * 64, i));
    EXPECT_EQ(map.mappedBytes(), 32768u * 16);  // at most half full
}

TEST(FrameTrie, IdsAreDenseAndStable) {
    FrameTrie trie;
    bool created;
    EXPECT_EQ(trie.findOrInsert(0, 0xAAA, &created), 1u);
    EXPECT_TRUE(created);
    EXPECT_EQ(trie.findOrInsert(1, 0xBBB, &created), 2u);
    EXPECT_EQ(trie.findOrInsert(0, 0xBBB, &created), 3u);  // same key, other parent
    EXPECT_EQ(trie.findOrInsert(1, 0xBBB, &created), 2u);
    EXPECT_FALSE(created);
    for (uint32_t i = 0; i < 100000; ++i) trie.findOrInsert(i % 7, 0x5000 + i, &created);
    EXPECT_EQ(trie.size(), 100003u);
    EXPECT_EQ(trie.findOrInsert(0, 0xAAA, &created), 1u);
    EXPECT_FALSE(created);
}

// clear() gives the pages back and keeps the capacity: what was in is gone and
// the table fills again as a new one would.
TEST(PointerMap, ClearEmptiesItAndKeepsItsPages) {
    PointerMap map;
    for (uint64_t i = 1; i <= 1000; ++i) ASSERT_TRUE(map.insert(i * 64, i));
    const size_t bytes = map.mappedBytes();
    map.clear();
    EXPECT_EQ(map.size(), 0u);
    EXPECT_EQ(map.mappedBytes(), bytes);
    uint64_t value = 0;
    EXPECT_FALSE(map.find(64, &value));
    ASSERT_TRUE(map.insert(128, 7));
    EXPECT_TRUE(map.find(128, &value));
    EXPECT_EQ(value, 7u);
    EXPECT_FALSE(map.find(192, &value));
}

TEST(FrameTrie, ClearStartsTheIdsAgain) {
    FrameTrie trie;
    bool created;
    for (uint32_t i = 0; i < 1000; ++i) trie.findOrInsert(0, 0x5000 + i, &created);
    trie.clear();
    EXPECT_EQ(trie.size(), 0u);
    EXPECT_EQ(trie.findOrInsert(0, 0x5003, &created), 1u);
    EXPECT_TRUE(created);
    EXPECT_EQ(trie.findOrInsert(0, 0x5000, &created), 2u);
    EXPECT_TRUE(created);
}
