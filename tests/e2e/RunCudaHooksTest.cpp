// The CUDA runtime-hook route and the torch bridge's plumbing, end to end under
// the real CLI, with test doubles for the vendor libraries (tests/fakes): a CUDA
// runtime whose device memory is host memory, a libc10_cuda.so with a known build
// id, and a bridge that replays a scripted caching-allocator history. What needs
// a real GPU or a CUDA torch is in RunCudaTest.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

struct HookRun {
    Outcome outcome;
    nlohmann::json trace;
    const nlohmann::json& process() const { return trace.at("processes").at(0); }
};

HookRun profileHooks(const std::vector<std::string>& env,
                     const std::vector<std::string>& flags = {"--cuda", "runtime-hooks"}) {
    HookRun r;
    std::string trace = tempDir() + "/trace.json";
    std::vector<std::string> cmd{MEMTOOL_BIN, "run", "-q", "-o", trace};
    cmd.insert(cmd.end(), flags.begin(), flags.end());
    cmd.push_back("--");
    cmd.push_back(CUDA_RUNTIME_USER_BIN);
    r.outcome = run(cmd, "", env);
    r.trace = readJson(trace);
    return r;
}

std::string warnings(const nlohmann::json& process) { return process.at("warnings").dump(); }

}  // namespace

TEST(RunCudaHooks, RuntimeApiCountsEveryByteOnItsDevice) {
    HookRun r = profileHooks({std::string("MEMTOOL_TORCH_BRIDGE=") + FAKE_TORCH_BRIDGE});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    EXPECT_EQ(r.outcome.out, "done\n");
    const auto& p = r.process();
    EXPECT_TRUE(p.at("complete").get<bool>()) << p.dump(1);
    const auto& cuda0 = p.at("devices").at("cuda:0");
    EXPECT_EQ(cuda0.at("source"), "runtime-hooks");
    EXPECT_EQ(cuda0.at("peak_bytes"), 5000000);
    EXPECT_EQ(cuda0.at("current_bytes"), 5000000);
    EXPECT_EQ(cuda0.at("allocated_bytes"), 8000000);
    EXPECT_EQ(cuda0.at("alloc_count"), 2);
    EXPECT_EQ(cuda0.at("free_count"), 1);
    const auto& cuda1 = p.at("devices").at("cuda:1");
    EXPECT_EQ(cuda1.at("peak_bytes"), 2000000);
    EXPECT_EQ(cuda1.at("current_bytes"), 0);
    EXPECT_FALSE(cuda1.contains("active"));  // the bridge's script is on device 0 only
    const auto& pinned = p.at("devices").at("pinned");
    EXPECT_EQ(pinned.at("peak_bytes"), 1000000);
    EXPECT_EQ(pinned.at("current_bytes"), 0);
    // The leaked block's hotspot names the C++ function that allocated it.
    auto leak = hotspotWithSite(p, "main", "cuda:0");
    ASSERT_FALSE(leak.is_null()) << p.at("hotspots").dump(1);
}

