// Ascend NPU memory under the real CLI, with the test double of the ACL runtime
// (tests/fakes/FakeAscendCl.cpp, named libascendcl.so): a program that allocates
// as torch_npu does (aclrtMallocAlign32 through dlopen + dlsym, aclrtFree through
// its import) is recorded on npu:0 with its stacks, its region is paused and
// resumed at the same address, and an allocation the device cannot take is
// captured as an out-of-memory event.
#include <gtest/gtest.h>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

Outcome runNpuRegionUser(const std::vector<std::string>& options,
                         const std::vector<std::string>& args,
                         const std::vector<std::string>& extraEnv = {}) {
    std::vector<std::string> command{MEMTOOL_BIN, "run", "-q"};
    command.insert(command.end(), options.begin(), options.end());
    command.push_back("--");
    command.push_back(NPU_REGION_USER_BIN);
    command.insert(command.end(), args.begin(), args.end());
    std::vector<std::string> env{"MEMTOOL_CONTROL_DIR=" + controlDir()};
    env.insert(env.end(), extraEnv.begin(), extraEnv.end());
    return run(command, "", env);
}

// tests/e2e/scripts/npu_regions.py in one of its modes, traced to `trace`.
Outcome runNpuScript(const std::string& mode, const std::string& trace) {
    return run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("npu_regions.py"),
                FAKE_ASCEND_CL, mode},
               "", {"MEMTOOL_CONTROL_DIR=" + controlDir()});
}

}  // namespace

TEST(Npu, TorchNpusAllocationRoutesAreRecordedAndTheRegionPausesKeepingItsAddress) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runNpuRegionUser({"-o", trace}, {});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    // Outside: 1,000,000 bytes rounded to 32 by aclrtMallocAlign32. The region's
    // 3,000,000 bytes take two 2 MiB granules, all of it released on pause and
    // back with its content on resume; the host backup's pinned memory is freed.
    EXPECT_EQ(o.out,
              "outside 1000000 held 4194304 paused 0 0 resumed 0 same freed 0 pinned 0 left 0\n");
    const auto doc = readJson(trace);
    const auto& p = doc.at("processes").at(0);
    const auto& npu0 = p.at("devices").at("npu:0");
    EXPECT_EQ(npu0.at("allocated_bytes"), 4500000);
    EXPECT_EQ(npu0.at("peak_bytes"), 4000000);
    EXPECT_EQ(npu0.at("current_bytes"), 0);
    EXPECT_EQ(npu0.at("alloc_count"), 3);
    EXPECT_EQ(npu0.at("source"), "acl");
    ASSERT_EQ(p.at("control").size(), 2u);
    EXPECT_EQ(p.at("control").at(0).at("device"), "npu:0");
    EXPECT_EQ(p.at("control").at(0).at("bytes"), 4194304);
    EXPECT_EQ(p.at("control").at(0).at("backup"), "host");
    EXPECT_EQ(p.at("regions").at(0).at("tag"), "kv");
    EXPECT_EQ(p.at("regions").at(0).at("device"), "npu:0");
    // Each allocation at its call in main (native stacks): the hotspots name the
    // program's lines, the region's first (it held the most at the peak).
    Outcome report = run({MEMTOOL_BIN, "report", trace, "--bytes", "exact"});
    ASSERT_EQ(report.exitCode, 0) << report.err;
    EXPECT_NE(report.out.find("npu:0 (acl)                    4,000,000 B"), std::string::npos)
        << report.out;
    const size_t top = report.out.find("Top 3 hotspots on npu:0 by peak");
    ASSERT_NE(top, std::string::npos) << report.out;
    EXPECT_NE(report.out.find("1       3,000,000 B       3,000,000 B        1               0 B  "
                              "main (NpuRegionUser.cpp:",
                              top),
              std::string::npos)
        << report.out;
    // A CI gate on the NPU's peak.
    Outcome gate = run({MEMTOOL_BIN, "check", trace, "--max-peak", "npu:0=3900000B"});
    EXPECT_EQ(gate.exitCode, 1) << gate.out << gate.err;
    Outcome pass = run({MEMTOOL_BIN, "check", trace, "--max-peak", "npu=4000000B"});
    EXPECT_EQ(pass.exitCode, 0) << pass.out << pass.err;
}

