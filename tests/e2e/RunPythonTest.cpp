// Real Python + torch (Debian's /usr/bin/python3) under the real `memtool run`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {}

TEST(RunPython, CountsEveryStorageToTheByte) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "views 10 (1000, 3000)\n");
    const auto& proc = p.process();
    EXPECT_TRUE(proc.at("complete").get<bool>());
    EXPECT_TRUE(proc.at("stream").at("verified").get<bool>());
    EXPECT_EQ(proc.at("exit_code"), 0);
    const auto& cpu = proc.at("devices").at("cpu");
    // Views and slices allocate nothing: three storages, counted once each.
    EXPECT_EQ(cpu.at("alloc_count"), 3);
    EXPECT_EQ(cpu.at("allocated_bytes"), 6000000);
    EXPECT_EQ(cpu.at("peak_bytes"), 5000000);  // a + c, the largest live sum
    EXPECT_EQ(cpu.at("free_count"), 3);        // the interpreter frees a and c at exit
    EXPECT_EQ(cpu.at("current_bytes"), 0);

    auto a = hotspotWithSite(proc, "storages.py:4");
    ASSERT_FALSE(a.is_null()) << proc.at("hotspots").dump(1);
    EXPECT_EQ(a.at("allocated_bytes"), 3000000);
    EXPECT_EQ(a.at("count"), 1);
    EXPECT_EQ(a.at("peak_bytes"), 3000000);  // live at the peak
    EXPECT_EQ(a.at("site"), "<module> (" + script("storages.py") + ":4)");
    auto b = hotspotWithSite(proc, "storages.py:10");
    ASSERT_FALSE(b.is_null());
    EXPECT_EQ(b.at("site"), "scratch (" + script("storages.py") + ":10)");
    EXPECT_EQ(b.at("peak_bytes"), 0);  // freed before the peak
    auto c = hotspotWithSite(proc, "storages.py:15");
    ASSERT_FALSE(c.is_null());
    EXPECT_EQ(c.at("peak_bytes"), 2000000);
}

// What profiling cost on top of the program: the CLI's CPU time beside the target's.
TEST(RunPython, TheTraceHasTheCpuTimeOfTheTargetAndOfTheCli) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    ASSERT_TRUE(p.trace.at("cli_cpu_s").is_number()) << p.trace.dump(1);
    ASSERT_TRUE(p.process().at("cpu_s").is_number());
    EXPECT_GT(p.trace.at("cli_cpu_s").get<double>(), 0);  // it read a stream
    EXPECT_GT(p.process().at("cpu_s").get<double>(), 0);  // it imported torch
}

TEST(RunPython, TheTimelinePeaksAtThePeak) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto& cpu = p.process().at("devices").at("cpu");
    const auto& points = p.process().at("timeline").at("cpu").at("points");
    ASSERT_GE(points.size(), 2u);
    // The first event (a) and the last (the interpreter's final free) are always kept;
    // b may share a bucket with its neighbours and be left out.
    EXPECT_EQ(points.front().at(1), 3000000);
    EXPECT_EQ(points.back().at(1), 0);
    nlohmann::json peak = points.front();
    for (const auto& point : points) {
        if (point.at(1) > peak.at(1)) peak = point;
        EXPECT_GE(point.at(0).get<double>(), 0.0);
    }
    EXPECT_EQ(peak.at(1), cpu.at("peak_bytes"));
    EXPECT_EQ(peak.at(0).get<double>(), cpu.at("peak_time_s").get<double>());
}

TEST(RunPython, NativeFramesSitInsideThePythonOnes) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")});
    auto a = hotspotWithSite(p.process(), "storages.py:4");
    ASSERT_FALSE(a.is_null());
    const auto& stack = a.at("stack");
    EXPECT_NE(stack.at(0).get<std::string>().find("c10::alloc_cpu"), std::string::npos)
        << stack.dump(1);
    EXPECT_EQ(stack.back(), "<module> (" + script("storages.py") + ":4)");
}

TEST(RunPython, NoPythonLeavesNativeStacksOnly) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")}, {"--no-python"});
    ASSERT_EQ(p.outcome.exitCode, 0);
    EXPECT_FALSE(p.process().at("python_stacks").get<bool>());
    EXPECT_EQ(p.process().at("devices").at("cpu").at("peak_bytes"), 5000000);
    for (const auto& h : p.process().at("hotspots"))
        EXPECT_EQ(h.at("stack").dump().find("storages.py"), std::string::npos);
    EXPECT_TRUE(p.process().at("lines").empty());
}