TEST(RunCudaHooks, BridgeFiguresBecomeActiveAndReserved) {
    HookRun r = profileHooks({std::string("MEMTOOL_TORCH_BRIDGE=") + FAKE_TORCH_BRIDGE});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    const auto& p = r.process();
    EXPECT_EQ(warnings(p), "[]");
    const auto& cuda0 = p.at("devices").at("cuda:0");
    // The script in tests/fakes/FakeTorchBridge.cpp.
    const auto& active = cuda0.at("active");
    EXPECT_EQ(active.at("peak_bytes"), 14 * MiB);
    EXPECT_EQ(active.at("current_bytes"), 10 * MiB);
    EXPECT_EQ(active.at("allocated_bytes"), 14 * MiB);
    EXPECT_EQ(active.at("alloc_count"), 3);
    EXPECT_EQ(active.at("free_count"), 1);
    const auto& reserved = cuda0.at("reserved");
    EXPECT_EQ(reserved.at("peak_bytes"), 26 * MiB);
    EXPECT_EQ(reserved.at("current_bytes"), 22 * MiB);
    EXPECT_EQ(reserved.at("alloc_count"), 4);  // the segment, and three 2 MiB pages
    EXPECT_EQ(reserved.at("free_count"), 2);
    // Hotspots carry the pools beside the device-level figures.
    uint64_t activePeak = 0, reservedPeak = 0;
    for (const auto& h : p.at("hotspots")) {
        if (h.at("device") != "cuda:0") continue;
        if (h.contains("active")) activePeak += h.at("active").at("peak_bytes").get<uint64_t>();
        if (h.contains("reserved"))
            reservedPeak += h.at("reserved").at("peak_bytes").get<uint64_t>();
    }
    EXPECT_EQ(activePeak, 14 * MiB);
    EXPECT_EQ(reservedPeak, 26 * MiB);
    // Seen inside the first cudaMalloc, the bridge's events belong to its caller:
    // memtool's own frames are not the site.
    auto first = hotspotWithSite(p, "CudaRuntimeUser.cpp:24", "cuda:0");
    ASSERT_FALSE(first.is_null()) << p.at("hotspots").dump(1);
    EXPECT_EQ(first.at("site").get<std::string>().rfind("main (", 0), 0u) << first.dump(1);
    EXPECT_EQ(first.at("active").at("peak_bytes"), 14 * MiB) << first.dump(1);

    // The report shows both, and check reads cuda:0.active / cuda:0.reserved.
    std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << r.trace.dump();
    Outcome text = run({MEMTOOL_BIN, "report", trace});
    ASSERT_EQ(text.exitCode, 0) << text.err;
    // A device row: its name and peak, then (after when the peak was) the rest.
    auto row = [&](const std::string& peak, const std::string& rest) {
        const size_t at = text.out.find("\n" + peak + " ");
        if (at == std::string::npos) return false;
        const std::string line = text.out.substr(at + 1, text.out.find('\n', at + 1) - at - 1);
        return line.find(" s " + rest) != std::string::npos;
    };
    EXPECT_TRUE(row("cuda:0 (runtime-hooks)       4.77 MiB", "    4.77 MiB     7.63 MiB"))
        << text.out;
    EXPECT_TRUE(row("  active                    14.00 MiB",
                    "   10.00 MiB    14.00 MiB     4.00 MiB          3"))
        << text.out;
    EXPECT_TRUE(row("  reserved                  26.00 MiB",
                    "   22.00 MiB    26.00 MiB     4.00 MiB          4"))
        << text.out;
    EXPECT_NE(text.out.find("Active peak Reserv. peak"), std::string::npos) << text.out;
    // Ranked by the active peak, the site whose tensors held the most comes first.
    Outcome byActive = run({MEMTOOL_BIN, "report", trace, "--sort", "active", "--top", "1"});
    ASSERT_EQ(byActive.exitCode, 0) << byActive.err;
    EXPECT_NE(byActive.out.find("Top 1 hotspot on cuda:0 by active peak"), std::string::npos)
        << byActive.out;
    EXPECT_NE(byActive.out.find("    14.00 MiB    26.00 MiB  main (CudaRuntimeUser.cpp:24)"),
              std::string::npos)
        << byActive.out;
    EXPECT_EQ(run({MEMTOOL_BIN, "check", trace, "--max-peak", "cuda:0.active=14680064"}).exitCode,
              0);
    Outcome over = run({MEMTOOL_BIN, "check", trace, "--max-peak", "cuda:0.active=14680063"});
    EXPECT_EQ(over.exitCode, 1);
    EXPECT_NE(over.out.find("cuda:0.active peak 14.00 MiB (14680064 bytes) exceeds"),
              std::string::npos)
        << over.out;
    EXPECT_EQ(run({MEMTOOL_BIN, "check", trace, "--max-peak", "cuda:0.reserved=26MiB"}).exitCode,
              0);
    // Against itself as a baseline with 0% growth allowed: every row, pools included, holds.
    Outcome same = run({MEMTOOL_BIN, "check", trace, "--baseline", trace, "--max-increase", "0%"});
    EXPECT_EQ(same.exitCode, 0) << same.out;
    EXPECT_NE(same.out.find("cuda:0.reserved peak"), std::string::npos) << same.out;
    // diff shows each pool as a row of its own.
    Outcome diff = run({MEMTOOL_BIN, "diff", trace, trace});
    ASSERT_EQ(diff.exitCode, 0) << diff.err;
    EXPECT_NE(diff.out.find("cuda:0.active      14.00 MiB    14.00 MiB           0 B"),
              std::string::npos)
        << diff.out;
}

