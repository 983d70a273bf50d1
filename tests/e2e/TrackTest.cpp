// memtool.track(): a block of a program memtool run did not start, profiled from
// inside (python/memtool/_track.py, the collector's memtool_track_start/stop, the
// companion `memtool run --track PID`).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

struct Tracked {
    Outcome outcome;
    std::string trace;  // its path
};

Tracked runTracked(const std::string& name, const std::vector<std::string>& args = {}) {
    Tracked t;
    t.trace = tempDir() + "/trace.json";
    std::vector<std::string> argv{PYTHON_BIN, script(name)};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(t.trace);
    t.outcome = run(argv, "", packageEnv());
    return t;
}

}  // namespace

// What the block allocated is exactly what memtool run would say of it: the
// 3,000,000-byte storage at its line, live when the block ended; the block freed
// before it began is counted apart; what came after the block is not there.
TEST(Track, ABlockIsProfiledExactlyAsMemtoolRunWould) {
    Tracked t = runTracked("track_block.py");
    ASSERT_EQ(t.outcome.exitCode, 0) << t.outcome.err;
    // Inside the block memtool is enabled, as under memtool run; t.report() is the
    // text report (its second line here).
    EXPECT_EQ(t.outcome.out.substr(0, 41), "enabled True\nenabled False\nProcess:  pid ")
        << t.outcome.out;
    EXPECT_NE(t.outcome.out.find(" · ran on (memtool.track ended) · "), std::string::npos)
        << t.outcome.out;
    const nlohmann::json trace = readJson(t.trace);
    ASSERT_EQ(trace.at("processes").size(), 1u);
    // The companion's own peak, not the program's it was forked from (Python with
    // torch: ~500 MB, which ru_maxrss carried over the exec).
    EXPECT_LT(trace.at("cli_max_rss_bytes").get<uint64_t>(), 100u << 20)
        << trace.at("cli_max_rss_bytes");
    const nlohmann::json& p = trace.at("processes").at(0);
    EXPECT_EQ(p.at("detached"), true);
    EXPECT_EQ(p.at("max_rss_bytes"), 0);  // not memtool's child: unknown
    EXPECT_EQ(p.at("earlier_frees"), 1);
    EXPECT_EQ(p.at("exit_code"), nullptr);  // it ran on
    EXPECT_TRUE(p.at("complete").get<bool>()) << p.dump(1);
    EXPECT_TRUE(p.at("stream").at("verified").get<bool>());
    const auto& cpu = p.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 2);
    EXPECT_EQ(cpu.at("allocated_bytes"), 3500000);
    EXPECT_EQ(cpu.at("free_count"), 1);
    EXPECT_EQ(cpu.at("peak_bytes"), 3500000);
    EXPECT_EQ(cpu.at("current_bytes"), 3000000);  // x, live when the block ended
    const auto x = hotspotWithSite(p, "track_block.py:10");
    ASSERT_FALSE(x.is_null()) << p.at("hotspots").dump(1);
    EXPECT_EQ(x.at("allocated_bytes"), 3000000);
    EXPECT_EQ(x.at("site"), "<module> (" + script("track_block.py") + ":10)");
    const auto y = hotspotWithSite(p, "track_block.py:12");
    ASSERT_FALSE(y.is_null());
    EXPECT_EQ(y.at("allocated_bytes"), 500000);
    EXPECT_EQ(y.at("count"), 1);

    const Outcome text = run({MEMTOOL_BIN, "report", t.trace});
    EXPECT_NE(text.out.find("Earlier:  1 free of blocks allocated before memtool.track began"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Leaked: still held when the memtool.track block ended"),
              std::string::npos);
}