TEST(RunPython, NoNativeLeavesPythonStacksOnly) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")}, {"--no-native"});
    ASSERT_EQ(p.outcome.exitCode, 0);
    auto a = hotspotWithSite(p.process(), "storages.py:4");
    ASSERT_FALSE(a.is_null());
    EXPECT_EQ(a.at("stack"), nlohmann::json::array({"<module> (" + script("storages.py") + ":4)"}));
}

// The collector's own unwinder (CfiUnwinder) against libunwind's on a real model's
// training step: every hotspot, with its whole stack, the same; with Python stacks
// (native frames down to the interpreter) and without (down to _start).
TEST(RunPython, NativeStacksAreLibunwindsOnAModelsTrainingStep) {
    for (const std::vector<std::string>& flags :
         {std::vector<std::string>{"--site", "all"},
          std::vector<std::string>{"--site", "all", "--no-python"}}) {
        Profiled ours = profile({PYTHON_BIN, script("model_step.py")}, flags);
        Profiled theirs = profile({PYTHON_BIN, script("model_step.py")}, flags, "",
                                  {"MEMTOOL_NATIVE_UNWINDER=libunwind"});
        ASSERT_EQ(ours.outcome.exitCode, 0) << ours.outcome.err;
        ASSERT_EQ(theirs.outcome.exitCode, 0) << theirs.outcome.err;
        const auto& hotspots = ours.process().at("hotspots");
        ASSERT_GT(hotspots.size(), 50u) << flags.size();
        size_t deepest = 0;
        for (const auto& h : hotspots) deepest = std::max(deepest, h.at("stack").size());
        EXPECT_GT(deepest, 30u);
        EXPECT_EQ(hotspots, theirs.process().at("hotspots")) << flags.size();
    }
}

TEST(RunPython, SiteAllNamesTheInnermostFrame) {
    Profiled p = profile({PYTHON_BIN, script("storages.py")}, {"--site", "all"});
    for (const auto& h : p.process().at("hotspots"))
        EXPECT_NE(h.at("site").get<std::string>().find("c10::alloc_cpu"), std::string::npos);
}

