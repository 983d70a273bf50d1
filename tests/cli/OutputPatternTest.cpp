// `memtool run -o`: one trace file, or one per process (%p) or per rank (%r).
#include <gtest/gtest.h>

#include "cli/run/OutputPattern.h"

using namespace memtool;

namespace {

core::ProcessTrace process(int64_t pid, std::optional<int64_t> rank) {
    core::ProcessTrace p;
    p.pid = pid;
    p.rank = rank;
    return p;
}

}  // namespace

TEST(OutputPattern, ExpandsPidRankAndPercent) {
    EXPECT_EQ(cli::expandOutputPattern("t-%p.json", process(42, 1)), "t-42.json");
    EXPECT_EQ(cli::expandOutputPattern("rank%r-%p.json", process(42, 1)), "rank1-42.json");
    EXPECT_EQ(cli::expandOutputPattern("rank%r.json", process(42, std::nullopt)), "ranknone.json");
    EXPECT_EQ(cli::expandOutputPattern("100%%-%x%", process(42, 1)), "100%-%x%");
    EXPECT_TRUE(cli::isPerProcessPattern("a%pb"));
    EXPECT_TRUE(cli::isPerProcessPattern("%r"));
    EXPECT_FALSE(cli::isPerProcessPattern("100%%p.json"));
    EXPECT_FALSE(cli::isPerProcessPattern("trace.json%"));
}

TEST(OutputPattern, ARankAndTheWorkersItForkedShareAFile) {
    core::Trace trace;
    trace.memtoolVersion = "9";
    trace.processes = {process(10, std::nullopt), process(11, 0), process(12, 1), process(13, 0)};
    const auto files = cli::splitByOutputPattern(trace, "rank%r.json");
    ASSERT_EQ(files.size(), 3u);
    EXPECT_EQ(files[0].first, "ranknone.json");
    EXPECT_EQ(files[1].first, "rank0.json");
    ASSERT_EQ(files[1].second.processes.size(), 2u);
    EXPECT_EQ(files[1].second.processes[1].pid, 13);
    EXPECT_EQ(files[1].second.memtoolVersion, "9");
    EXPECT_EQ(files[2].first, "rank1.json");
    const auto one = cli::splitByOutputPattern(trace, "all.json");
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].second.processes.size(), 4u);
}
