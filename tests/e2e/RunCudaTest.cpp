// CUDA device memory through the CUPTI injection, on a real GPU. Without one (CI,
// this project's development machines) every test here skips and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {
bool gpuUsable(std::string* why) {
    if (CUDA_SAMPLE_BIN.empty()) {
        *why = "cuda_sample is not built (no CUDA toolkit with CUPTI at build time)";
        return false;
    }
    Outcome probe = run({CUDA_SAMPLE_BIN, "--probe"});
    if (probe.exitCode == 0) return true;
    *why = "no usable CUDA GPU on this machine (cuda_sample --probe exited " +
           std::to_string(probe.exitCode) + "); the CUDA checks need one";
    return false;
}

// gpuUsable, and a python with a CUDA torch to run the scripts with.
bool torchGpuUsable(std::string* why) {
    if (!gpuUsable(why)) return false;
    if (!TORCH_PYTHON_BIN.empty()) return true;
    *why = "no python with a CUDA torch was found at build time";
    return false;
}

// Where a courtesy test's runs write: the losses of a bare run and of the yielded
// one, and the flag that lets the yielded one go on (and its trace, DIR/t.json).
struct CourtesyFiles {
    std::string dir = tempDir();
    std::string bareLosses = dir + "/bare.txt", losses = dir + "/losses.txt", flag = dir + "/go";
};

// The trace of a yielded run is whole: the frees of the cache the yield emptied
// are in it (they once went missing: INCOMPLETE, and later blocks "reused a live
// address").
void expectWholeTrace(const nlohmann::json& proc) {
    EXPECT_TRUE(proc.at("complete").get<bool>()) << proc.value("incomplete_reason", "");
    EXPECT_EQ(proc.at("warnings").dump(), "[]");
}

// `memtool run -q --pausable all -o DIR/t.json -- COMMAND`, yielded to host from
// memtool ctl and restored when the program's first line ("ready PID ...") comes,
// then let go by creating FLAG.
struct YieldedRun {
    Outcome outcome;
    std::string first;                 // the program's first line
    nlohmann::json yielded, restored;  // ctl's answers (discarded where none parsed)
};

YieldedRun yieldToHostAndRestore(const std::string& dir, const std::vector<std::string>& command,
                                 const std::string& flag) {
    YieldedRun r;
    std::vector<std::string> argv{MEMTOOL_BIN, "run",           "-q", "--pausable", "all",
                                  "-o",        dir + "/t.json", "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    r.outcome = run(argv, "", controlEnv(), [&](pid_t, const std::string& first) {
        r.first = first;
        std::istringstream words(first);
        std::string ready, pid;
        words >> ready >> pid;
        auto answer = [&](std::vector<std::string> w) {
            w.insert(w.begin(), {"--format", "json", pid});
            return nlohmann::json::parse(ctl(w, controlEnv()).out, nullptr, false);
        };
        r.yielded = answer({"yield", "--to", "host"});
        r.restored = answer({"restore"});
        std::ofstream(flag) << "go\n";
    });
    return r;
}

