// CUDA device memory through the CUPTI injection, on a real GPU. Without one (CI,
// this project's development machines) every test here skips and says why.
#include <gtest/gtest.h>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

#ifdef CUDA_SAMPLE_BIN
namespace {
bool gpuUsable(std::string* why) {
    Outcome probe = run({CUDA_SAMPLE_BIN, "--probe"});
    if (probe.exitCode == 0) return true;
    *why = "no usable CUDA GPU on this machine (cuda_sample --probe exited " + std::to_string(probe.exitCode) +
           "); the CUDA checks need one";
    return false;
}
}  // namespace

TEST(RunCuda, DeviceMemoryOfAPlainCudaProgram) {
    std::string why;
    if (!gpuUsable(&why)) GTEST_SKIP() << why;
    Profiled p = profile({CUDA_SAMPLE_BIN});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    ASSERT_EQ(p.outcome.out.rfind("granularity ", 0), 0u) << p.outcome.out;
    const uint64_t g = std::stoull(p.outcome.out.substr(12));
    const auto& proc = p.process();
    EXPECT_TRUE(proc.at("complete").get<bool>());
    const auto& cuda = proc.at("devices").at("cuda:0");
    EXPECT_EQ(cuda.at("source"), "cupti");
    EXPECT_EQ(cuda.at("allocated_bytes"), 3000000 + 2000000 + 500000 + g + 700000);
    EXPECT_EQ(cuda.at("alloc_count"), 5);
    EXPECT_EQ(cuda.at("peak_bytes"), std::max<uint64_t>(5000000, 3000000 + g));
    EXPECT_EQ(cuda.at("current_bytes"), 700000);  // leakOnPurpose
    const auto& pinned = proc.at("devices").at("pinned");
    EXPECT_EQ(pinned.at("allocated_bytes"), 1000000);
    EXPECT_EQ(pinned.at("current_bytes"), 0);
    auto keep = hotspotWithSite(proc, "keepActivations", "cuda:0");
    ASSERT_FALSE(keep.is_null()) << proc.at("hotspots").dump(1);
    EXPECT_EQ(keep.at("allocated_bytes"), 3000000);
    auto leak = hotspotWithSite(proc, "leakOnPurpose", "cuda:0");
    ASSERT_FALSE(leak.is_null());
    EXPECT_EQ(leak.at("leaked_bytes"), 700000);
    auto vmm = hotspotWithSite(proc, "vmmChunk", "cuda:0");
    ASSERT_FALSE(vmm.is_null());
    EXPECT_EQ(vmm.at("allocated_bytes"), g);
}
#endif
