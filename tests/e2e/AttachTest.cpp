// memtool attach PID: a process memtool did not start, profiled from the moment
// memtool comes into it (ptrace, cli/attach) to the moment it lets go, and left
// running as it was. Each test drives the program and memtool attach at once,
// knowing where each is by the lines they print.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// "ready PID": the program's first line.
pid_t readyPid(Spawned& program) {
    const std::string line = program.readLine();
    if (line.rfind("ready ", 0) != 0) return -1;
    return static_cast<pid_t>(std::stol(line.substr(6)));
}

// The program's output with its pid left out (it differs between runs).
std::string withoutPid(const std::string& out) {
    const size_t eol = out.find('\n');
    return out.rfind("ready ", 0) == 0 && eol != std::string::npos ? "ready\n" + out.substr(eol + 1)
                                                                   : out;
}

// A target run bare: one SIGUSR1 (five allocations), then SIGUSR2 (its end).
Outcome bareRun(const std::vector<std::string>& argv) {
    Spawned program(argv);
    const pid_t pid = readyPid(program);
    if (pid <= 0) return program.wait();
    kill(pid, SIGUSR1);
    program.readLine();  // allocated
    kill(pid, SIGUSR2);
    return program.wait();
}

// memtool attach PID, started and past its "attached PID" line.
std::unique_ptr<Spawned> attachTo(pid_t pid, const std::string& trace,
                                  const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv{MEMTOOL_BIN, "attach", std::to_string(pid), "-o", trace};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto attach = std::make_unique<Spawned>(argv, controlEnv());
    const std::string line = attach->readLine();
    EXPECT_EQ(line, "attached " + std::to_string(pid)) << attach->wait().err;
    return attach;
}

// Ctrl-C: memtool detaches, writes the trace and exits.
Outcome detach(Spawned& attach) {
    if (!attach.reaped()) kill(attach.pid(), SIGINT);  // not a pid handed on since
    return attach.wait();
}

// Why this system does not let a process trace one that is not its child (memtool
// attach's case here: the test starts both), or "" when it does. Yama's
// ptrace_scope 1 or more, a container without CAP_SYS_PTRACE or a seccomp filter
// refuse it; memtool then refuses in one line (Attachable tests), and the tests
// that attach have nothing to attach with.
std::string tracingRefused() {
    static const std::string why = [] {
        const pid_t target = fork();
        if (target == 0) {
            pause();
            _exit(0);
        }
        const pid_t tracer = fork();
        if (tracer == 0) _exit(ptrace(PTRACE_SEIZE, target, nullptr, nullptr) == 0 ? 0 : errno);
        int status = 0;
        waitpid(tracer, &status, 0);  // its end lets the target go
        kill(target, SIGKILL);
        waitpid(target, nullptr, 0);
        const int err = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (err == 0) return std::string();
        return "this system refuses to let a process trace another that is not its child (" +
               std::string(err > 0 ? std::strerror(err) : "the probe died") +
               "): memtool attach cannot work here";
    }();
    return why;
}
#define SKIP_WITHOUT_TRACING() \
    if (const std::string refused = tracingRefused(); !refused.empty()) GTEST_SKIP() << refused

// The python target, attached to for one round of allocations and let go of.
struct AttachedRound {
    Outcome bare, program, attach;
    std::string tracePath;
    nlohmann::json trace;
};

AttachedRound attachedRound(const std::vector<std::string>& argv,
                            const std::vector<std::string>& flags = {}) {
    AttachedRound r;
    r.bare = bareRun(argv);
    r.tracePath = tempDir() + "/trace.json";
    Spawned program(argv);
    const pid_t pid = readyPid(program);
    EXPECT_GT(pid, 0) << program.wait().err;
    if (pid <= 0) return r;
    auto attach = attachTo(pid, r.tracePath, flags);
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "allocated 5000000");
    r.attach = detach(*attach);
    kill(pid, SIGUSR2);
    r.program = program.wait();
    if (r.attach.exitCode == 0) r.trace = readJson(r.tracePath);
    return r;
}

}  // namespace

