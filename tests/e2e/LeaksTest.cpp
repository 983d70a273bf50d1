// When leaks are counted: live when the program's own code finished (Python:
// interpreter finalization began; C and C++: main returned or exit was called),
// not what the interpreter's teardown left. And a Ctrl-C'd program's trace is whole.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;
using nlohmann::json;

namespace {

std::string writeJson(const json& j) {
    std::string path = tempDir() + "/trace.json";
    std::ofstream(path) << j.dump();
    return path;
}

}  // namespace

TEST(Leaks, AGlobalListHoldingTensorsUntilExitIsHeldNotLeaked) {
    Profiled p = profile({PYTHON_BIN, script("leak_globals.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "kept 1500000\n");
    const json& proc = p.process();
    EXPECT_EQ(proc.at("leak_moment"), "python");
    const json& cpu = proc.at("devices").at("cpu");
    // The globals still reach them: held at exit, not leaked.
    EXPECT_EQ(cpu.at("leaked_bytes"), 0);
    EXPECT_EQ(cpu.at("held_at_exit_bytes"), 1500000);
    EXPECT_EQ(cpu.at("live_at_end_bytes"), 1500000);
    // Named by the global that held them.
    EXPECT_EQ(cpu.at("held_by"), json::parse(R"([{"name": "kept", "bytes": 1500000}])"));
    // The interpreter's teardown freed both, apart from the program's own frees.
    EXPECT_EQ(cpu.at("teardown_freed_bytes"), 1500000);
    EXPECT_EQ(cpu.at("teardown_free_count"), 2);
    EXPECT_EQ(cpu.at("current_bytes"), 0);
    EXPECT_EQ(cpu.at("free_count"), 3);
    EXPECT_EQ(hotspotWithSite(proc, "leak_globals.py:6").at("held_at_exit_bytes"), 1000000);
    EXPECT_EQ(hotspotWithSite(proc, "leak_globals.py:11").at("held_at_exit_bytes"), 500000);
    EXPECT_EQ(hotspotWithSite(proc, "leak_globals.py:10").at("live_at_end_bytes"), 0);
    EXPECT_EQ(hotspotWithSite(proc, "leak_globals.py:6").at("leaked_bytes"), 0);

    const std::string trace = writeJson(p.trace);
    Outcome report = run({MEMTOOL_BIN, "report", trace});
    EXPECT_NE(report.out.find("\nLeaks:    live when the interpreter began to finalize, at "),
              std::string::npos)
        << report.out;
    EXPECT_NE(report.out.find("; teardown then freed cpu 1.43 MiB in 2 frees\n"
                              "Held by:  cpu: kept 1.43 MiB\n"),
              std::string::npos)
        << report.out;
    Outcome html = run({MEMTOOL_BIN, "report", trace, "--format", "html"});
    EXPECT_NE(html.out.find("<p class=\"held-by\">Held at exit on cpu by <code>kept</code> 1.43 "
                            "MiB</p>"),
              std::string::npos);
    EXPECT_NE(report.out.find("\ncpu                          3.34 MiB "), std::string::npos)
        << report.out;
    EXPECT_NE(report.out.find(
                  " s          0 B     1.43 MiB     3.34 MiB     3.34 MiB          3          3\n"),
              std::string::npos)
        << report.out;
    Outcome check =
        run({MEMTOOL_BIN, "check", trace, "--metric", "held-at-exit", "--max-peak", "cpu=1MB"});
    EXPECT_EQ(check.exitCode, 1) << check.out;
    EXPECT_EQ(
        check.out,
        "FAIL  cpu held-at-exit 1.43 MiB (1500000 bytes) exceeds 976.56 KiB (1000000 bytes) by "
        "488.28 KiB (500000 bytes)\n"
        "memtool check: 1 check, 1 failed\n");
}

TEST(Leaks, WhatTheGlobalsStillReachIsHeldAtExitNotLeaked) {
    Profiled p = profile({PYTHON_BIN, script("held_at_exit.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "kept 3000000\n");
    const json& proc = p.process();
    EXPECT_EQ(proc.at("leak_moment"), "python");
    EXPECT_TRUE(proc.at("held_at_exit_known").get<bool>());
    const json& cpu = proc.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("held_at_exit_bytes"), 3000000);
    EXPECT_EQ(cpu.at("leaked_bytes"), 2000000);
    EXPECT_EQ(cpu.at("live_at_end_bytes"), 5000000);
    const json& global = hotspotWithSite(proc, "held_at_exit.py:8");
    EXPECT_EQ(global.at("held_at_exit_bytes"), 3000000);
    EXPECT_EQ(global.at("leaked_bytes"), 0);
    // The cycle's storage has no global: it is not in the list.
    EXPECT_EQ(cpu.at("held_by"), json::parse(R"([{"name": "kept", "bytes": 3000000}])"));
    const json& cycle = hotspotWithSite(proc, "held_at_exit.py:12");
    EXPECT_EQ(cycle.at("held_at_exit_bytes"), 0);
    EXPECT_EQ(cycle.at("leaked_bytes"), 2000000);

    const std::string trace = writeJson(p.trace);
    Outcome report = run({MEMTOOL_BIN, "report", trace, "--bytes", "exact"});
    EXPECT_NE(report.out.find("· Held: by what they reach"), std::string::npos) << report.out;
    Outcome leaked = run({MEMTOOL_BIN, "check", trace, "--max-leaked", "cpu=1"});
    EXPECT_EQ(leaked.exitCode, 1) << leaked.out;
    EXPECT_NE(leaked.out.find("FAIL  cpu leaked 1.91 MiB (2000000 bytes) exceeds 1 B"),
              std::string::npos)
        << leaked.out;
    Outcome held = run({MEMTOOL_BIN, "check", trace, "--max-held-at-exit", "cpu=3000000",
                        "--max-leaked", "cpu=2000000"});
    EXPECT_EQ(held.exitCode, 0) << held.out;
    Outcome over = run({MEMTOOL_BIN, "check", trace, "--max-held-at-exit", "cpu=2999999"});
    EXPECT_EQ(over.exitCode, 1) << over.out;
    EXPECT_NE(over.out.find("cpu held-at-exit 2.86 MiB (3000000 bytes) exceeds"), std::string::npos)
        << over.out;
}

TEST(Leaks, AProgramThatDiesOfCtrlCLeavesAWholeTrace) {
    const std::string trace = tempDir() + "/trace.json";
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("interrupted.py")}, "",
            {}, [](pid_t, const std::string& line) {
                // Ctrl-C reaches the program itself from the terminal.
                kill(std::stoi(line.substr(line.find(' ') + 1)), SIGINT);
            });
    EXPECT_EQ(o.signal, SIGINT) << o.err;  // memtool dies of it too, after the trace
    EXPECT_NE(o.err.find("KeyboardInterrupt"), std::string::npos) << o.err;
    const json proc = readJson(trace).at("processes").at(0);
    EXPECT_TRUE(proc.at("complete").get<bool>()) << proc.value("incomplete_reason", "");
    EXPECT_TRUE(proc.at("stream").at("verified").get<bool>());
    EXPECT_EQ(proc.at("exit_signal"), SIGINT);
    EXPECT_TRUE(proc.at("exit_code").is_null());
    EXPECT_EQ(proc.at("leak_moment"), "python");
    // Interrupted, its globals were not listed (LiveTensors::noteReachable says why).
    EXPECT_FALSE(proc.at("held_at_exit_known").get<bool>());
    EXPECT_EQ(proc.at("devices").at("cpu").at("leaked_bytes"), 1000);
    EXPECT_EQ(proc.at("devices").at("cpu").at("free_count"), 1);
    Outcome check = run({MEMTOOL_BIN, "check", trace});
    EXPECT_EQ(check.exitCode, 0) << check.out;
}

TEST(Leaks, CountedWhenMainReturnsOrExitIsCalled) {
    if (std::string(LEAK_AT_EXIT_BIN).empty()) GTEST_SKIP() << "built without LibTorch";
    // A static object's block is freed by its destructor after main: teardown.
    Profiled returned = profile({LEAK_AT_EXIT_BIN});
    ASSERT_EQ(returned.outcome.exitCode, 0) << returned.outcome.err;
    const json& r = returned.process();
    EXPECT_EQ(r.at("leak_moment"), "exit");
    EXPECT_EQ(r.at("devices").at("cpu").at("leaked_bytes"), 250000);
    EXPECT_EQ(r.at("devices").at("cpu").at("teardown_freed_bytes"), 200000);
    EXPECT_EQ(r.at("devices").at("cpu").at("current_bytes"), 50000);
    // No Python globals to list: leaked is everything live, held at exit unknown.
    EXPECT_FALSE(r.at("held_at_exit_known").get<bool>());
    EXPECT_EQ(r.at("devices").at("cpu").at("live_at_end_bytes"), 250000);
    Outcome held =
        run({MEMTOOL_BIN, "check", writeJson(returned.trace), "--max-held-at-exit", "cpu=1GB"});
    EXPECT_EQ(held.exitCode, 1) << held.out;
    EXPECT_NE(held.out.find("cpu held-at-exit is unknown: leak_moment exit"), std::string::npos)
        << held.out;
    // exit() inside main: the local block is still held then.
    Profiled exited = profile({LEAK_AT_EXIT_BIN, "exit"});
    ASSERT_EQ(exited.outcome.exitCode, 0) << exited.outcome.err;
    const json& e = exited.process();
    EXPECT_EQ(e.at("leak_moment"), "exit");
    EXPECT_EQ(e.at("devices").at("cpu").at("leaked_bytes"), 1250000);
    EXPECT_EQ(e.at("devices").at("cpu").at("teardown_freed_bytes"), 200000);
    EXPECT_EQ(e.at("devices").at("cpu").at("current_bytes"), 1050000);
}

TEST(Leaks, WithoutAMomentTheStreamsEndCounts) {
    // os._exit skips finalization: no moment, the end of the stream counts.
    Profiled p = profile({PYTHON_BIN, "-c",
                          "import os, torch\n"
                          "a = torch.empty(4096, dtype=torch.uint8)\n"
                          "os._exit(0)\n"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.process().at("leak_moment"), "end");
    EXPECT_EQ(p.process().at("devices").at("cpu").at("leaked_bytes"), 4096);
    // A trace from before leak_moment: its current bytes are its leaks.
    json old = p.trace;
    json& cpu = old["processes"][0]["devices"]["cpu"];
    cpu.erase("leaked_bytes");
    cpu["current_bytes"] = 123;
    old["processes"][0].erase("leak_moment");
    Outcome check =
        run({MEMTOOL_BIN, "check", writeJson(old), "--metric", "leaked", "--max-peak", "cpu=122"});
    EXPECT_EQ(check.exitCode, 1);
    EXPECT_NE(check.out.find("cpu leaked 123 B (123 bytes) exceeds"), std::string::npos)
        << check.out;
}
