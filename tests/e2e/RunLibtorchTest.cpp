// The LibTorch C++ sample (no Python) under the real `memtool run`, and a LibTorch
// program whose allocating functions are inlined (tests/programs/InlinedUser.cpp).
#include <gtest/gtest.h>

#include <algorithm>

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

namespace {

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A hotspot whose site is `function` at `line` of `source`, called from main at
// `callerLine` (the next frame out that is the user's own), with `bytes`.
void expectInlinedSite(const nlohmann::json& process, const std::string& source,
                       const std::string& function, int line, int callerLine, int bytes) {
    SCOPED_TRACE(function);
    const auto hotspot = hotspotWithSite(process, function + " (");
    ASSERT_FALSE(hotspot.is_null()) << process.at("hotspots").dump(1);
    EXPECT_EQ(hotspot.at("allocated_bytes"), bytes);
    const auto& frames = process.at("frames");
    const auto& ids = hotspot.at("frames");
    const auto at = std::find(ids.begin(), ids.end(), hotspot.at("site_frame"));
    ASSERT_NE(at, ids.end()) << hotspot.dump(1);
    const auto& site = frames.at(at->get<size_t>());
    EXPECT_EQ(site.at("function"), function);
    EXPECT_TRUE(endsWith(site.at("file"), source)) << site.dump();
    EXPECT_EQ(site.at("line"), line);
    const auto caller = std::find_if(at + 1, ids.end(), [&](const nlohmann::json& id) {
        return frames.at(id.get<size_t>()).at("user").get<bool>();
    });
    ASSERT_NE(caller, ids.end()) << hotspot.dump(1);
    EXPECT_EQ(frames.at(caller->get<size_t>()).at("function"), "main");
    EXPECT_EQ(frames.at(caller->get<size_t>()).at("line"), callerLine);
}

}  // namespace

// -O2 inlined Net::forward into main and Holder's constructor into std::make_shared's
// code (itself inlined into main): each is a frame of its own at its own line, the
// site, and the headers' frames around them (ATen's, shared_ptr.h's) are library code.
TEST(RunLibtorch, InlinedFunctionsAreSitesAtTheirOwnLines) {
    if (std::string(INLINED_USER_BIN).empty()) GTEST_SKIP() << "built without LibTorch";
    Profiled p = profile({INLINED_USER_BIN});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto& proc = p.process();
    const auto& cpu = proc.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 2);
    EXPECT_EQ(cpu.at("allocated_bytes"), 3700000);
    const std::string source = "/tests/programs/InlinedUser.cpp";

    expectInlinedSite(proc, source, "Net::forward(long)", 17, 29, 3000000);
    expectInlinedSite(proc, source, "Holder::Holder(long)", 23, 30, 700000);

    // The line table charges each line its bytes, the inlined function's as its own.
    struct Row {
        int line, allocated, self;
    };
    for (const Row& r : {Row{17, 3000000, 3000000}, Row{29, 3000000, 0}, Row{23, 700000, 700000},
                         Row{30, 700000, 0}}) {
        const auto row = lineRow(proc, source, r.line);
        ASSERT_FALSE(row.is_null()) << r.line << proc.at("lines").dump(1);
        EXPECT_EQ(row.at("allocated_bytes"), r.allocated) << r.line;
        EXPECT_EQ(row.at("self_allocated_bytes"), r.self) << r.line;
    }
}