// The issue's test: a bare Python program allocating 1,000,000-byte storages on a
// signal; attached, its five allocations are exactly 5,000,000 bytes at their
// line, and its output and exit code are a bare run's.
TEST(Attach, ABareProgramsFiveAllocationsAreExactAtTheirLine) {
    SKIP_WITHOUT_TRACING();
    const AttachedRound r = attachedRound({PYTHON_BIN, script("attach_target.py")});
    ASSERT_EQ(r.bare.exitCode, 3) << r.bare.err;
    ASSERT_EQ(r.attach.exitCode, 0) << r.attach.err;
    EXPECT_EQ(r.program.exitCode, r.bare.exitCode);
    EXPECT_EQ(withoutPid(r.program.out), withoutPid(r.bare.out));
    EXPECT_EQ(withoutPid(r.program.out), "ready\nallocated 5000000\ndone\n");
    EXPECT_EQ(r.program.err, r.bare.err);
    const nlohmann::json& p = r.trace.at("processes").at(0);
    EXPECT_EQ(p.at("attached"), true);
    EXPECT_EQ(p.at("detached"), true);
    EXPECT_EQ(p.at("exit_code"), nullptr);  // it ran on
    EXPECT_EQ(p.at("earlier_frees"), 1);    // the 2,000,000 bytes from before
    EXPECT_TRUE(p.at("complete").get<bool>()) << p.dump(1);
    const auto& cpu = p.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 5);
    EXPECT_EQ(cpu.at("allocated_bytes"), 5000000);
    EXPECT_EQ(cpu.at("free_count"), 0);
    EXPECT_EQ(cpu.at("current_bytes"), 5000000);
    const auto site = hotspotWithSite(p, "attach_target.py:21");
    ASSERT_FALSE(site.is_null()) << p.at("hotspots").dump(1);
    EXPECT_EQ(site.at("allocated_bytes"), 5000000);
    EXPECT_EQ(site.at("count"), 5);
    // Its main thread waited in sigwait when memtool attached: no safe point came
    // within the second memtool gives it to list what was there.
    EXPECT_EQ(p.at("live_at_attach").at("unlisted"),
              "the program's main thread did not reach a safe point within 1 s (it may be blocked "
              "in a system call: a sleep, I/O, a lock)");
    const Outcome text = run({MEMTOOL_BIN, "report", r.tracePath});
    EXPECT_NE(text.out.find(" · ran on (memtool attach detached) · "), std::string::npos)
        << text.out;
    EXPECT_NE(
        text.out.find("Earlier:  1 free of blocks allocated before memtool attached (not counted)"),
        std::string::npos)
        << text.out;
}

// The same of a LibTorch program, with its native stack: the allocating function
// at its line.
TEST(Attach, ALibTorchProgramsAllocationsHaveTheirNativeStack) {
    SKIP_WITHOUT_TRACING();
    if (std::string(ATTACH_TARGET_BIN).empty()) GTEST_SKIP() << "built without LibTorch";
    const AttachedRound r = attachedRound({ATTACH_TARGET_BIN});
    ASSERT_EQ(r.bare.exitCode, 3) << r.bare.err;
    ASSERT_EQ(r.attach.exitCode, 0) << r.attach.err;
    EXPECT_EQ(r.program.exitCode, 3);
    EXPECT_EQ(withoutPid(r.program.out), "ready\nallocated 5000000\ndone\n");
    const nlohmann::json& p = r.trace.at("processes").at(0);
    const auto& cpu = p.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 5);
    EXPECT_EQ(cpu.at("allocated_bytes"), 5000000);
    const auto site = hotspotWithSite(p, "AttachTarget.cpp:17");
    ASSERT_FALSE(site.is_null()) << p.at("hotspots").dump(1);
    EXPECT_EQ(site.at("allocated_bytes"), 5000000);
    EXPECT_NE(site.at("site").get<std::string>().find("allocateFive"), std::string::npos) << site;
    EXPECT_EQ(p.at("live_at_attach").at("unlisted"),
              "this program runs no Python interpreter: there are no Python tensors to list");
}