// track(modules=True) names each nn.Module instance, forward and backward (torch
// 2.x; 1.13 names forwards only), as memtool run --modules does; its hooks go when
// the block ends, and the next block's stacks name no module.
TEST(Track, ModulesAreNamedInsideTheBlockOnly) {
    Tracked t = runTracked("track_modules.py");
    ASSERT_EQ(t.outcome.exitCode, 0) << t.outcome.err;
    EXPECT_EQ(t.outcome.out, "hooks left 0 0\n");
    auto groups = [](const std::string& trace) {
        const Outcome out =
            run({MEMTOOL_BIN, "report", trace, "--format", "json", "--group-by", "module"});
        EXPECT_EQ(out.exitCode, 0) << out.err;
        std::map<std::string, std::pair<int64_t, int64_t>> rows;
        const nlohmann::json report = nlohmann::json::parse(out.out);
        for (const auto& row : report.at("processes").at(0).at("top_hotspots").at("cpu"))
            rows[row.at("group")] = {row.at("allocated_bytes"), row.at("count")};
        return rows;
    };
    using Rows = std::map<std::string, std::pair<int64_t, int64_t>>;
    // Linear(1000, 500) on 200 rows: its output, then its weight's and bias's
    // gradients; ReLU's output and threshold_backward; Linear(500, 10): its output,
    // its input's, weight's and bias's gradients and the sum's gradient made
    // contiguous twice; the sum and its gradient, 4 B each, are no module's. Both
    // torches allocate 3,646,048 B in all.
    const Rows named = torchMajorVersion() >= 2 ? Rows{{"0 (Linear)", {2402000, 3}},
                                                       {"1 (ReLU)", {800000, 2}},
                                                       {"2 (Linear)", {444040, 6}},
                                                       {"(no module's forward)", {8, 2}}}
                                                : Rows{{"0 (Linear)", {400000, 1}},
                                                       {"1 (ReLU)", {400000, 1}},
                                                       {"2 (Linear)", {8000, 1}},
                                                       {"(no module's forward)", {2838048, 10}}};
    EXPECT_EQ(groups(t.trace + "0.json"), named);
    const Rows second = groups(t.trace + "1.json");
    using Figures = std::pair<int64_t, int64_t>;
    EXPECT_EQ(second.at("Linear.forward (linear.py)"), Figures(408000, 2));
    EXPECT_EQ(second.count("0 (Linear)"), 0u);
}

// A hundred tracks in a loop: each loads nothing new, and its end takes every
// hook out, ends its thread and closes its descriptors.
TEST(Track, AHundredTracksLeaveNoDescriptorThreadOrMappingBehind) {
    Tracked t = runTracked("track_loop.py");
    ASSERT_EQ(t.outcome.exitCode, 0) << t.outcome.err;
    const size_t newline = t.outcome.out.find('\n');
    ASSERT_NE(newline, std::string::npos) << t.outcome.out;
    EXPECT_EQ("after" + t.outcome.out.substr(6, newline - 6) + "\n",
              t.outcome.out.substr(newline + 1))
        << t.outcome.out;
    // The last one's trace: its own storage alone, 1,099 bytes.
    const nlohmann::json p = readJson(t.trace).at("processes").at(0);
    EXPECT_EQ(p.at("devices").at("cpu").at("allocated_bytes"), 1099);
    EXPECT_EQ(p.at("devices").at("cpu").at("alloc_count"), 1);
    EXPECT_EQ(p.at("native_stacks"), false);
}

// A thread started before the block allocates inside it, and a DataLoader forks
// its workers inside it: all of them in the block's trace, as under memtool run.
TEST(Track, ThreadsFromBeforeAndWorkersForkedInsideAreTracked) {
    Tracked t = runTracked("track_workers.py");
    ASSERT_EQ(t.outcome.exitCode, 0) << t.outcome.err;
    EXPECT_EQ(t.outcome.out, "total 2000000\n");
    const nlohmann::json trace = readJson(t.trace);
    ASSERT_EQ(trace.at("processes").size(), 3u) << trace.dump(1).substr(0, 2000);
    const nlohmann::json& main = trace.at("processes").at(0);
    const auto y = hotspotWithSite(main, "track_workers.py:24");
    ASSERT_FALSE(y.is_null()) << main.at("hotspots").dump(1);
    EXPECT_EQ(y.at("allocated_bytes"), 2000000);
    for (int i = 1; i <= 2; ++i) {
        const nlohmann::json& worker = trace.at("processes").at(i);
        EXPECT_EQ(worker.at("forked"), true);
        EXPECT_EQ(worker.at("ppid"), main.at("pid"));
        // Two batches of two items each: 4 x 250,000 bytes, and the batches in
        // shared memory (2 x 500,000).
        const auto items = hotspotWithSite(worker, "track_workers.py:14");
        ASSERT_FALSE(items.is_null()) << worker.at("hotspots").dump(1);
        EXPECT_EQ(items.at("allocated_bytes"), 1000000);
        EXPECT_EQ(items.at("count"), 4);
        EXPECT_EQ(worker.at("devices").at("shared").at("allocated_bytes"), 1000000);
    }
}