TEST(RunPython, LineTableHasExactInclusivePeaks) {
    Profiled p = profile({PYTHON_BIN, script("lines.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto& proc = p.process();
    auto row = [&](int line) {
        auto r = lineRow(proc, "lines.py", line);
        EXPECT_FALSE(r.is_null()) << "no row for line " << line;
        return r;
    };
    // outer() holds 4 MiB and calls inner(), which allocates 8 MiB.
    EXPECT_EQ(row(16).at("peak_bytes"), 12 * MiB);  // the call
    EXPECT_EQ(row(11).at("peak_bytes"), 12 * MiB);  // the inner line
    EXPECT_EQ(row(11).at("self_allocated_bytes"), 8 * MiB);
    EXPECT_EQ(row(16).at("self_allocated_bytes"), 0);
    EXPECT_EQ(row(16).at("allocated_bytes"), 8 * MiB);
    EXPECT_EQ(row(15).at("peak_bytes"), 4 * MiB);
    EXPECT_EQ(row(18).at("peak_bytes"), 5 * MiB);  // 1 MiB while 4 MiB are live
    EXPECT_EQ(row(11).at("function"), "inner");
    // Module level: the call of outer() sees all three of its allocations.
    EXPECT_EQ(row(37).at("function"), "<module>");
    EXPECT_EQ(row(37).at("allocated_bytes"), 13 * MiB);
    EXPECT_EQ(row(37).at("count"), 3);
    EXPECT_EQ(row(37).at("peak_bytes"), 12 * MiB);
    // Recursion: line 25 stands three times on one stack, counted once.
    EXPECT_EQ(row(25).at("count"), 1);
    EXPECT_EQ(row(25).at("allocated_bytes"), 2 * MiB);
    EXPECT_EQ(row(24).at("self_allocated_bytes"), 2 * MiB);
    // A generator, resumed twice.
    EXPECT_EQ(row(30).at("count"), 2);
    EXPECT_EQ(row(30).at("allocated_bytes"), 6 * MiB);
    EXPECT_EQ(row(30).at("function"), "generate");
    // A lambda, and the line that calls it.
    EXPECT_EQ(row(41).at("function"), "<lambda>");
    EXPECT_EQ(row(41).at("self_allocated_bytes"), 7 * MiB);
    EXPECT_EQ(row(42).at("allocated_bytes"), 7 * MiB);
    // A threading.Thread carries its own Python frames.
    EXPECT_EQ(row(34).at("function"), "worker");
    EXPECT_EQ(row(34).at("allocated_bytes"), 6 * MiB);
    auto h = hotspotWithSite(proc, "lines.py:34");
    ASSERT_FALSE(h.is_null());
    EXPECT_EQ(h.at("site"), "worker (" + script("lines.py") + ":34)");
    EXPECT_NE(h.at("stack").dump().find("threading.py"), std::string::npos);
    EXPECT_EQ(proc.at("devices").at("cpu").at("peak_bytes"), 12 * MiB);
}

// Frames are read from the interpreter at each allocation, so a thread that was
// running before torch was imported has its Python frames too (under a profile
// function it had none), and an allocation made with the GIL released knows them.
TEST(RunPython, AThreadStartedBeforeImportingTorchHasItsFrames) {
    Profiled p = profile({PYTHON_BIN, script("early_thread_torch.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto& proc = p.process();
    EXPECT_EQ(proc.at("warnings"), nlohmann::json::array());
    auto h = hotspotWithSite(proc, "early_thread_torch.py:11");
    ASSERT_FALSE(h.is_null()) << proc.at("hotspots").dump(1);
    EXPECT_EQ(h.at("site"), "early_worker (" + script("early_thread_torch.py") + ":11)");
    EXPECT_EQ(h.at("allocated_bytes"), 5000000);
    EXPECT_NE(h.at("stack").dump().find("threading.py"), std::string::npos);
    EXPECT_EQ(lineRow(proc, "early_thread_torch.py", 11).at("peak_bytes"), 5000000);
}

// Where the frame layout does not read as the interpreter's C API says (here made
// so on purpose), the self-check sends Python stacks back to a profile function,
// the trace says why, and the stacks and lines are the very ones frame reading
// gives (LineTableHasExactInclusivePeaks checks those).
TEST(RunPython, AFrameLayoutThatFailsTheSelfCheckFallsBackToAProfileFunction) {
    Profiled read = profile({PYTHON_BIN, script("lines.py")});
    Profiled fallback =
        profile({PYTHON_BIN, script("lines.py")}, {}, "", {"MEMTOOL_TEST_PYTHON_LAYOUT=broken"});
    ASSERT_EQ(fallback.outcome.exitCode, 0) << fallback.outcome.err;
    EXPECT_EQ(read.process().at("warnings"), nlohmann::json::array());
    const auto& warnings = fallback.process().at("warnings");
    ASSERT_EQ(warnings.size(), 1u) << warnings;
    EXPECT_EQ(warnings[0].get<std::string>().rfind(
                  "Python stacks: the innermost frame read is not the one running (Python 3.", 0),
              0u)
        << warnings[0];
    EXPECT_NE(warnings[0].get<std::string>().find(
                  "); they are recorded with a profile function instead, which costs time on "
                  "every Python call"),
              std::string::npos)
        << warnings[0];
    EXPECT_EQ(fallback.process().at("lines"), read.process().at("lines"));
    EXPECT_EQ(fallback.process().at("hotspots"), read.process().at("hotspots"));
}

// Stacks that differ from the one before in one place (a middle frame, the
// depth, a generator): the frames read at each allocation are settled partly in
// the walk itself, and every figure is the one the profile function gives.
TEST(RunPython, StacksThatChangeInOnePlaceAreReadExactly) {
    Profiled read = profile({PYTHON_BIN, script("frame_reuse.py")});
    Profiled fallback = profile({PYTHON_BIN, script("frame_reuse.py")}, {}, "",
                                {"MEMTOOL_TEST_PYTHON_LAYOUT=broken"});
    ASSERT_EQ(read.outcome.exitCode, 0) << read.outcome.err;
    ASSERT_EQ(fallback.outcome.exitCode, 0) << fallback.outcome.err;
    const auto& proc = read.process();
    EXPECT_EQ(proc.at("warnings"), nlohmann::json::array());
    struct Row {
        int line;
        int allocatedBytes;
        int count;
    };
    for (const Row& want : {Row{13, 300000, 100}, Row{17, 100000, 100}, Row{21, 400000, 200},
                            Row{26, 6000, 60}, Row{27, 4500, 45},  // depths 1-3: 45 of the 60
                            Row{32, 500, 50}, Row{9, 406500, 310}}) {
        const auto r = lineRow(proc, "frame_reuse.py", want.line);
        ASSERT_FALSE(r.is_null()) << "no row for line " << want.line << proc.at("lines").dump(1);
        EXPECT_EQ(r.at("allocated_bytes"), want.allocatedBytes) << "line " << want.line;
        EXPECT_EQ(r.at("count"), want.count) << "line " << want.line;
    }
    EXPECT_EQ(fallback.process().at("lines"), proc.at("lines"));
    EXPECT_EQ(fallback.process().at("hotspots"), proc.at("hotspots"));
}

TEST(RunPython, ExitCodeAndOutputPassThrough) {
    Profiled p = profile({PYTHON_BIN, script("exit_code.py"), "3"});
    EXPECT_EQ(p.outcome.exitCode, 3);
    EXPECT_EQ(p.outcome.out, "stdout passes through\n");
    EXPECT_EQ(p.outcome.err, "stderr passes through\n");
    EXPECT_EQ(p.process().at("exit_code"), 3);
    EXPECT_TRUE(p.process().at("complete").get<bool>());
}

TEST(RunPython, StdinAndAnExistingPreloadPassThrough) {
    std::string trace = tempDir() + "/t.json";
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("echo_stdin.py")},
            "hello\n", {"LD_PRELOAD=libm.so.6"});
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "HELLO\n");
    EXPECT_NE(o.err.find(":libm.so.6\n"), std::string::npos) << o.err;
    EXPECT_EQ(readJson(trace).at("processes").at(0).at("devices").at("cpu").at("allocated_bytes"),
              10);
}

// SIGKILL, as the kernel's OOM killer sends it: the stream has no end, and the
// records the collector still held, unsent, are read back from its shared
// buffer; the counts it kept beside them match, so the trace is whole. The run
// still failed: memtool check says the program was killed.
TEST(RunPython, SigkillStillWritesAWholeTraceWithEveryAllocation) {
    Profiled p = profile({PYTHON_BIN, script("killed.py")});
    EXPECT_EQ(p.outcome.signal, SIGKILL);  // memtool dies the way its target died
    EXPECT_TRUE(p.process().at("complete").get<bool>()) << p.process().at("incomplete_reason");
    EXPECT_TRUE(p.process().at("stream").at("verified").get<bool>());
    EXPECT_TRUE(p.process().at("stream").at("read_back").get<bool>());
    // The collector's lock counts come with its end record: none here.
    EXPECT_FALSE(p.process().at("stream").contains("lock_contended"));
    EXPECT_EQ(p.process().at("exit_signal"), SIGKILL);
    const auto& cpu = p.process().at("devices").at("cpu");
    EXPECT_EQ(cpu.at("allocated_bytes"), 5000000);
    EXPECT_EQ(cpu.at("alloc_count"), 6);
    EXPECT_EQ(cpu.at("current_bytes"), 5000000);
    const std::string trace = tempDir() + "/killed.json";
    std::ofstream(trace) << p.trace.dump();
    Outcome check = run({MEMTOOL_BIN, "check", trace});
    EXPECT_EQ(check.exitCode, 1);
    EXPECT_EQ(check.out,
              "FAIL  the program was killed by signal 9 before memtool's collector could end its "
              "stream\nPASS  no process ran out of memory\n"
              "memtool check: 2 checks, 1 failed\n");
    Outcome allowed = run({MEMTOOL_BIN, "check", trace, "--allow-incomplete"});
    EXPECT_EQ(allowed.exitCode, 0) << allowed.out;
}

// The same loop with its events folded into Window records and sent one by one:
// every figure of the trace is the same, and it is exact.
TEST(RunPython, FoldedEventsGiveTheSameTraceAsEventsSentOneByOne) {
    Profiled folded = profile({PYTHON_BIN, script("fold_loop.py")}, {}, "", {"MEMTOOL_FOLD=2"});
    Profiled plain = profile({PYTHON_BIN, script("fold_loop.py")}, {}, "", {"MEMTOOL_FOLD=0"});
    ASSERT_EQ(folded.outcome.exitCode, 0) << folded.outcome.err;
    ASSERT_EQ(plain.outcome.exitCode, 0) << plain.outcome.err;
    const auto& f = folded.process();
    const auto& p = plain.process();
    EXPECT_TRUE(f.at("stream").at("verified").get<bool>());
    EXPECT_EQ(f.at("stream").at("allocs"), p.at("stream").at("allocs"));
    // A stream the collector ended says how often its threads met at its lock.
    for (const auto* s : {&f, &p}) {
        EXPECT_TRUE(s->at("stream").contains("lock_contended")) << s->at("stream").dump();
        EXPECT_TRUE(s->at("stream").contains("lock_waits"));
    }
    // Two records an iteration one by one; a few a buffer folded.
    EXPECT_GT(p.at("stream").at("records").get<int>(), 60'000);
    EXPECT_LT(f.at("stream").at("records").get<int>() * 4, p.at("stream").at("records").get<int>());
    const auto& cpu = f.at("devices").at("cpu");
    for (const char* key : {"alloc_count", "allocated_bytes", "free_count", "freed_bytes",
                            "peak_bytes", "current_bytes", "leaked_bytes"})
        EXPECT_EQ(cpu.at(key), p.at("devices").at("cpu").at(key)) << key;
    auto row = [](const nlohmann::json& proc, int line) {
        return lineRow(proc, "fold_loop.py", line);
    };
    EXPECT_EQ(row(f, 7).at("allocated_bytes"), 30'000 * 256);
    EXPECT_EQ(row(f, 7).at("count"), 30'000);
    EXPECT_EQ(row(f, 9).at("allocated_bytes"), 30 * 4000);
    EXPECT_EQ(row(f, 10).at("peak_bytes"), (1 << 22) + 30 * 4000 + 256);
    for (int line : {7, 9, 10}) EXPECT_EQ(row(f, line), row(p, line)) << "line " << line;
    EXPECT_EQ(f.at("hotspots"), p.at("hotspots"));
    EXPECT_EQ(f.at("lines"), p.at("lines"));
}

TEST(RunPython, SigtermToMemtoolReachesTheTarget) {
    std::string trace = tempDir() + "/t.json";
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("wait_for_term.py")},
            "", {}, [](pid_t memtool, const std::string& first) {
                ASSERT_EQ(first, "ready");
                kill(memtool, SIGTERM);
            });
    EXPECT_EQ(o.exitCode, 7) << o.err;
    EXPECT_EQ(o.out, "ready\ngot SIGTERM\n");
    auto proc = readJson(trace).at("processes").at(0);
    EXPECT_EQ(proc.at("exit_code"), 7);
    EXPECT_EQ(proc.at("devices").at("cpu").at("allocated_bytes"), 1000);
}

namespace {

// Runs tests/e2e/scripts/daemon.py under `memtool run -q EXTRA...`, then lets its
// daemon go (it waits on a FIFO); checks that the program ran whole and the
// daemon was still waiting when memtool run ended, and sets `processes` to the
// trace's: the program's, then the daemon's. With `err`, memtool run is not -q
// and its stderr goes there. Call it in ASSERT_NO_FATAL_FAILURE.
void runLeavingADaemon(const std::vector<std::string>& extra, nlohmann::json* processes,
                       std::string* err = nullptr) {
    const std::string dir = tempDir();
    const std::string trace = dir + "/t.json", fifo = dir + "/release";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::vector<std::string> args{MEMTOOL_BIN, "run", "-o", trace};
    if (!err) args.push_back("-q");
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", PYTHON_BIN, script("daemon.py"), fifo});
    Outcome o = run(args);
    // The daemon goes now; without a reader (it died) the open fails rather than waits.
    const int release = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    EXPECT_GE(release, 0) << "the daemon is not waiting: " << std::strerror(errno);
    if (release >= 0) {
        EXPECT_EQ(write(release, "go", 2), 2);
        close(release);
    }
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "program exits\n");
    if (err) *err = o.err;
    *processes = readJson(trace).at("processes");
    ASSERT_EQ(processes->size(), 2u) << processes->dump(1);
    EXPECT_TRUE(processes->at(0).at("complete").get<bool>()) << processes->at(0).dump(1);
    EXPECT_EQ(processes->at(0).at("stream").at("verified"), true);
    EXPECT_FALSE(processes->at(1).at("complete").get<bool>());
}

}  // namespace

// A daemon the program started (double fork, new session) streams on after the
// program exits: memtool run waits for it 10 s (--wait-children's default), then
// writes the trace with the daemon unfinished and says so, and exits with the
// program's code.
TEST(RunPython, ADaemonStillRunningTenSecondsAfterTheProgramIsTracedUnfinished) {
    nlohmann::json processes;
    ASSERT_NO_FATAL_FAILURE(runLeavingADaemon({}, &processes));
    const nlohmann::json& unfinished = processes.at(1);
    EXPECT_EQ(unfinished.at("incomplete_reason"),
              "the process was still running 10 s after the program exited, when memtool run "
              "stopped waiting for it");
    EXPECT_EQ(unfinished.at("devices").at("cpu").at("allocated_bytes"), 4000);
}

// A second into the wait, memtool run says what it waits for and until when (the
// program's output has ended: it would seem to hang); -q keeps it quiet.
TEST(RunPython, AWaitForProcessesLeftRunningIsSaid) {
    nlohmann::json processes;
    std::string err;
    ASSERT_NO_FATAL_FAILURE(runLeavingADaemon({"--wait-children", "2"}, &processes, &err));
    const std::string daemon = std::to_string(processes.at(1).at("pid").get<int64_t>());
    EXPECT_NE(err.find("memtool: the program exited; 1 process still running (pid " + daemon +
                       "): waiting for it until 2 s after the exit (--wait-children sets how "
                       "long)\n"),
              std::string::npos)
        << err;
    // A wait of a second or less says nothing.
    ASSERT_NO_FATAL_FAILURE(runLeavingADaemon({"--wait-children", "1"}, &processes, &err));
    EXPECT_EQ(err.find("the program exited;"), std::string::npos) << err;
}

// --wait-children 0: memtool run waits for no process the program left running;
// what has arrived is read (the program's own stream whole, the daemon's
// handshake), and the daemon is written as incomplete, saying why.
TEST(RunPython, WaitChildrenZeroLeavesADaemonRunningUnwaited) {
    nlohmann::json processes;
    ASSERT_NO_FATAL_FAILURE(runLeavingADaemon({"--wait-children", "0"}, &processes));
    EXPECT_EQ(processes.at(1).at("incomplete_reason"),
              "the process was still running when the program exited (memtool run "
              "--wait-children 0 waits for none)");

    Outcome bad = run({MEMTOOL_BIN, "run", "--wait-children", "-1", "--", PYTHON_BIN, "-c", ""});
    EXPECT_EQ(bad.exitCode, 2) << bad.err;
    EXPECT_NE(bad.err.find("memtool: --wait-children: '-1' is not a number of seconds from 0 "
                           "to 10000000\n"),
              std::string::npos)
        << bad.err;
}

// A process the program left running that never connected (it loads no tracked
// allocator) is not in the trace, and the trace says so, naming it; one that had
// ended is not named. memtool reads /proc for them only when it has children left.
TEST(RunPython, AProcessLeftRunningThatNeverConnectedIsNamed) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "--wait-children", "0", "-o", trace, "--", "/bin/sh", "-c",
             "sleep 60 </dev/null >/dev/null 2>&1 & p=$!; "
             // named sleep once it has exec'd
             "until read -r n </proc/$p/comm && [ \"$n\" = sleep ]; do :; done; echo $p"});
    const pid_t sleeper = static_cast<pid_t>(std::atoi(o.out.c_str()));
    ASSERT_GT(sleeper, 0) << o.out;
    kill(sleeper, SIGKILL);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const nlohmann::json processes = readJson(trace).at("processes");
    ASSERT_EQ(processes.size(), 1u) << processes.dump(1);
    EXPECT_EQ(processes.at(0).at("warnings"),
              nlohmann::json::array({"the program loaded no allocator memtool tracks (no libc10 "
                                     "CPU allocator)",
                                     "pid " + std::to_string(sleeper) +
                                         " (sleep) was still running when memtool run stopped "
                                         "waiting and had not connected: it is not in the trace"}));

    // Nothing left: only what is said of any such program.
    o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", "/bin/sh", "-c", "/bin/true; exit 3"});
    ASSERT_EQ(o.exitCode, 3) << o.err;
    EXPECT_EQ(readJson(trace).at("processes").at(0).at("warnings"),
              nlohmann::json::array(
                  {"the program loaded no allocator memtool tracks (no libc10 CPU allocator)"}));
}