// resnet18 training, attached between two steps while it runs and let go of two
// steps later: every step's loss is a bare run's, bit for bit (memtool's calls
// in it leave every register, vector ones too, as they were).
TEST(Attach, ATrainingRunAttachedAndDetachedMidRunLosesNothing) {
    SKIP_WITHOUT_TRACING();
    SKIP_WITHOUT("torchvision");
    const std::vector<std::string> argv{PYTHON_BIN, script("attach_train.py"), "12"};
    Spawned bareProgram(argv);
    ASSERT_GT(readyPid(bareProgram), 0);
    const Outcome bare = bareProgram.wait();
    ASSERT_EQ(bare.exitCode, 0) << bare.err;

    const std::string trace = tempDir() + "/trace.json";
    Spawned program(argv);
    const pid_t pid = readyPid(program);
    ASSERT_GT(pid, 0);
    EXPECT_EQ(program.readLine().rfind("step 0 ", 0), 0u);
    auto attach = attachTo(pid, trace);
    std::string line;
    for (int steps = 0; steps < 2; ++steps) line = program.readLine();  // two steps while attached
    const Outcome a = detach(*attach);
    ASSERT_EQ(a.exitCode, 0) << a.err;
    const Outcome o = program.wait();
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(withoutPid(o.out), withoutPid(bare.out));
    const nlohmann::json p = readJson(trace).at("processes").at(0);
    EXPECT_GT(p.at("devices").at("cpu").at("alloc_count").get<uint64_t>(), 0u) << p.dump(1);
    EXPECT_EQ(p.at("detached"), true);
}

// Attached twice at once: the second is refused, the first goes on. Attached
// again after a detach: the new trace holds what came after it only.
TEST(Attach, AgainAfterADetachButNotTwiceAtOnce) {
    SKIP_WITHOUT_TRACING();
    const std::string dir = tempDir();
    Spawned program({PYTHON_BIN, script("attach_target.py")});
    const pid_t pid = readyPid(program);
    ASSERT_GT(pid, 0);
    auto first = attachTo(pid, dir + "/first.json");
    const Outcome twice =
        run({MEMTOOL_BIN, "attach", std::to_string(pid), "-o", dir + "/twice.json"});
    EXPECT_EQ(twice.exitCode, 2) << twice.err;
    EXPECT_EQ(twice.err,
              "memtool: attach: process " + std::to_string(pid) +
                  " is profiled already (memtool attach, or memtool.track in it): one at a time\n");
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "allocated 5000000");
    ASSERT_EQ(detach(*first).exitCode, 0);

    auto again = attachTo(pid, dir + "/again.json");
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "allocated 10000000");
    const Outcome a = detach(*again);
    ASSERT_EQ(a.exitCode, 0) << a.err;
    kill(pid, SIGUSR2);
    EXPECT_EQ(program.wait().exitCode, 3);
    for (const char* name : {"/first.json", "/again.json"}) {
        const nlohmann::json p = readJson(dir + name).at("processes").at(0);
        EXPECT_EQ(p.at("devices").at("cpu").at("allocated_bytes"), 5000000) << name;
        EXPECT_EQ(p.at("devices").at("cpu").at("alloc_count"), 5) << name;
    }
}

// The program ends while attached: memtool writes its trace, with its exit code.
TEST(Attach, TheProgramEndingEndsTheAttach) {
    SKIP_WITHOUT_TRACING();
    const std::string trace = tempDir() + "/trace.json";
    Spawned program({PYTHON_BIN, script("attach_target.py")});
    const pid_t pid = readyPid(program);
    ASSERT_GT(pid, 0);
    auto attach = attachTo(pid, trace);
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "allocated 5000000");
    kill(pid, SIGUSR2);
    const Outcome o = program.wait();
    EXPECT_EQ(o.exitCode, 3) << "signal " << o.signal << ": " << o.err;
    const Outcome a = attach->wait();
    ASSERT_EQ(a.exitCode, 0) << a.err;
    const nlohmann::json p = readJson(trace).at("processes").at(0);
    EXPECT_EQ(p.at("exit_code"), 3);
    EXPECT_FALSE(p.contains("detached"));
    EXPECT_TRUE(p.at("complete").get<bool>());
    EXPECT_EQ(p.at("devices").at("cpu").at("allocated_bytes"), 5000000);
}

