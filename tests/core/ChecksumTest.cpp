// The verified pause's checksum (core/Checksum.h): what it is for a known
// input, that a changed or swapped word changes it, and that parts add up to
// the whole in any order (what lets a device add its terms in parallel).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/Checksum.h"

using memtool::core::checksumTerm;
using memtool::core::checksumWords;

TEST(Checksum, KnownWordsGiveKnownSums) {
    // splitmix64's first outputs from seed 0 are the terms of zero words at
    // indexes 0 and 1.
    EXPECT_EQ(checksumTerm(0, 0), 0xe220a8397b1dcdafull);
    EXPECT_EQ(checksumTerm(0, 1), 0x6e789e6aa1b965f4ull);
    const std::vector<uint64_t> zeros(2, 0);
    EXPECT_EQ(checksumWords(zeros.data(), 2), 0xe220a8397b1dcdafull + 0x6e789e6aa1b965f4ull);
}

TEST(Checksum, AChangedOrSwappedWordChangesTheSum) {
    std::vector<uint64_t> words(4096);
    for (size_t i = 0; i < words.size(); ++i) words[i] = i * 0x0101010101010101ull;
    const uint64_t sum = checksumWords(words.data(), words.size());
    std::vector<uint64_t> changed = words;
    changed[1000] ^= 1ull << 63;
    EXPECT_NE(checksumWords(changed.data(), changed.size()), sum);
    std::vector<uint64_t> swapped = words;
    std::swap(swapped[7], swapped[3000]);
    EXPECT_NE(checksumWords(swapped.data(), swapped.size()), sum);
}

TEST(Checksum, PartsAddUpToTheWholeInAnyOrder) {
    std::vector<uint64_t> words(1000);
    for (size_t i = 0; i < words.size(); ++i) words[i] = i * i * 2654435761ull;
    const uint64_t whole = checksumWords(words.data(), words.size());
    const uint64_t tail = checksumWords(words.data() + 600, 400, 600);
    const uint64_t head = checksumWords(words.data(), 600, 0);
    EXPECT_EQ(tail + head, whole);
}

TEST(Checksum, EveryWayOfAddingGivesTheSameSum) {
    std::vector<uint64_t> words(1003);  // not a multiple of eight
    for (size_t i = 0; i < words.size(); ++i) words[i] = ~i * 0x9E3779B97F4A7C15ull;
    const uint64_t scalar = memtool::core::checksumWordsScalar(words.data(), words.size(), 5);
    EXPECT_EQ(checksumWords(words.data(), words.size(), 5), scalar);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        EXPECT_EQ(memtool::core::checksumWordsAvx512(words.data(), words.size(), 5), scalar);
    else
        GTEST_SKIP() << "no AVX-512 here: only the word-at-a-time sum ran";
#endif
}