// Private pools (CUDA graphs' own, a graph_pool_handle(), a MemPool) through the
// bridge: rows of their own beneath the device, a table of the pools with what
// one shared pool would save, and check's cuda:N.graphs.
TEST(RunCudaHooks, GraphPoolsAreRowsATableAndACheck) {
    HookRun r = profileHooks(
        {std::string("MEMTOOL_TORCH_BRIDGE=") + FAKE_TORCH_BRIDGE, "FAKE_BRIDGE_GRAPHS=1"});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    const auto& p = r.process();
    EXPECT_EQ(warnings(p), "[]");
    // The script in tests/fakes/FakeTorchBridge.cpp.
    const auto& cuda0 = p.at("devices").at("cuda:0");
    EXPECT_EQ(cuda0.at("reserved").at("peak_bytes"), 44 * MiB);
    EXPECT_EQ(cuda0.at("reserved").at("current_bytes"), 36 * MiB);
    EXPECT_EQ(cuda0.at("active").at("peak_bytes"), 20 * MiB);
    EXPECT_EQ(cuda0.at("active").at("current_bytes"), 16 * MiB);
    EXPECT_EQ(cuda0.at("graphs").at("peak_bytes"), 22 * MiB);
    EXPECT_EQ(cuda0.at("graphs").at("current_bytes"), 14 * MiB);
    EXPECT_EQ(cuda0.at("graphs_active").at("peak_bytes"), 10 * MiB);
    EXPECT_EQ(cuda0.at("graphs_active").at("current_bytes"), 6 * MiB);
    const auto& pools = p.at("graph_pools");
    ASSERT_EQ(pools.size(), 3u) << pools.dump(1);
    auto pool = [&](size_t i) {
        const auto& g = pools.at(i);
        return g.at("device").get<std::string>() + " #" +
               std::to_string(g.at("number").get<int>()) + " " + g.at("id").dump() + " " +
               std::to_string(g.at("reserved_peak_bytes").get<uint64_t>() / MiB) + " " +
               std::to_string(g.at("active_peak_bytes").get<uint64_t>() / MiB) + " " +
               std::to_string(g.at("reserved_end_bytes").get<uint64_t>() / MiB) + " " +
               std::to_string(g.at("active_end_bytes").get<uint64_t>() / MiB);
    };
    EXPECT_EQ(pool(0), "cuda:0 #1 [1,0] 8 6 0 0");
    EXPECT_EQ(pool(1), "cuda:0 #2 [2,0] 10 6 10 6");
    EXPECT_EQ(pool(2), "cuda:0 #3 [0,7] 4 0 4 0");
    // Where each pool's blocks were allocated: the bridge replays its script at
    // the first cudaMalloc, so all at that line; #3 held segments only.
    ASSERT_EQ(pools.at(0).at("sites").size(), 1u) << pools.dump(1);
    const std::string site = pools.at(0).at("sites").at(0).at("site");
    EXPECT_EQ(site.rfind("main (", 0), 0u) << site;
    EXPECT_NE(site.find("CudaRuntimeUser.cpp:24)"), std::string::npos) << site;
    EXPECT_EQ(pools.at(0).at("sites").at(0).at("allocated_bytes"), 6 * MiB);
    EXPECT_EQ(pools.at(1).at("sites").at(0).at("allocated_bytes"), 6 * MiB);
    EXPECT_TRUE(pools.at(2).at("sites").empty());
    // Each pool's series over time, beside its device's: the levels it went through.
    auto levels = [&](const std::string& name) {
        std::vector<uint64_t> out;
        for (const auto& point : p.at("timeline").at(name).at("points"))
            out.push_back(point.at(1).get<uint64_t>() / MiB);
        return out;
    };
    EXPECT_EQ(levels("cuda:0.graphs#1"), (std::vector<uint64_t>{8, 0}));
    EXPECT_EQ(levels("cuda:0.graphs_active#1"), (std::vector<uint64_t>{6, 0}));
    EXPECT_EQ(levels("cuda:0.graphs_active#2"), (std::vector<uint64_t>{4, 6}));
    EXPECT_EQ(levels("cuda:0.graphs#3"), (std::vector<uint64_t>{2, 4}));  // mapped in 2 MiB pages
    EXPECT_FALSE(p.at("timeline").contains("cuda:0.graphs_active#3"));

    std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << r.trace.dump();
    Outcome text = run({MEMTOOL_BIN, "report", trace});
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("\n  graphs                    22.00 MiB "), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("\n  graphs_active             10.00 MiB "), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Graph pools on cuda:0 (3 private pools of the caching allocator)\n"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("#2     (2, 0)                      10.00 MiB     6.00 MiB    10.00 "
                            "MiB     6.00 MiB\n       6.00 MiB allocated at main ("),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Sharing one pool: the 3 pools held 22.00 MiB at their peaks; their "
                            "blocks held at most 10.00 MiB at once, so one shared pool would need "
                            "12.00 MiB less\n"),
              std::string::npos)
        << text.out;
    EXPECT_EQ(run({MEMTOOL_BIN, "check", trace, "--max-peak", "cuda:0.graphs=22MiB"}).exitCode, 0);
    Outcome over = run({MEMTOOL_BIN, "check", trace, "--max-peak", "cuda:0.graphs=21MiB"});
    EXPECT_EQ(over.exitCode, 1);
    EXPECT_NE(over.out.find("cuda:0.graphs peak 22.00 MiB (23068672 bytes) exceeds"),
              std::string::npos)
        << over.out;
    // Read back, the trace says the same.
    Outcome json = run({MEMTOOL_BIN, "report", trace, "--format", "json"});
    ASSERT_EQ(json.exitCode, 0) << json.err;
    EXPECT_NE(json.out.find("\"graph_pools\""), std::string::npos);
}