// A main thread stopped in the middle of its own loop, its registers full of
// values it checks: after three attaches and detaches, every one (ymm0-14, rbx,
// r12-r15) is as it was.
TEST(Attach, EveryRegisterOfTheStoppedThreadIsAsItWas) {
    SKIP_WITHOUT_TRACING();
    if (std::string(REGISTER_KEEPER_BIN).empty()) GTEST_SKIP() << "built without LibTorch";
    Spawned program({REGISTER_KEEPER_BIN});
    const std::string first = program.readLine();
    if (first == "no avx2") GTEST_SKIP() << "this CPU has no AVX2";
    const pid_t pid = first.rfind("ready ", 0) == 0 ? std::stoi(first.substr(6)) : -1;
    ASSERT_GT(pid, 0) << first;
    for (int round = 0; round < 3; ++round) {
        const std::string trace = tempDir() + "/trace.json";
        auto attach = attachTo(pid, trace);
        const Outcome a = detach(*attach);
        ASSERT_EQ(a.exitCode, 0) << a.err;
    }
    kill(pid, SIGUSR1);
    const Outcome o = program.wait();
    EXPECT_EQ(o.out, first + "\nintact\n");
    EXPECT_EQ(o.exitCode, 0);
}

// memtool dies at each step of the injection (MEMTOOL_ATTACH_DIE_AT, Injection.h):
// the program runs on, its output and exit code a bare run's, and can be attached
// to again.
TEST(Attach, KilledAtAnyStepOfTheInjectionTheProgramRunsOn) {
    SKIP_WITHOUT_TRACING();
    const std::vector<std::string> argv{PYTHON_BIN, script("attach_target.py")};
    for (const std::string step : {"stopped", "loaded", "started"}) {
        SCOPED_TRACE(step);
        Spawned program(argv);
        const pid_t pid = readyPid(program);
        ASSERT_GT(pid, 0);
        const std::string dir = tempDir();
        Spawned dying({MEMTOOL_BIN, "attach", std::to_string(pid), "-o", dir + "/dead.json"},
                      {"MEMTOOL_ATTACH_DIE_AT=" + step});
        EXPECT_EQ(dying.wait().signal, SIGKILL);
        // Not left stopped, nor holding a track of the memtool that died.
        auto again = attachTo(pid, dir + "/again.json");
        kill(pid, SIGUSR1);
        EXPECT_EQ(program.readLine(), "allocated 5000000");
        ASSERT_EQ(detach(*again).exitCode, 0);
        kill(pid, SIGUSR2);
        const Outcome o = program.wait();
        EXPECT_EQ(o.exitCode, 3);
        EXPECT_EQ(withoutPid(o.out), "ready\nallocated 5000000\ndone\n");
        EXPECT_EQ(o.err, "");
        EXPECT_EQ(readJson(dir + "/again.json")
                      .at("processes")
                      .at(0)
                      .at("devices")
                      .at("cpu")
                      .at("allocated_bytes"),
                  5000000);
    }
}