std::string fileText(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}
// A script's last line, its figures as JSON (with objects inside), printed for
// gpu-check's log under `name`; not an object when the line is none.
nlohmann::json lastJsonLine(const std::string& out, const char* name) {
    const size_t lineStart = out.rfind('\n', out.size() >= 2 ? out.size() - 2 : 0);
    auto r = nlohmann::json::parse(lineStart == std::string::npos ? out : out.substr(lineStart + 1),
                                   nullptr, false);
    if (r.is_object()) std::cout << name << ' ' << r.dump() << '\n';
    return r;
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
    EXPECT_EQ(cuda.at("allocated_bytes"), 3000000 + 2000000 + 500000 + g + 2500000 + 700000);
    EXPECT_EQ(cuda.at("alloc_count"), 6);
    // The VMM chunk's handle was released while mapped: its bytes were still held.
    EXPECT_EQ(cuda.at("peak_bytes"), 3000000 + g + 2500000);
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

// The same program with the CUPTI route switched off: the runtime hooks see every
// runtime call (not the driver's cuMemCreate).
TEST(RunCuda, RuntimeHooksSeeTheRuntimeCalls) {
    std::string why;
    if (!gpuUsable(&why)) GTEST_SKIP() << why;
    Profiled p = profile({CUDA_SAMPLE_BIN}, {"--cuda", "runtime-hooks"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto& cuda = p.process().at("devices").at("cuda:0");
    EXPECT_EQ(cuda.at("source"), "runtime-hooks");
    EXPECT_EQ(cuda.at("allocated_bytes"), 3000000 + 2000000 + 500000 + 2500000 + 700000);
    EXPECT_EQ(cuda.at("peak_bytes"), 3000000 + 2500000);
    EXPECT_EQ(cuda.at("current_bytes"), 700000);
    EXPECT_EQ(p.process().at("devices").at("pinned").at("allocated_bytes"), 1000000);
}

// PyTorch's own figures against memtool's, with the caching allocator's default
// segments and with expandable segments.
class TorchCuda : public ::testing::TestWithParam<const char*> {};

TEST_P(TorchCuda, ActiveAndReservedPeaksEqualTorchs) {
    if (!TORCH_BRIDGE_BUILT || TORCH_PYTHON_BIN.empty())
        GTEST_SKIP()
            << "the torch bridge is not built (no CUDA build of torch >= 2.2 at build time)";
    std::string conf = GetParam();
    std::string trace = tempDir() + "/trace.json";
    std::vector<std::string> env;
    if (!conf.empty()) env.push_back("PYTORCH_CUDA_ALLOC_CONF=" + conf);
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", trace, "--", TORCH_PYTHON_BIN, script("torch_cuda.py")},
        "", env);
    if (o.exitCode == 77) GTEST_SKIP() << "no CUDA device for torch: " << o.err;
    ASSERT_EQ(o.exitCode, 0) << o.err;
    auto torch = nlohmann::json::parse(o.out);
    auto proc = readJson(trace).at("processes").at(0);
    ASSERT_EQ(proc.at("warnings").dump(), "[]");
    const auto& cuda = proc.at("devices").at("cuda:0");
    // Active counts what tensors asked for (PyTorch's requested_bytes: 24 MiB,
    // 4,000 bytes and 40 MiB at the peak); max_memory_allocated() counts the
    // blocks, the 4,000 bytes as 4,096.
    EXPECT_EQ(cuda.at("active").at("peak_bytes"), torch.at("max_requested"));
    EXPECT_EQ(cuda.at("active").at("peak_bytes"), (24u << 20) + 4000 + (40u << 20));
    EXPECT_LE(cuda.at("active").at("peak_bytes"), torch.at("max_allocated"));
    EXPECT_EQ(cuda.at("reserved").at("peak_bytes"), torch.at("max_reserved"));
    EXPECT_EQ(cuda.at("active").at("current_bytes"), torch.at("requested"));
    EXPECT_EQ(cuda.at("reserved").at("current_bytes"), torch.at("reserved"));
    // The driver-level row holds at least what the allocator reserved.
    EXPECT_GE(cuda.at("peak_bytes").get<uint64_t>(), torch.at("max_reserved").get<uint64_t>());
    // The line table: the 24 MiB line's active peak includes nothing before it.
    auto line = lineRow(proc, "torch_cuda.py", 15);
    ASSERT_FALSE(line.is_null());
    EXPECT_EQ(line.at("active").at("self_allocated_bytes"), 24u << 20);
    // Printed for the closing note of a GPU session: device level beside NVML.
    std::cout << "[ figures  ] " << (conf.empty() ? "default" : conf) << ": torch " << torch.dump()
              << "; memtool device peak " << cuda.at("peak_bytes") << ", active peak "
              << cuda.at("active").at("peak_bytes") << ", reserved peak "
              << cuda.at("reserved").at("peak_bytes") << std::endl;
}

INSTANTIATE_TEST_SUITE_P(AllocatorConfigs, TorchCuda,
                         ::testing::Values("", "expandable_segments:True"));

// A 1 GiB region of real torch tensors on a real GPU, in both hook modes and with
// each backup, paused and resumed twice: the device gets the GiB back on pause, and
// the tensor its address and (backed up) its content on resume.
class TorchCudaRegions : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(TorchCudaRegions, PauseGivesTheDeviceAGibAndResumeRestoresTheTensor) {
    std::string why;
    if (!torchGpuUsable(&why)) GTEST_SKIP() << why;
    const auto [mode, backup] = GetParam();
    Profiled p = profile({TORCH_PYTHON_BIN, script("regions_cuda.py"), mode, backup});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto r = lastJsonLine(p.outcome.out, "regions_cuda");
    ASSERT_TRUE(r.is_object()) << p.outcome.out;
    constexpr int64_t GiB = 1ll << 30;
    for (const nlohmann::json& round : {r.at("first"), r}) {
        EXPECT_TRUE(round.at("pause_ok").get<bool>()) << round.dump();
        EXPECT_TRUE(round.at("resume_ok").get<bool>()) << round.dump();
        EXPECT_EQ(round.at("pause_bytes"), GiB);
        EXPECT_GE(round.at("taken_by_resume").get<int64_t>(), GiB);
        EXPECT_TRUE(round.at("same_address").get<bool>());
        if (std::string(backup) != "none") {
            EXPECT_TRUE(round.at("same_content").get<bool>()) << round.dump();
        }
    }
    // The second pause gives the device the whole GiB. The first gives it less by
    // what the driver took for memtool's copies: the page tables that map the
    // pinned backup (or the staging buffers) and the copy stream, 2 to 4 MiB on an
    // H100, kept for the next pause.
    EXPECT_EQ(r.at("freed_by_pause").get<int64_t>(), GiB);
    EXPECT_GE(r.at("first").at("freed_by_pause").get<int64_t>(), GiB - (16ll << 20));
    const auto& control = p.process().at("control");
    ASSERT_EQ(control.size(), 4u);
    for (const auto& c : control) {
        EXPECT_EQ(c.at("device"), "cuda:0");
        EXPECT_EQ(c.at("bytes"), GiB);
    }
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndBackups, TorchCudaRegions,
    ::testing::Values(std::make_pair("preload", "host"), std::make_pair("preload", "disk"),
                      std::make_pair("torch", "host"), std::make_pair("torch", "disk"),
                      std::make_pair("preload", "none")),
    [](const auto& info) { return std::string(info.param.first) + "_" + info.param.second; });

// Verified restores on a GPU: the checksum kernel, loaded from its PTX, runs at
// every pause and resume of a verified 1 GiB region to host memory, which comes
// back whole and unflagged; a 4 MiB verified region whose disk backup the script
// spoils by one byte fails its resume with VerifyError naming its data_ptr. The
// times (verified beside plain) are printed for the closing note, not asserted.
TEST(TorchCudaVerify, TheDevicesChecksumCatchesASpoiledRestoreAndPassesAGoodOne) {
    std::string why;
    if (!torchGpuUsable(&why)) GTEST_SKIP() << why;
    const std::string dir = tempDir();
    Profiled p = profile({TORCH_PYTHON_BIN, script("verify_cuda.py"), dir}, {"--backup-dir", dir});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto r = lastJsonLine(p.outcome.out, "verify_cuda");
    ASSERT_TRUE(r.is_object()) << p.outcome.out;
    EXPECT_TRUE(r.at("same").get<bool>());
    char address[32];
    std::snprintf(address, sizeof address, "0x%llx",
                  static_cast<unsigned long long>(r.at("spoiled_data_ptr").get<uint64_t>()));
    EXPECT_EQ(r.at("caught").get<std::string>().rfind(
                  std::string("verify: region 'spoiled' on cuda:0 came back different from what "
                              "was paused: 1 of 1 allocations, the first at ") +
                      address + " (4194304 bytes; ",
                  0),
              0u)
        << r.dump();
    EXPECT_EQ(r.at("ones_after"), (1 << 20) - 1);  // its first float's low byte flipped
}

// CUDA graphs' private pools on a GPU, through the real bridge: a pool per graph
// captured alone, one for the two that share graph_pool_handle(), with PyTorch's
// own ids; each capture's 4 MiB output is its pool's active peak (the shared
// pool's second output reuses nothing: both stay live).
TEST(TorchCudaGraphPools, EachGraphsPoolIsATableRowWithTorchsId) {
    std::string why;
    if (!torchGpuUsable(&why)) GTEST_SKIP() << why;
    Profiled p = profile({TORCH_PYTHON_BIN, script("graph_pools_cuda.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto r = lastJsonLine(p.outcome.out, "graph_pools_cuda");
    ASSERT_TRUE(r.is_object()) << p.outcome.out;
    EXPECT_TRUE(r.at("right").get<bool>());
    const auto& pools = p.process().at("graph_pools");
    ASSERT_EQ(pools.size(), 3u) << pools.dump(1);
    const uint64_t MiB4 = 4 << 20;
    EXPECT_EQ(pools.at(0).at("id"), r.at("own").at(0)) << pools.dump(1);
    EXPECT_EQ(pools.at(1).at("id"), r.at("own").at(1)) << pools.dump(1);
    EXPECT_EQ(pools.at(2).at("id"), r.at("shared")) << pools.dump(1);
    EXPECT_EQ(pools.at(0).at("active_peak_bytes"), MiB4) << pools.dump(1);
    EXPECT_EQ(pools.at(1).at("active_peak_bytes"), MiB4) << pools.dump(1);
    EXPECT_EQ(pools.at(2).at("active_peak_bytes"), 2 * MiB4) << pools.dump(1);
    const auto& cuda0 = p.process().at("devices").at("cuda:0");
    EXPECT_EQ(cuda0.at("graphs_active").at("peak_bytes"), 4 * MiB4) << cuda0.dump(1);
}

// CUDA graphs whose pools a region holds (memtool.region(graphs=True) and the
// torch_memory_saver shim's cuda_graph): a pause gives the device the pools'
// memory back (two 64 MiB outputs at least), a resume maps it at the same
// addresses, and the graphs replay to a bare replay's outputs.
TEST(TorchCudaGraphPause, AGraphsPoolPausesAndItReplaysAfterTheResume) {
    std::string why;
    if (!torchGpuUsable(&why)) GTEST_SKIP() << why;
    Profiled p = profile({TORCH_PYTHON_BIN, script("graph_pause_cuda.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto r = lastJsonLine(p.outcome.out, "graph_pause_cuda");
    ASSERT_TRUE(r.is_object()) << p.outcome.out;
    std::cout << "[ figures  ] graph pause " << r.dump() << std::endl;
    EXPECT_GE(r.at("paused_bytes").get<uint64_t>(), 64u << 20) << r.dump();
    EXPECT_GE(r.at("freed_by_pause").get<int64_t>(), int64_t{128} << 20) << r.dump();
    EXPECT_TRUE(r.at("same_addresses").get<bool>()) << r.dump();
    EXPECT_TRUE(r.at("replay_equal").get<bool>()) << r.dump();
}

// Courtesy on a GPU: the training script on cuda:0 under --pausable all, yielded
// to host memory from outside. Afterwards the device holds no more than what it
// held besides PyTorch's allocator just before (the CUDA context, libraries' own
// memory): everything memtool serves is gone, and the cache was emptied. The
// losses are a bare run's, step for step.
TEST(TorchCudaCourtesy, YieldLeavesTheDeviceOnlyWhatPytorchDoesNotHold) {
    std::string why;
    if (!torchGpuUsable(&why)) GTEST_SKIP() << why;
    const CourtesyFiles f;
    Outcome bare =
        run({TORCH_PYTHON_BIN, script("courtesy_train.py"), "4", f.bareLosses, "-", "cuda"});
    ASSERT_EQ(bare.exitCode, 0) << bare.err;
    YieldedRun y = yieldToHostAndRestore(
        f.dir, {TORCH_PYTHON_BIN, script("courtesy_train.py"), "4", f.losses, f.flag, "cuda"},
        f.flag);
    const Outcome& o = y.outcome;
    const nlohmann::json &yielded = y.yielded, &restored = y.restored;
    std::istringstream words(y.first);  // "ready PID PARAM_BYTES OTHER_BYTES"
    std::string ready, pid;
    uint64_t params = 0, other = 0;
    words >> ready >> pid >> params >> other;
    ASSERT_EQ(o.exitCode, 0) << o.err;
    std::cout << "[ figures  ] courtesy yield " << yielded.dump()
              << "\n[ figures  ] courtesy restore " << restored.dump()
              << "\n[ figures  ] held besides PyTorch before the yield " << other << std::endl;
    ASSERT_TRUE(yielded.is_object()) << o.err;
    EXPECT_EQ(yielded.at("status"), "ok") << yielded.dump();
    const auto& devices = yielded.at("body").at("devices");
    bool sawCuda = false;
    for (const auto& d : devices) {
        if (d.at("device") != "cuda:0") continue;
        sawCuda = true;
        // 2 MiB: the VMM granularity the context's own rounding may take.
        EXPECT_LE(d.at("device_used_bytes").get<uint64_t>(), other + (2u << 20)) << d.dump();
        // What is left, named: nothing in regions, and the parts add up to the used bytes.
        const auto& left = d.at("left");
        EXPECT_EQ(left.at("in_regions_bytes"), 0) << d.dump();
        EXPECT_EQ(left.at("in_regions_bytes").get<uint64_t>() +
                      left.at("outside_regions_bytes").get<uint64_t>() +
                      left.at("unseen_bytes").get<uint64_t>(),
                  d.at("device_used_bytes").get<uint64_t>())
            << d.dump();
    }
    EXPECT_TRUE(sawCuda) << yielded.dump();
    EXPECT_EQ(yielded.at("body").at("cublas_workspaces_released"), true) << yielded.dump();
    EXPECT_EQ(restored.at("status"), "ok") << restored.dump();
    expectWholeTrace(readJson(f.dir + "/t.json").at("processes").at(0));
    EXPECT_EQ(fileText(f.losses), fileText(f.bareLosses));
}

// A user's training run: resnet18 fed by a DataLoader with worker processes and a
// pin-memory thread, yielded to host from outside mid-run and restored. It goes
// on unchanged (its losses are a bare run's, step for step) and its trace is whole:
// the frees of the cache the yield emptied were once missed (INCOMPLETE, with 394
// MiB "leaked" on cuda:0).
TEST(TorchCudaCourtesy, ADataLoaderWithPinnedMemoryGoesOnUnchanged) {
    std::string why;
    if (!torchGpuUsable(&why)) GTEST_SKIP() << why;
    const CourtesyFiles f;
    Outcome bare = run({TORCH_PYTHON_BIN, script("courtesy_loader_cuda.py"), f.bareLosses, "-"});
    if (bare.err.find("No module named 'torchvision'") != std::string::npos)
        GTEST_SKIP() << "torchvision is not installed for " << TORCH_PYTHON_BIN;
    ASSERT_EQ(bare.exitCode, 0) << bare.err;
    YieldedRun y = yieldToHostAndRestore(
        f.dir, {TORCH_PYTHON_BIN, script("courtesy_loader_cuda.py"), f.losses, f.flag}, f.flag);
    const Outcome& o = y.outcome;
    const nlohmann::json &yielded = y.yielded, &restored = y.restored;
    ASSERT_EQ(o.exitCode, 0) << o.err;
    ASSERT_TRUE(yielded.is_object()) << o.err;
    EXPECT_EQ(yielded.at("status"), "ok") << yielded.dump();
    EXPECT_EQ(restored.at("status"), "ok") << restored.dump();
    std::cout << "[ figures  ] loader yield " << yielded.dump() << std::endl;
    uint64_t cudaBytes = 0;
    for (const auto& d : yielded.at("body").at("devices"))
        if (d.at("device") == "cuda:0") cudaBytes = d.at("bytes").get<uint64_t>();
    EXPECT_GT(cudaBytes, 40u << 20) << yielded.dump();  // resnet18's weights: 42.7 MiB
    const std::string got = fileText(f.losses);
    EXPECT_EQ(got, fileText(f.bareLosses));
    EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 20);
    const auto trace = readJson(f.dir + "/t.json");
    expectWholeTrace(trace.at("processes").at(0));
    EXPECT_EQ(trace.at("processes").size(), 3u);  // the two loader workers are processes too
}