// A worker forked inside the block that outlives it (persistent_workers) holds
// none of the companion's pipes: the block's end still ends the trace, the worker
// written as still running then.
TEST(Track, APersistentWorkerDoesNotHoldTheBlockOpen) {
    Tracked t = runTracked("track_persistent.py");
    ASSERT_EQ(t.outcome.exitCode, 0) << t.outcome.err;
    EXPECT_EQ(t.outcome.out, "total 4000\n");
    const nlohmann::json trace = readJson(t.trace);
    ASSERT_EQ(trace.at("processes").size(), 2u);
    EXPECT_TRUE(trace.at("processes").at(0).at("complete").get<bool>());
    const nlohmann::json& worker = trace.at("processes").at(1);
    EXPECT_EQ(worker.at("forked"), true);
    EXPECT_FALSE(worker.at("complete").get<bool>());
    EXPECT_EQ(worker.at("incomplete_reason"),
              "the process was still running 0 s after the memtool.track block ended, when "
              "memtool stopped waiting for it");
}

// What it refuses, each in one clear sentence; the program goes on.
TEST(Track, RefusalsAreClearAndTheProgramGoesOn) {
    Tracked noTorch = runTracked("track_errors.py", {"no-torch"});
    ASSERT_EQ(noTorch.outcome.exitCode, 0) << noTorch.outcome.err;
    EXPECT_EQ(noTorch.outcome.out,
              "refused: memtool.track: torch is not installed here: memtool records torch's CPU "
              "and CUDA memory\nwent on\n");
    Tracked nested = runTracked("track_errors.py", {"nested"});
    ASSERT_EQ(nested.outcome.exitCode, 0) << nested.outcome.err;
    EXPECT_EQ(nested.outcome.out,
              "refused: memtool.track: a track is already running in this process (one at a "
              "time)\nwent on\n");
    EXPECT_EQ(
        readJson(nested.trace).at("processes").at(0).at("devices").at("cpu").at("allocated_bytes"),
        1000);
    // Under memtool run, which records the whole program already.
    const std::string dir = tempDir();
    const Outcome underRun = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/run.json", PYTHON_BIN,
                                  script("track_errors.py"), "under-run", dir + "/track.json"},
                                 "", packageEnv());
    ASSERT_EQ(underRun.exitCode, 0) << underRun.err;
    EXPECT_EQ(underRun.out,
              "refused: memtool.track: this process runs under `memtool run`, which records all "
              "of it already\nwent on\n");
    // The block's own exception goes through; the trace is written all the same.
    Tracked raises = runTracked("track_errors.py", {"raises"});
    ASSERT_EQ(raises.outcome.exitCode, 0) << raises.outcome.err;
    EXPECT_EQ(raises.outcome.out, "raised: \"the block's own error\"\nenabled False\nwent on\n");
    const auto x =
        hotspotWithSite(readJson(raises.trace).at("processes").at(0), "track_errors.py:33");
    ASSERT_FALSE(x.is_null());
    EXPECT_EQ(x.at("allocated_bytes"), 4000);
}

// The companion's own bad input: a process that does not exist, a command given.
TEST(Track, TheCompanionRefusesWhatItCannotTrack) {
    const Outcome gone = run({MEMTOOL_BIN, "run", "--track", "999999999", "-o", "/dev/null"});
    EXPECT_EQ(gone.exitCode, 2);
    EXPECT_EQ(gone.err.substr(0, 41), "memtool: run: --track 999999999: no such ") << gone.err;
    const Outcome command = run({MEMTOOL_BIN, "run", "--track", "1", "-o", "/dev/null", "true"});
    EXPECT_EQ(command.exitCode, 2);
    EXPECT_EQ(command.err,
              "memtool: run: --track PID profiles a process already running; give no command\n");
    const Outcome serve = run({MEMTOOL_BIN, "run", "--serve", "-o", "/dev/null", "true"});
    EXPECT_EQ(serve.exitCode, 2);
    EXPECT_EQ(serve.err, "memtool: run: --serve is memtool.track's (with --track PID)\n");
}

// Regions pause and resume keeping their addresses, and memtool ctl reaches the
// tracked process, as under memtool run.
TEST(Track, RegionsAndCtlWorkInsideATrack) {
    Tracked t = runTracked("track_control.py");
    ASSERT_EQ(t.outcome.exitCode, 0) << t.outcome.err;
    EXPECT_EQ(t.outcome.out, "paused 1003520 resumed 1003520 value 7\nctl 0 True\n");
    const nlohmann::json p = readJson(t.trace).at("processes").at(0);
    ASSERT_EQ(p.at("regions").size(), 1u) << p.dump(1).substr(0, 2000);
    EXPECT_EQ(p.at("regions").at(0).at("tag"), "weights");
    ASSERT_EQ(p.at("control").size(), 2u);
    EXPECT_EQ(p.at("control").at(0).at("action"), "pause");
    EXPECT_EQ(p.at("control").at(1).at("action"), "resume");
}