// What cannot be attached to: one line, exit code 2, and the process untouched.
TEST(Attach, RefusalsAreOneLineAndTouchNothing) {
    const std::string trace = tempDir() + "/trace.json";
    auto refused = [&](pid_t pid, const std::vector<std::string>& wrapper = {}) {
        std::vector<std::string> argv = wrapper;
        for (const std::string& w : {std::string(MEMTOOL_BIN), std::string("attach"),
                                     std::to_string(pid), std::string("-o"), trace})
            argv.push_back(w);
        return run(argv);
    };
    auto expectRefusal = [](const Outcome& o, const std::string& line) {
        EXPECT_EQ(o.exitCode, 2) << o.err;
        EXPECT_EQ(o.err, "memtool: attach: " + line + "\n");
        EXPECT_EQ(o.out, "");
    };
    expectRefusal(refused(1), "pid 1 is the system's init process: memtool does not attach to it");

    // A process that exited and was reaped: no such process.
    const pid_t gone = fork();
    if (gone == 0) _exit(0);
    waitpid(gone, nullptr, 0);
    expectRefusal(refused(gone), "no process " + std::to_string(gone));

    // A zombie: exited, not reaped yet.
    const pid_t zombie = fork();
    if (zombie == 0) _exit(0);
    siginfo_t info{};
    waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT);  // it has exited
    expectRefusal(refused(zombie),
                  "process " + std::to_string(zombie) +
                      " is a zombie (it has exited; its parent has not reaped it)");
    waitpid(zombie, nullptr, 0);

    // Statically linked: no C library of the system's to load the collector with.
    {
        Spawned program({STATIC_PROGRAM_BIN, "wait"});
        const pid_t pid = readyPid(program);
        ASSERT_GT(pid, 0);
        const Outcome o = refused(pid);
        EXPECT_EQ(o.exitCode, 2);
        EXPECT_NE(o.err.find("does not use this system's C library"), std::string::npos) << o.err;
        EXPECT_NE(o.err.find("statically linked"), std::string::npos) << o.err;
        EXPECT_EQ(o.err.find('\n'), o.err.size() - 1);
        EXPECT_EQ(program.wait().exitCode, 0);  // it ran on, and ended when told
    }
    // Python without torch: nothing memtool tracks.
    {
        Spawned program(
            {PYTHON_BIN, "-c",
             "import os, sys; print('ready', os.getpid(), flush=True); sys.stdin.read(); "
             "print('done')"});
        const pid_t pid = readyPid(program);
        ASSERT_GT(pid, 0);
        expectRefusal(refused(pid), "nothing memtool tracks is loaded in process " +
                                        std::to_string(pid) +
                                        " (no libc10 of PyTorch, no CUDA runtime)");
        const Outcome o = program.wait();
        EXPECT_EQ(o.out, "ready " + std::to_string(pid) + "\ndone\n");
    }
    // Under memtool run already.
    {
        Spawned run({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/run.json", "--", PYTHON_BIN,
                     script("attach_target.py")},
                    controlEnv());
        const pid_t pid = readyPid(run);
        ASSERT_GT(pid, 0);
        expectRefusal(refused(pid), "process " + std::to_string(pid) +
                                        " runs under memtool run already, which records all of it");
        kill(pid, SIGUSR2);
        EXPECT_EQ(run.wait().exitCode, 3);
    }
    // Another user's: memtool run as nobody, where this test runs as root.
    if (geteuid() == 0) {
        Spawned program({PYTHON_BIN, script("attach_target.py")});
        const pid_t pid = readyPid(program);
        ASSERT_GT(pid, 0);
        expectRefusal(refused(pid, {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}),
                      "process " + std::to_string(pid) +
                          " belongs to another user (uid 0); memtool attaches to your own");
        kill(pid, SIGUSR2);
        EXPECT_EQ(program.wait().exitCode, 3);
    }
    // -o - : the trace goes to a file.
    const Outcome stdoutTrace = run({MEMTOOL_BIN, "attach", std::to_string(getpid()), "-o", "-"});
    expectRefusal(stdoutTrace, "the trace goes to a file: -o - is not available");
    // A duration as ctl's --timeout reads one: plain decimal, above 0.
    for (const char* duration : {"0", "0x10", "5s"}) {
        const Outcome o =
            run({MEMTOOL_BIN, "attach", std::to_string(getpid()), "--duration", duration});
        EXPECT_EQ(o.exitCode, 2) << duration;
        EXPECT_EQ(o.err, std::string("memtool: --duration: '") + duration +
                             "' is not a number of seconds above 0 (at most 10000000)\n");
    }
}

