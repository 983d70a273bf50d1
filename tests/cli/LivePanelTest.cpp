// The live view's panel as text: the sparkline, the history behind it, and the
// layout in a given width and height (the terminal part runs under tmux in
// tests/e2e/LiveViewTest.cpp).
#include <gtest/gtest.h>

#include "cli/live/LivePanel.h"

using namespace memtool;

TEST(LivePanel, SparklineInEighthsOfTheTop) {
    // ceil(8 * v / top) eighths: 1 and 100 one, 125 and 126 two, 500 five, 799 and 800 eight.
    EXPECT_EQ(cli::sparkline({0, 1, 100, 125, 126, 500, 799, 800}, 800, false), " ..::+@@");
    EXPECT_EQ(cli::sparkline({0, 1, 400, 800}, 800, true), " \u2581\u2584\u2588");
    EXPECT_EQ(cli::sparkline({5}, 0, true), " ");
}

TEST(LivePanel, HistoryColumnsHoldTheMostOfTheirStretch) {
    // 0..400 ns in 4 columns of 100 ns: 10 B at 50, 30 B at 60 and back to 20 B at
    // 70 (column 0 saw 30); nothing in column 1 (20 B held); 0 B at 250; 5 B at 399.
    const std::vector<core::TimelineSample> samples{
        {50, 10}, {60, 30}, {70, 20}, {250, 0}, {399, 5}};
    EXPECT_EQ(cli::historyColumns(samples, 4, 400), (std::vector<uint64_t>{30, 20, 20, 5}));
    // Now long after the last sample: the run spreads over twice the columns' time.
    EXPECT_EQ(cli::historyColumns(samples, 4, 800), (std::vector<uint64_t>{30, 20, 5, 5}));
    EXPECT_EQ(cli::historyColumns({}, 3, 100), (std::vector<uint64_t>{0, 0, 0}));
}

namespace {

cli::LiveSnapshot snapshot() {
    cli::LiveSnapshot s;
    s.elapsedS = 12.4;
    s.command = "python3 train.py";
    s.devices = {{"cpu", 3000000, 4000000, {0, 1000000, 4000000, 3000000}}};
    s.sites = {{"cpu", "<module> (train.py:9)", 2000000},
               {"cpu", "make_batch (train.py:4)", 600000},
               {"cpu", "step (train.py:7)", 400000}};
    s.regions = {{"kv", "cpu", "paused", 1000000, 1000000}};
    return s;
}

}  // namespace

TEST(LivePanel, TitleDevicesSitesAndRegions) {
    const auto lines = cli::renderLivePanel(snapshot(), 80, 9, false);
    EXPECT_EQ(lines, (std::vector<std::string>{
                         "-- memtool live - 12 s - python3 train.py ----------------- q: leave the "
                         "view --",
                         "  cpu          now     2.86 MiB  peak     3.81 MiB   :@*",
                         " held now, by site", "      1.91 MiB  cpu      <module> (train.py:9)",
                         "    585.94 KiB  cpu      make_batch (train.py:4)",
                         "    390.62 KiB  cpu      step (train.py:7)", " regions",
                         "  kv               cpu      paused           976.56 KiB  (976.56 KiB "
                         "paused)",
                         ""}));
    for (const auto& l : lines) EXPECT_LE(l.size(), 80u);
}

// A DataLoader's workers: several streams, so each device reads "pid N shared"; its
// rows' columns used to shift against the launched process's "pid N cpu".
TEST(LivePanel, ColumnsHoldTheirPlaceWithProcessesNamed) {
    cli::LiveSnapshot s = snapshot();
    s.devices = {{"pid 41 cpu", 3000000, 4000000, {}}, {"pid 4242 shared", 2000000, 2000000, {}}};
    s.sites = {{"pid 41 cpu", "<module> (train.py:9)", 2000000},
               {"pid 4242 shared", "fetch (worker.py:3)", 2000000}};
    s.regions = {};
    const auto lines = cli::renderLivePanel(s, 100, 7, false);
    EXPECT_EQ(lines.at(1), "  pid 41 cpu      now     2.86 MiB  peak     3.81 MiB  ");
    EXPECT_EQ(lines.at(2), "  pid 4242 shared now     1.91 MiB  peak     1.91 MiB  ");
    EXPECT_EQ(lines.at(4), "      1.91 MiB  pid 41 cpu      <module> (train.py:9)");
    EXPECT_EQ(lines.at(5), "      1.91 MiB  pid 4242 shared fetch (worker.py:3)");
}

TEST(LivePanel, SitesGiveWayWhenLinesRunShort) {
    // Six lines: the title, the device, two sites, the regions.
    const auto lines = cli::renderLivePanel(snapshot(), 60, 6, true);
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_EQ(lines[0].rfind("\u2500\u2500 memtool live \u00b7 12 s \u00b7", 0), 0u) << lines[0];
    EXPECT_EQ(lines[2], " held now, by site");
    EXPECT_EQ(lines[3], "      1.91 MiB  cpu      <module> (train.py:9)");
    EXPECT_EQ(lines[4], " regions");
    EXPECT_EQ(lines[5], "  kv               cpu      paused           976.56 KiB  (97");
}

TEST(LivePanel, LinesAreCutToTheWidthNeverInsideACharacter) {
    const auto lines = cli::renderLivePanel(snapshot(), 30, 3, true);
    // The title's rule is three bytes a column: 30 columns, never a broken character.
    size_t columns = 0;
    for (char c : lines[0]) columns += (c & 0xC0) != 0x80;
    EXPECT_EQ(columns, 30u);
    EXPECT_EQ(lines[1], "  cpu          now     2.86 Mi");
}

TEST(LivePanel, BeforeTheFirstAllocation) {
    cli::LiveSnapshot s;
    s.command = "x";
    const auto lines = cli::renderLivePanel(s, 60, 3, false);
    EXPECT_EQ(lines[1], "  waiting for the program's first allocation");
    EXPECT_EQ(lines[2], "");
}

TEST(LivePanel, PolledDevicesAndThePolicyShowUnderTheDevices) {
    cli::LiveSnapshot s = snapshot();
    s.sites.clear();
    s.polled = {"polled cpu 4.10 GiB of 24.00 GiB (17%)",
                "policy 1 action, last: pid 42 rule 1: pause kv to disk ok"};
    const auto lines = cli::renderLivePanel(s, 80, 6, false);
    EXPECT_EQ(lines[2], " polled cpu 4.10 GiB of 24.00 GiB (17%)");
    EXPECT_EQ(lines[3], " policy 1 action, last: pid 42 rule 1: pause kv to disk ok");
    EXPECT_EQ(lines[4], " regions");
}