// Without a private pool the row is absent and a limit on it holds at 0.
TEST(RunCudaHooks, WithoutPrivatePoolsAGraphsLimitHolds) {
    HookRun r = profileHooks({std::string("MEMTOOL_TORCH_BRIDGE=") + FAKE_TORCH_BRIDGE});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    const auto& p = r.process();
    EXPECT_FALSE(p.at("devices").at("cuda:0").contains("graphs"));
    EXPECT_FALSE(p.contains("graph_pools"));
    std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << r.trace.dump();
    Outcome ok = run({MEMTOOL_BIN, "check", trace, "--max-peak", "cuda:0.graphs=0"});
    EXPECT_EQ(ok.exitCode, 0) << ok.out << ok.err;
}

TEST(RunCudaHooks, ABridgeForAnotherTorchIsNotLoaded) {
    HookRun r = profileHooks({std::string("MEMTOOL_TORCH_BRIDGE=") + FAKE_TORCH_BRIDGE,
                              "FAKE_BRIDGE_BUILD_ID=deadbeef"});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    const auto& p = r.process();
    EXPECT_EQ(warnings(p),
              "[\"the torch bridge was built for another torch (libc10_cuda.so build id deadbeef "
              "of torch 2.14.1, this process runs 1234abcd of torch 3.0.0); cuda rows show "
              "driver-level figures only (no active/reserved)\"]");
    EXPECT_FALSE(p.at("devices").at("cuda:0").contains("active"));
    EXPECT_EQ(p.at("devices").at("cuda:0").at("peak_bytes"),
              5000000);  // device level still counted
    Outcome text = run({MEMTOOL_BIN, "report", "/dev/stdin"}, r.trace.dump());
    EXPECT_NE(text.out.find("Warning:  the torch bridge was built for another torch"),
              std::string::npos)
        << text.out;
}

TEST(RunCudaHooks, ARefusingBridgeSaysWhy) {
    HookRun r = profileHooks(
        {std::string("MEMTOOL_TORCH_BRIDGE=") + FAKE_TORCH_BRIDGE, "FAKE_BRIDGE_REFUSE=1"});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    EXPECT_EQ(warnings(r.process()), "[\"fake bridge: allocator backend is 'cudaMallocAsync'\"]");
}

TEST(RunCudaHooks, NoBridgeLibrarySaysSo) {
    HookRun r = profileHooks({"MEMTOOL_TORCH_BRIDGE=/nonexistent/libmemtool_torch_bridge.so"});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    std::string w = warnings(r.process());
    EXPECT_NE(w.find("the torch bridge does not load into this torch "
                     "(/nonexistent/libmemtool_torch_bridge.so"),
              std::string::npos)
        << w;
}

TEST(RunCudaHooks, AnInjectionSetByTheUserLeavesRuntimeHooks) {
    // nsys and other tools hold the driver's one injection slot: memtool keeps theirs.
    HookRun r = profileHooks({"CUDA_INJECTION64_PATH=/opt/their/injection.so"}, {});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    const auto& p = r.process();
    EXPECT_EQ(p.at("devices").at("cuda:0").at("source"), "runtime-hooks");
    EXPECT_EQ(p.at("devices").at("cuda:0").at("peak_bytes"), 5000000);
    EXPECT_NE(
        warnings(p).find(
            "CUDA_INJECTION64_PATH was already set (/opt/their/injection.so); CUDA memory was "
            "recorded through runtime API hooks"),
        std::string::npos)
        << warnings(p);
    Outcome cupti = run({MEMTOOL_BIN, "run", "-q", "--cuda", "cupti", "--", CUDA_RUNTIME_USER_BIN},
                        "", {"CUDA_INJECTION64_PATH=/opt/their/injection.so"});
    EXPECT_EQ(cupti.exitCode, 2);
}