TEST(Npu, AnAllocationTheDeviceCannotTakeIsCapturedAsOutOfMemory) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runNpuRegionUser({"-o", trace}, {"oom"}, {"FAKE_NPU_CAPACITY=1000000"});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "oom rc 207001\n");
    const auto doc = readJson(trace);
    const auto& oom = doc.at("processes").at(0).at("oom");
    ASSERT_EQ(oom.size(), 1u) << oom.dump();
    EXPECT_EQ(oom.at(0).at("device"), "npu:0");
    EXPECT_EQ(oom.at(0).at("requested_bytes"), 2000000);
}

// The dlsym hook answers only lookups of the names memtool serves, made with a
// handle: RTLD_NEXT keeps the program's place in the load order (the collector's
// dlopen is the next after the program, the C library's the next after the
// collector), and another name is the runtime's.
TEST(Npu, OtherLookupsGoToTheirOwnLibraryUntouched) {
    Outcome o = runNpuRegionUser({"-o", tempDir() + "/t.json"}, {"lookups"});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "dlopen libmemtool_collector.so next libascendcl.so other libascendcl.so\n");
}

// From Python with no torch_npu: the runtime called through ctypes (whose
// lookups are dlsym with the library's handle, as torch_npu's), memtool.region
// with device="npu", and torch_memory_saver's API over the same memory.
TEST(Npu, ThePythonApiAndTheTorchMemorySaverShimPauseNpuMemory) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runNpuScript("api", trace);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "pause True 4194304 0 4194304\n"
              "[('kv', 'npu:0', 'paused')]\n"
              "resume True 4194304 4194304 True\n"
              "freed 0\n");
    EXPECT_EQ(readJson(trace).at("processes").at(0).at("devices").at("npu:0").at("peak_bytes"),
              3000000);

    o = runNpuScript("shim", trace);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // 5,000,000 + 1,000,000 bytes in 3 + 1 granules of 2 MiB: all released.
    EXPECT_EQ(o.out, "paused 8388608 0\nresumed 8388608 True\n");
    const auto doc = readJson(trace);
    const auto& control = doc.at("processes").at(0).at("control");
    ASSERT_EQ(control.size(), 4u) << control.dump();
    EXPECT_EQ(control.at(0).at("device"), "npu:0");
    EXPECT_EQ(control.at(0).at("backup"), "host");
    EXPECT_EQ(control.at(0).at("bytes"), 6291456);
    EXPECT_EQ(control.at(1).at("backup"), "none");
    EXPECT_EQ(control.at(1).at("bytes"), 2097152);
}

// Courtesy on an NPU: a region with no backup of its own yields its memory to
// host memory and gets it back, content and all.
TEST(Npu, AYieldTakesNpuMemoryToTheHostAndARestoreBringsItBack) {
    Outcome o = runNpuScript("yield", tempDir() + "/t.json");
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "yield True 4194304 0\n"
              "paused 4194304 bytes in 1 allocation\n"
              "restore True 4194304 4194304 True\n");
}

// torch_npu's NPUPluggableAllocator (the torch hook mode) calls memtool_npu_malloc
// and memtool_npu_free: inside a region they serve the region's memory, outside
// they take the runtime's and record it, since torch_npu then calls no runtime
// function memtool's hooks see. Both are recorded at their Python lines.
TEST(Npu, TheTorchHookModesAllocatorServesRegionsAndRecordsTheRest) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runNpuScript("pluggable", trace);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // Two granules of 2 MiB for the region, 1,000,000 bytes rounded to 32 outside.
    EXPECT_EQ(o.out,
              "allocated 5194336 [('kv', 3000000)]\n"
              "pause 4194304 1000032\n"
              "resume 4194304 True\n"
              "freed 0\n");
    const auto doc = readJson(trace);
    const auto& p = doc.at("processes").at(0);
    const auto& npu0 = p.at("devices").at("npu:0");
    EXPECT_EQ(npu0.at("allocated_bytes"), 4000000);
    EXPECT_EQ(npu0.at("alloc_count"), 2);
    EXPECT_EQ(npu0.at("current_bytes"), 0);
    const auto inside = hotspotWithSite(p, "npu_regions.py:60", "npu:0");
    ASSERT_FALSE(inside.is_null()) << p.at("hotspots").dump(1);
    EXPECT_EQ(inside.at("allocated_bytes"), 3000000);
    const auto outside = hotspotWithSite(p, "npu_regions.py:61", "npu:0");
    ASSERT_FALSE(outside.is_null()) << p.at("hotspots").dump(1);
    EXPECT_EQ(outside.at("allocated_bytes"), 1000000);
}