// The program killed in the middle of the injection: memtool says so, in one
// line, with the code of an attach that failed on the way (125).
TEST(Attach, AProgramKilledDuringTheInjectionIsSaidSo) {
    SKIP_WITHOUT_TRACING();
    for (const std::string step : {"stopped", "loaded"}) {
        SCOPED_TRACE(step);
        Spawned program({PYTHON_BIN, script("attach_target.py")});
        const pid_t pid = readyPid(program);
        ASSERT_GT(pid, 0);
        const Outcome o =
            run({MEMTOOL_BIN, "attach", std::to_string(pid), "-o", tempDir() + "/t.json"}, "",
                {"MEMTOOL_ATTACH_KILL_AT=" + step});
        EXPECT_EQ(o.exitCode, 125);
        EXPECT_EQ(o.err, "memtool: attach: process " + std::to_string(pid) +
                             " was killed by signal 9 during the attach\n");
        EXPECT_EQ(program.wait().signal, SIGKILL);
    }
}

// memtool ctl on an attached process: it is listed as attached, and its tensors
// reconcile to the byte with the storages memtool saw allocated, the one from
// before the attach named as what memtool cannot know.
TEST(Attach, CtlSeesTheAttachedProcessAndItsTensors) {
    SKIP_WITHOUT_TRACING();
    Spawned program({PYTHON_BIN, script("attach_busy.py")});
    const pid_t pid = readyPid(program);
    ASSERT_GT(pid, 0);
    const std::string pidText = std::to_string(pid);
    const std::string trace = tempDir() + "/trace.json";
    auto attach = attachTo(pid, trace);
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "allocated 5000000");

    const Outcome list = ctl({"--format", "json", "list"}, controlEnv());
    ASSERT_EQ(list.exitCode, 0) << list.err;
    const nlohmann::json processes = nlohmann::json::parse(list.out).at("processes");
    ASSERT_EQ(processes.size(), 1u) << list.out;
    EXPECT_EQ(processes.at(0).at("pid"), pid);
    EXPECT_EQ(processes.at(0).at("attached"), true);
    const Outcome listText = ctl({"list"}, controlEnv());
    EXPECT_NE(listText.out.find(pidText + " "), std::string::npos);
    EXPECT_NE(listText.out.find(" (attached) "), std::string::npos) << listText.out;

    const Outcome tensors = ctl({"--format", "json", pidText, "tensors"}, controlEnv());
    ASSERT_EQ(tensors.exitCode, 0) << tensors.err << tensors.out;
    const nlohmann::json body = nlohmann::json::parse(tensors.out).at("body");
    EXPECT_EQ(body.at("attached"), true);
    const nlohmann::json& cpu = body.at("devices").at(0);
    EXPECT_EQ(cpu.at("device"), "cpu");
    EXPECT_EQ(cpu.at("live_bytes"), 5000000);
    EXPECT_EQ(cpu.at("matched_bytes"), 5000000);
    EXPECT_EQ(cpu.at("invisible_bytes"), 0);
    EXPECT_EQ(cpu.at("exact"), true);
    EXPECT_EQ(cpu.at("outside_allocator_bytes"), 3000000);
    EXPECT_EQ(cpu.at("outside_allocator").at(0).at("name"), "kept");
    const Outcome text = ctl({pidText, "tensors"}, controlEnv());
    EXPECT_NE(text.out.find(
                  "Visible but not allocated while memtool was attached (before the attach, or "
                  "not torch's; not in the live bytes): 3,000,000 B\n        3,000,000 B  kept\n"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find(
                  "Live on cpu: 5,000,000 found from Python + 0 not visible = 5,000,000 B (exact)"),
              std::string::npos)
        << text.out;

    ASSERT_EQ(detach(*attach).exitCode, 0);
    kill(pid, SIGUSR2);
    EXPECT_EQ(program.wait().exitCode, 3);
    // Listed at the attach, before the round: `kept`, the one storage from before.
    const nlohmann::json p = readJson(trace).at("processes").at(0);
    const nlohmann::json& before = p.at("live_at_attach");
    EXPECT_GE(before.at("time_s").get<double>(), 0.0);
    EXPECT_EQ(before.at("storages"),
              nlohmann::json::parse(R"([{"device": "cpu", "name": "kept", "bytes": 3000000}])"));
    const Outcome report = run({MEMTOOL_BIN, "report", trace});
    EXPECT_NE(report.out.find("Before:   3,000,000 B in 1 storage on cpu from before the attach, "
                              "as Python saw them "),
              std::string::npos)
        << report.out;
}