// A memtool run inside another, or a program's child whose environment carried it:
// the slot holds memtool's own injection (here spelled another way), which is
// no other tool's to keep.
TEST(RunCudaHooks, AnInjectionThatIsMemtoolsOwnIsUsed) {
    const std::string collector = COLLECTOR_LIB;
    const std::string ours = collector.substr(0, collector.rfind('/')) + "/./libmemtool_cupti.so";
    ASSERT_TRUE(std::filesystem::exists(ours)) << ours;
    HookRun r = profileHooks({"CUDA_INJECTION64_PATH=" + ours}, {});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    EXPECT_EQ(warnings(r.process()).find("CUDA_INJECTION64_PATH"), std::string::npos)
        << warnings(r.process());
    Outcome cupti = run({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--cuda", "cupti",
                         "--", CUDA_RUNTIME_USER_BIN},
                        "", {"CUDA_INJECTION64_PATH=" + ours});
    EXPECT_EQ(cupti.exitCode, 0) << cupti.err;
}

TEST(RunCudaHooks, OffRecordsNoCuda) {
    HookRun r = profileHooks({}, {"--cuda", "off"});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    EXPECT_TRUE(r.process().at("devices").empty()) << r.process().dump(1);
}

// A CUDA allocation the device refuses is an out-of-memory event of the trace,
// with what cuda:0 held then (no bridge here: the runtime's own figure).
TEST(RunCudaHooks, ARefusedAllocationIsAnOutOfMemoryEvent) {
    HookRun r = profileHooks({"FAKE_CUDA_OOM=1"});
    ASSERT_EQ(r.outcome.exitCode, 0) << r.outcome.err;
    EXPECT_EQ(r.outcome.out, "out of memory\ndone\n");
    const auto& p = r.process();
    EXPECT_EQ(p.at("oom_count"), 1);
    ASSERT_EQ(p.at("oom").size(), 1u);
    const auto& e = p.at("oom").at(0);
    EXPECT_EQ(e.at("device"), "cuda:0");
    EXPECT_EQ(e.at("requested_bytes"), 2u << 30);
    EXPECT_EQ(e.at("source"), "allocator");
    EXPECT_EQ(e.at("held_on"), "cuda:0");
    EXPECT_EQ(e.at("live_bytes"), 5000000);
    ASSERT_EQ(e.at("by_site").size(), 1u);
    EXPECT_EQ(e.at("by_site").at(0).at("bytes"), 5000000);
    EXPECT_NE(e.at("site").get<std::string>().find("main"), std::string::npos) << e.dump();
    // The failed request is no allocation: the figures are the run's without it.
    EXPECT_EQ(p.at("devices").at("cuda:0").at("peak_bytes"), 5000000);
    EXPECT_EQ(p.at("devices").at("cuda:0").at("alloc_count"), 2);
}

// The runtime loaded into a local scope only (a library linking it, loaded
// RTLD_LOCAL, as Python loads an extension module such as CuPy's): the hooks
// forward to that libcudart, which no global lookup finds, and count its calls.
TEST(RunCudaHooks, ARuntimeInALocalScopeIsHookedAndCalled) {
    const std::string trace = tempDir() + "/trace.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--cuda", "runtime-hooks", "-o", trace, "--",
                     CUDA_LOCAL_USER_BIN, CUDA_LOCAL_LIB});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err << " signal " << o.signal;
    EXPECT_EQ(o.out, "done\n");
    const nlohmann::json t = readJson(trace);
    const auto& devices = t.at("processes").at(0).at("devices");
    ASSERT_TRUE(devices.contains("cuda:0")) << t.dump(1);
    const auto& cuda0 = devices.at("cuda:0");
    EXPECT_EQ(cuda0.at("source"), "runtime-hooks");
    EXPECT_EQ(cuda0.at("allocated_bytes"), 4000000);
    EXPECT_EQ(cuda0.at("peak_bytes"), 4000000);
    EXPECT_EQ(cuda0.at("current_bytes"), 1000000);
}
