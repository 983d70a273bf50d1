// The LibTorch C++ sample (no Python) under the real `memtool run`.
#include <gtest/gtest.h>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

#ifdef LIBTORCH_SAMPLE_BIN
TEST(RunLibtorch, ExactBytesPeakAndLeak) {
    Profiled p = profile({LIBTORCH_SAMPLE_BIN});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto& proc = p.process();
    EXPECT_TRUE(proc.at("complete").get<bool>());
    const auto& cpu = proc.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 3);
    EXPECT_EQ(cpu.at("allocated_bytes"), 4500000);
    EXPECT_EQ(cpu.at("peak_bytes"), 4500000);
    EXPECT_EQ(cpu.at("current_bytes"), 500000);  // keepForever's tensor is never freed
}

TEST(RunLibtorch, NativeHotspotsNameTheCppFunction) {
    Profiled p = profile({LIBTORCH_SAMPLE_BIN});
    const auto& proc = p.process();
    auto acts = hotspotWithSite(proc, "makeActivations");
    ASSERT_FALSE(acts.is_null()) << proc.at("hotspots").dump(1);
    EXPECT_NE(acts.at("site").get<std::string>().find("libtorch_sample.cpp:"), std::string::npos);
    EXPECT_EQ(acts.at("allocated_bytes"), 3000000);
    EXPECT_EQ(acts.at("peak_bytes"), 3000000);
    auto leak = hotspotWithSite(proc, "keepForever");
    ASSERT_FALSE(leak.is_null());
    EXPECT_EQ(leak.at("leaked_bytes"), 500000);
    auto scratch = hotspotWithSite(proc, "scratch");
    ASSERT_FALSE(scratch.is_null());
    EXPECT_EQ(scratch.at("allocated_bytes"), 1000000);
    EXPECT_EQ(scratch.at("peak_bytes"), 1000000);  // live at the peak, with the other two
    EXPECT_EQ(scratch.at("leaked_bytes"), 0);
}

TEST(RunLibtorch, LoopOfSmallTensorsIsCountedExactly) {
    Profiled p = profile({LIBTORCH_SAMPLE_BIN, "1000"});
    const auto& cpu = p.process().at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 1003);
    EXPECT_EQ(cpu.at("allocated_bytes"), 4500000 + 1000 * 256);
    EXPECT_EQ(p.process().at("stream").at("verified"), true);
}
#endif