TEST(RunPython, TargetRunsOnWhenTheCliDies) {
    std::string trace = tempDir() + "/t.json";
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("outlive_cli.py")}, "",
            {}, [](pid_t memtool, const std::string& first) {
                ASSERT_EQ(first.rfind("ready ", 0), 0u) << first;
                pid_t target = static_cast<pid_t>(std::stol(first.substr(6)));
                kill(memtool, SIGKILL);
                int status;
                waitpid(memtool, &status, 0);  // gone for sure before the target goes on
                kill(target, SIGUSR1);
            });
    // memtool was reaped in the callback; the target kept the pipes and finished.
    EXPECT_NE(o.out.find("survived 50000\n"), std::string::npos) << o.out << o.err;
    EXPECT_NE(o.err.find("memtool: lost the connection to `memtool run`; profiling stopped\n"),
              std::string::npos)
        << o.err;
}

TEST(RunPython, ForkNeitherDeadlocksNorCorruptsTheStream) {
    Profiled p = profile({PYTHON_BIN, script("fork_child.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "forked 20 children\n");
    const auto& proc = p.process();
    EXPECT_TRUE(proc.at("complete").get<bool>());
    EXPECT_TRUE(proc.at("stream").at("verified").get<bool>());
    // Each child is a process of its own (ProcessesTest.cpp): none wrote into this stream.
    ASSERT_EQ(p.trace.at("processes").size(), 21u);
    const auto& cpu = proc.at("devices").at("cpu");
    // The churn thread allocates 1,000 bytes at a time; the 5 MB child storages never appear.
    uint64_t count = cpu.at("alloc_count");
    EXPECT_EQ(cpu.at("allocated_bytes").get<uint64_t>(), 3000000 + (count - 1) * 1000);
    EXPECT_LT(cpu.at("peak_bytes").get<uint64_t>(), 5000000u);
    auto kept = hotspotWithSite(proc, "fork_child.py:19");
    ASSERT_FALSE(kept.is_null());
    EXPECT_EQ(kept.at("allocated_bytes"), 3000000);
}

// The collector finds CPython's API at run time: one build serves every version.
// libc10 through ctypes needs no torch, so any interpreter can be profiled: these run
// on the test Python, on Debian's (its libpython linked into the executable; label
// torch1.13) and on pyenv's 3.12 and 3.13 (labels python3.12, python3.13), through
// E2E_PYTHON_BIN (tests/CMakeLists.txt).
TEST(RunPython, StacksLinesAndThreadsOnEveryInterpreter) {
    Profiled p = profile({PYTHON_BIN, script("c10_ctypes.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "ok\n");
    const auto& proc = p.process();
    EXPECT_TRUE(proc.at("complete").get<bool>());
    EXPECT_EQ(proc.at("devices").at("cpu").at("peak_bytes"), 12000000);
    EXPECT_EQ(proc.at("devices").at("cpu").at("allocated_bytes"), 13000000);
    auto row = [&](int line) { return lineRow(proc, "c10_ctypes.py", line); };
    ASSERT_FALSE(row(17).is_null()) << proc.at("lines").dump(1);
    EXPECT_EQ(row(17).at("peak_bytes"), 12000000);
    EXPECT_EQ(row(17).at("self_allocated_bytes"), 8000000);
    EXPECT_EQ(row(22).at("peak_bytes"), 12000000);
    EXPECT_EQ(row(22).at("self_allocated_bytes"), 0);
    EXPECT_EQ(row(21).at("peak_bytes"), 4000000);
    EXPECT_EQ(row(31).at("allocated_bytes"), 12000000);
    EXPECT_EQ(row(28).at("function"), "worker");
    EXPECT_EQ(hotspotWithSite(proc, "c10_ctypes.py:17").at("site"),
              "inner (" + script("c10_ctypes.py") + ":17)");
    auto thread = hotspotWithSite(proc, "c10_ctypes.py:28");
    ASSERT_FALSE(thread.is_null());
    EXPECT_NE(thread.at("stack").dump().find("threading.py"), std::string::npos);
}

// Frames read without a profile function, on every interpreter whose layout
// memtool knows: a thread started before libc10 was loaded has its frames.
TEST(RunPython, ThreadsStartedBeforeTheCollectorHaveTheirFrames) {
    Profiled p = profile({PYTHON_BIN, script("early_thread.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "profile hook none\n");  // nothing runs between allocations
    const auto& proc = p.process();
    EXPECT_EQ(proc.at("warnings"), nlohmann::json::array());
    auto h = hotspotWithSite(proc, "early_thread.py:16");
    ASSERT_FALSE(h.is_null()) << proc.at("hotspots").dump(1);
    EXPECT_EQ(h.at("site"), "early_worker (" + script("early_thread.py") + ":16)");
    EXPECT_EQ(h.at("allocated_bytes"), 3000000);
    EXPECT_NE(h.at("stack").dump().find("threading.py"), std::string::npos);
    EXPECT_EQ(lineRow(proc, "early_thread.py", 16).at("allocated_bytes"), 3000000);
}

// An interpreter whose frame layout memtool does not know (3.10) is profiled with a
// profile function, as before, and the trace says so: its lines are the ones frame
// reading gives on Debian's 3.11.
TEST(RunPython, AnUnknownFrameLayoutIsProfiledTheOldWayAndSaidSo) {
    const std::string python = "/root/.pyenv/versions/3.10.13/bin/python3.10";
    if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << python << " is not installed here";
    Profiled old = profile({python, script("c10_ctypes.py")});
    Profiled read = profile({PYTHON_BIN, script("c10_ctypes.py")});
    ASSERT_EQ(old.outcome.exitCode, 0) << old.outcome.err;
    EXPECT_EQ(old.outcome.out, "ok\n");
    EXPECT_EQ(old.process().at("warnings"),
              nlohmann::json::array(
                  {"Python stacks: memtool does not know this Python version's frame layout "
                   "(Python 3.10.13); they are recorded with a profile function instead, which "
                   "costs time on every Python call"}));
    auto scriptRows = [](const nlohmann::json& proc) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& l : proc.at("lines"))
            if (l.at("file") == script("c10_ctypes.py")) rows.push_back(l);
        return rows;
    };
    EXPECT_EQ(scriptRows(old.process()).size(), 5u) << old.process().at("lines").dump(1);
    EXPECT_EQ(scriptRows(old.process()), scriptRows(read.process()));
}

// argv, the working directory and file names are bytes, and need not be UTF-8;
// trace.json is JSON. Such bytes become U+FFFD: the trace is written and the
// program's exit code returned (this used to be "internal error", 125, no trace).
TEST(RunPython, BytesThatAreNotUtf8CostNoTrace) {
    const std::string base = tempDir();
    const std::string dir = base + "/dir\xff";
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    const std::string program = dir + "/bad\xfe.py";
    std::ofstream(program) << "import sys, torch\n"
                              "x = torch.empty(1000, dtype=torch.uint8)\n"
                              "sys.exit(3)\n";
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, program, "\xfd"}, "",
                    {}, nullptr, dir);
    EXPECT_EQ(o.exitCode, 3);
    EXPECT_EQ(o.err, "");
    const nlohmann::json p = readJson(trace).at("processes").at(0);
    const std::string r = "\xef\xbf\xbd";  // U+FFFD, in UTF-8
    EXPECT_EQ(p.at("command"),
              nlohmann::json({PYTHON_BIN, base + "/dir" + r + "/bad" + r + ".py", r}));
    EXPECT_EQ(p.at("cwd"), base + "/dir" + r);
    EXPECT_EQ(p.at("exit_code"), 3);
    EXPECT_EQ(p.at("devices").at("cpu").at("allocated_bytes"), 1000);
    // The script's frame, by function and line. Its file name cannot be told yet:
    // the collector gets no UTF-8 for it from CPython and sends it empty.
    int scriptFrames = 0;
    for (const auto& f : p.at("frames"))
        scriptFrames +=
            f.at("kind") == "python" && f.at("function") == "<module>" && f.at("line") == 2;
    EXPECT_EQ(scriptFrames, 1) << p.at("frames").dump();
}