// memtool attach --pausable all: what the program allocates from the attach on is
// memtool's to yield; a yield takes it (five storages, each rounded up to pages)
// and says what it could not take, the storage from before the attach.
TEST(Attach, AYieldTakesWhatCameAfterTheAttachAndNamesWhatItCannot) {
    SKIP_WITHOUT_TRACING();
    Spawned program({PYTHON_BIN, script("attach_busy.py")});
    const pid_t pid = readyPid(program);
    ASSERT_GT(pid, 0);
    const std::string pidText = std::to_string(pid);
    auto attach = attachTo(pid, tempDir() + "/trace.json", {"--pausable", "all"});
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "allocated 5000000");
    const uint64_t pages = (1000000 + 4095) / 4096 * 4096;

    const Outcome yielded =
        ctl({"--format", "json", pidText, "yield", "--to", "disk"}, controlEnv());
    ASSERT_EQ(yielded.exitCode, 0) << yielded.err << yielded.out;
    const nlohmann::json body = nlohmann::json::parse(yielded.out).at("body");
    EXPECT_EQ(body.at("bytes"), 5 * pages);
    EXPECT_EQ(body.at("allocations"), 5);
    EXPECT_EQ(body.at("before_attach_bytes"), 3000000);
    const Outcome restored = ctl({pidText, "restore"}, controlEnv());
    EXPECT_EQ(
        restored.out.rfind("restore: 4.79 MiB (" + std::to_string(5 * pages) + " bytes) in ", 0),
        0u)
        << restored.out;
    const Outcome again = ctl({pidText, "yield"}, controlEnv());
    EXPECT_NE(
        again.out.find("  not yielded: 2.86 MiB (3000000 bytes) in storages from before memtool "
                       "attached (as listed then; memtool does not serve them)\n"),
        std::string::npos)
        << again.out;
    ctl({pidText, "restore"}, controlEnv());

    ASSERT_EQ(detach(*attach).exitCode, 0);
    kill(pid, SIGUSR2);
    const Outcome o = program.wait();
    EXPECT_EQ(o.exitCode, 3);
    EXPECT_EQ(withoutPid(o.out), "ready\nallocated 5000000\ndone\n");
}

// A region the program declares once memtool attach came pauses to disk and
// resumes with its content; after the detach the hooks stay for it, and say so.
TEST(Attach, ARegionDeclaredAfterTheAttachPausesAndResumes) {
    SKIP_WITHOUT_TRACING();
    Spawned program({PYTHON_BIN, script("attach_region.py")}, packageEnv());
    const pid_t pid = readyPid(program);
    ASSERT_GT(pid, 0);
    const std::string pidText = std::to_string(pid), trace = tempDir() + "/trace.json";
    auto attach = attachTo(pid, trace);
    kill(pid, SIGUSR1);
    EXPECT_EQ(program.readLine(), "region True");
    const uint64_t pages = (1000000 + 4095) / 4096 * 4096;
    const Outcome paused = ctl({pidText, "pause", "kv"}, controlEnv());
    EXPECT_EQ(paused.out.rfind(
                  "pause 'kv': 980.00 KiB (" + std::to_string(pages) + " bytes) released", 0),
              0u)
        << paused.out << paused.err;
    const Outcome resumed = ctl({pidText, "resume", "kv"}, controlEnv());
    EXPECT_EQ(resumed.out.rfind(
                  "resume 'kv': 980.00 KiB (" + std::to_string(pages) + " bytes) restored", 0),
              0u)
        << resumed.out << resumed.err;
    ASSERT_EQ(detach(*attach).exitCode, 0);
    kill(pid, SIGUSR2);
    const Outcome o = program.wait();
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "region True\nsum 7000000\n");
    const nlohmann::json p = readJson(trace).at("processes").at(0);
    bool said = false;
    for (const auto& w : p.at("warnings"))
        said |= w.get<std::string>().find(
                    "memory regions still hold memory: memtool's hooks stay") == 0;
    EXPECT_TRUE(said) << p.at("warnings");
}
