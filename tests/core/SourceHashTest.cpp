// The hash trace.json keeps of each source file: 64-bit FNV-1a, as its published
// test vectors have it, and its text form, which a trace may carry spoiled.
#include <gtest/gtest.h>

#include "core/SourceHash.h"

using namespace memtool::core;

TEST(SourceHash, IsFnv1a64) {
    EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);  // the offset basis
    EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
    EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
    // Bytes past 0x7f count as themselves, not as negative chars.
    EXPECT_EQ(fnv1a64("\xff"), 0xaf64724c8602eb6eULL);
}

TEST(SourceHash, TextIsSixteenLowercaseHexDigits) {
    EXPECT_EQ(hashText(0xaf63dc4c8601ec8cULL), "af63dc4c8601ec8c");
    EXPECT_EQ(hashText(0x1f), "000000000000001f");
    EXPECT_EQ(parseHashText("af63dc4c8601ec8c"), 0xaf63dc4c8601ec8cULL);
    EXPECT_EQ(parseHashText("000000000000001f"), 0x1fULL);
    for (const char* bad :
         {"", "af63dc4c8601ec8", "af63dc4c8601ec8c0", "AF63DC4C8601EC8C", "+f63dc4c8601ec8c",
          " f63dc4c8601ec8c", "af63dc4c8601ec8g", "0xf3dc4c8601ec8c"})
        EXPECT_FALSE(parseHashText(bad).has_value()) << bad;
}
