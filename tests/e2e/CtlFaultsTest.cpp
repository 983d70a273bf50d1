// memtool ctl under faults and abuse (issue 51): requests over the limits, a run
// that does not answer, a client that gives up, a program that dies mid-command,
// answers that are not what they should be, a backup's descriptor taken over.
// Most play the collector with fake_collector.py (no torch); those that need the
// real one run ctl_target.py on the tests' torch.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// One JSON line to the run whose CLI is `memtool` (its socket in the control
// directory), and the line it answers: what ctl would send, unchecked.
nlohmann::json askRun(pid_t memtool, const nlohmann::json& request) {
    const std::string path = controlDir() + "/run-" + std::to_string(memtool) + ".sock";
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(fd);
        return nullptr;
    }
    const std::string line = request.dump() + "\n";
    if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
        close(fd);
        return nullptr;
    }
    std::string reply;
    char buf[4096];
    for (ssize_t n; reply.find('\n') == std::string::npos && (n = read(fd, buf, sizeof buf)) > 0;)
        reply.append(buf, static_cast<size_t>(n));
    close(fd);
    return nlohmann::json::parse(reply.substr(0, reply.find('\n')), nullptr, false);
}

std::vector<std::string> tags(int n, size_t bytes = 2) {
    std::vector<std::string> t;
    for (int i = 0; i < n; ++i) t.push_back(std::string(bytes - 1, 't') + std::to_string(i % 10));
    return t;
}

std::vector<std::string> words(std::vector<std::string> head,
                               const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
}

}  // namespace

// A pause of 65 tags or of one over 4096 bytes used to be left unanswered, and the
// collector's channel deaf for the rest of the run: every later ctl waited out its
// timeout. Now it is refused with the limit, and the next request is answered.
TEST(CtlFaults, ARequestOverTheLimitsIsRefusedAndTheChannelGoesOn) {
    nlohmann::json manyTags, longTag;
    Outcome status, ctlTooMany;
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--backup-dir", tempDir(), "--",
         PYTHON_BIN, script("ctl_target.py"), "wait"},
        "", controlEnv(), [&](pid_t memtool, const std::string& first) {
            ASSERT_EQ(first.rfind("ready ", 0), 0u) << first;
            const std::string pid = first.substr(6);
            const int target = std::stoi(pid);
            manyTags =
                askRun(memtool,
                       {{"op", "request"}, {"pid", target}, {"argv", words({"pause"}, tags(65))}});
            longTag = askRun(
                memtool,
                {{"op", "request"}, {"pid", target}, {"argv", {"pause", std::string(4097, 'x')}}});
            status = ctl({"--timeout", "30", pid, "status"}, controlEnv());
            ctlTooMany = ctl(words({pid, "pause"}, tags(65)), controlEnv());
            kill(target, SIGUSR1);
        });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(manyTags.at("status"), "failed") << manyTags;
    EXPECT_EQ(manyTags.at("body").at("error"), "a request of more than 65 words (64 tags)");
    EXPECT_EQ(longTag.at("status"), "failed") << longTag;
    EXPECT_EQ(longTag.at("body").at("error"), "a word of more than 4096 bytes");
    EXPECT_EQ(status.exitCode, 0) << status.err;
    EXPECT_NE(status.out.find("w                        cpu      disk      16.00 MiB"),
              std::string::npos)
        << status.out;
    // ctl itself says so before sending, as a usage error.
    EXPECT_EQ(ctlTooMany.exitCode, 2);
    EXPECT_EQ(ctlTooMany.err, "memtool: ctl: pause takes 64 tags at most in one command, not 65\n");
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "intact True\n");
}

// What ctl can tell is wrong before it asks anyone is a usage error (2), whatever
// runs: process ids as the kernel writes them, the words each command takes, and a
// request memtool run can read (64 KiB).
TEST(CtlFaults, CtlRefusesWhatNoProcessCouldTake) {
    struct Case {
        std::vector<std::string> words;
        std::string err;
    };
    const std::vector<Case> cases = {
        {{"4294967297", "status"}, "memtool: ctl: '4294967297' is not a process id (or list)\n"},
        {{"99999999999999999999", "status"},
         "memtool: ctl: '99999999999999999999' is not a process id (or list)\n"},
        {{" 12", "status"}, "memtool: ctl: ' 12' is not a process id (or list)\n"},
        {{"+12", "status"}, "memtool: ctl: '+12' is not a process id (or list)\n"},
        {{"0", "status"}, "memtool: ctl: '0' is not a process id (or list)\n"},
        {{"12", "snapshot", "extra"}, "memtool: ctl: snapshot takes no arguments, not 'extra'\n"},
        {{"12", "status", "now"}, "memtool: ctl: status takes no arguments, not 'now'\n"},
        {{"12", "yield", "--wait", "-1"},
         "memtool: ctl: yield --wait takes seconds (above 0, at most 10000000), not '-1'\n"},
        {{"12", "yield", "--to", "tape"},
         "memtool: ctl: yield --to takes host or disk, not 'tape'\n"},
        {{"12", "yield", "now"},
         "memtool: ctl: yield takes [--to host|disk] [--wait SECONDS], not 'now'\n"},
        {{"12", "tensors", "--device", "cpu:0"},
         "memtool: ctl: tensors --device takes cpu, cuda:N or npu:N, not 'cpu:0'\n"},
        {{"12", "pause", std::string(4097, 'x')},
         "memtool: ctl: a tag is at most 4096 bytes, without NUL bytes; tag 1 is 4097 bytes\n"},
        {{"12", "frobnicate"},
         "memtool: ctl: unknown command 'frobnicate' (status, pause, resume, yield, restore, "
         "tensors, snapshot, policy)\n"},
        {{"12", "\x1b[2J"},
         "memtool: ctl: unknown command '\\x1b[2J' (status, pause, resume, yield, restore, "
         "tensors, snapshot, policy)\n"},
        {{"12", "pause", "\x1b[2J"}, ""},  // fine as a tag: only its display is escaped
        {words({"12", "pause"}, tags(20, 4000)),
         "memtool: ctl: the command is 80103 bytes; memtool run takes 65536 at most\n"},
    };
    for (const Case& c : cases) {
        Outcome o = ctl(c.words, controlEnv());
        if (c.err.empty()) {  // sent on: no process 12 of ours runs under memtool
            EXPECT_TRUE(o.exitCode == 3 || o.exitCode == 4) << o.exitCode << " " << o.err;
            continue;
        }
        EXPECT_EQ(o.exitCode, 2) << c.words[0] << " " << c.words[1];
        EXPECT_EQ(o.err, c.err);
    }
}

// A run whose CLI is stopped (Ctrl-Z, a debugger) used to hold up every ctl for the
// whole timeout, `list` included. A socket that is listened on and never accepted
// from is what the kernel makes of such a run: the connection is taken into its
// backlog, and nothing answers.
TEST(CtlFaults, AStoppedRunHoldsUpNoOtherRunAndIsNamed) {
    const std::string silentPath = controlDir() + "/run-4000001.sock";
    const int silent = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, silentPath.c_str(), silentPath.size() + 1);
    ::mkdir(controlDir().c_str(), 0700);
    ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(silent, 8), 0);
    // 3 s for every run to say what it runs: the live one answers at once, even on a
    // loaded machine; the silent one costs each ctl that long.
    Outcome list, status, elsewhere;
    std::string target;
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--", PYTHON_BIN,
         script("fake_collector.py"), "reply",
         R"({"regions":[],"host_pool_bytes":0,"memory_margin_bytes":0})"},
        "", controlEnv(), [&](pid_t, const std::string& first) {
            target = first;
            list = ctl({"--timeout", "3", "list"}, controlEnv());
            status = ctl({"--timeout", "3", first, "status"}, controlEnv());
            elsewhere = ctl({"--timeout", "3", std::to_string(getpid()), "status"}, controlEnv());
            kill(std::stoi(first), SIGUSR1);
        });
    close(silent);
    unlink(silentPath.c_str());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const std::string named =
        "memtool: memtool run 4000001 did not answer within 3 s (stopped, or busy); its "
        "processes are left out\n";
    EXPECT_EQ(list.exitCode, 0);
    EXPECT_EQ(list.err, named);
    EXPECT_NE(list.out.find(target + " "), std::string::npos) << list.out;
    EXPECT_EQ(status.exitCode, 0) << status.err;
    EXPECT_EQ(status.out, "No pausable regions.\n");
    EXPECT_EQ(status.err, named);
    EXPECT_EQ(elsewhere.exitCode, 3);
    EXPECT_EQ(elsewhere.err, named + "memtool: process " + std::to_string(getpid()) +
                                 " is not among the processes of the runs that answered; "
                                 "memtool run 4000001 did not answer\n");
}

// A target's answer is untrusted input: a field of the wrong type or range is one
// line and exit 1 (it was exit 70, json.exception.type_error.302, or -1 bytes shown
// as 16384.00 PiB), and text from it never reaches the terminal raw.
TEST(CtlFaults, AMalformedAnswerIsOneLineAndNoEscapeReachesTheTerminal) {
    const std::vector<std::string> bodies = {
        R"({"regions":[{"tag":"w","device":"cpu","backup":"disk","bytes":-1}]})",
        R"({"regions":"all of them"})",
        R"({"regions":[{"tag":"w","device":"cpu","backup":"disk","bytes":"many"}]})",
        "{\"regions\":[{\"tag\":\"\\u001b]0;owned\\u0007\\u001b[2J\",\"device\":\"cpu\","
        "\"backup\":\"disk\",\"bytes\":1024,\"resident_bytes\":0,\"paused_bytes\":1024,"
        "\"state\":\"paused\\u009b31m\"}]}",
        "{\"action\":\"pause\",\"results\":[{\"tag\":\"w\",\"ok\":false,\"message\":"
        "\"gone\\u001b[1A\"}],\"ok\":false}",
    };
    std::vector<Outcome> answers;
    Outcome o = run(words({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--", PYTHON_BIN,
                           script("fake_collector.py"), "reply"},
                          bodies),
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        for (size_t i = 0; i + 1 < bodies.size(); ++i)
                            answers.push_back(ctl({first, "status"}, controlEnv()));
                        answers.push_back(ctl({first, "pause", "w"}, controlEnv()));
                        kill(std::stoi(first), SIGUSR1);
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    ASSERT_EQ(answers.size(), 5u);
    const std::string head = "memtool: memtool run answered something malformed: ";
    EXPECT_EQ(answers[0].exitCode, 1);
    EXPECT_EQ(answers[0].out, "");
    EXPECT_EQ(answers[0].err, head + "'bytes' is not a count of bytes or things\n");
    EXPECT_EQ(answers[1].exitCode, 1);
    EXPECT_EQ(answers[1].err, head + "'regions' is not a list\n");
    EXPECT_EQ(answers[2].exitCode, 1);
    EXPECT_EQ(answers[2].err, head + "'bytes' is not a count of bytes or things\n");
    EXPECT_EQ(answers[3].exitCode, 0) << answers[3].err;
    EXPECT_EQ(answers[3].out.find('\x1b'), std::string::npos) << answers[3].out;
    EXPECT_NE(answers[3].out.find("\\x1b]0;owned\\x07\\x1b[2J"), std::string::npos)
        << answers[3].out;
    EXPECT_NE(answers[3].out.find("paused\\u009b31m"), std::string::npos) << answers[3].out;
    EXPECT_EQ(answers[4].exitCode, 0);  // the fake's status said ok
    EXPECT_EQ(answers[4].out, "pause 'w' FAILED: gone\\x1b[1A\n");
}

// `ctl PID yield --timeout 1` gave up and exited 1, and the yield went on later and
// left the program parked, no one told. Now the run undoes what a client that went
// away asked: a restore follows the yield, and the program runs on.
TEST(CtlFaults, AYieldWhoseAskerGaveUpIsUndone) {
    const std::string trace = tempDir() + "/t.json";
    Outcome gaveUp, list;
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", trace, "--backup-dir", tempDir(),
             "--", PYTHON_BIN, script("ctl_target.py"), "wait"},
            "", controlEnv(), [&](pid_t, const std::string& first) {
                ASSERT_EQ(first.rfind("ready ", 0), 0u) << first;
                const std::string pid = first.substr(6);
                // The program waits in sigwait, where no safe point comes:
                // the yield waits for one past ctl's patience.
                gaveUp = ctl({"--timeout", "0.5", pid, "yield", "--wait", "120"}, controlEnv());
                // Answered by the run only after it has read the first client's
                // end: the restore is on its way.
                list = ctl({"list"}, controlEnv());
                kill(std::stoi(pid), SIGUSR1);  // safe points: the yield happens
            });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(gaveUp.exitCode, 1);
    EXPECT_NE(gaveUp.err.find("no answer within 0.5 s"), std::string::npos) << gaveUp.err;
    EXPECT_EQ(list.exitCode, 0);
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "intact True\n");
    const auto control = readJson(trace).at("processes").at(0).at("control");
    std::vector<std::string> actions;
    for (const auto& c : control) actions.push_back(c.at("action").get<std::string>());
    EXPECT_EQ(actions, (std::vector<std::string>{"yield", "restore"})) << control.dump();
}

// The program killed while a command of ctl's runs in it: "ended before it
// answered", exit 3, as the README says (it was exit 1, "pause failed").
TEST(CtlFaults, TheProgramEndingMidCommandIsExitThree) {
    Outcome paused;
    std::string target;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--", PYTHON_BIN,
                     script("fake_collector.py"), "die-on-request"},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        target = first;
                        paused = ctl({first, "pause", "w"}, controlEnv());
                    });
    EXPECT_EQ(o.signal, SIGKILL);  // the program's end, passed on
    EXPECT_EQ(paused.exitCode, 3) << paused.err;
    EXPECT_EQ(paused.err, "memtool: process " + target + " ended before it answered\n");
}

// root may signal anyone, so kill(pid, 0) told nothing: root's ctl to another
// user's process said "does not run under memtool" (3). It is another user's (4).
TEST(CtlFaults, RootsCtlToAnotherUsersProcessIsExitFour) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to make a process of another user";
    int gate[2], ready[2];
    ASSERT_EQ(pipe(gate), 0);
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    if (child == 0) {
        close(gate[1]);
        close(ready[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(99);
        (void)!write(ready[1], "u", 1);  // it is the other user's now
        char c;
        (void)!read(gate[0], &c, 1);  // until the test closes its end
        _exit(0);
    }
    close(gate[0]);
    close(ready[1]);
    // ctl asked before the setuid saw root's own process (it failed once in a
    // parallel ctest run), so the test waits for the child's word.
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1) << "the child could not become uid 65534";
    close(ready[0]);
    Outcome o = ctl({std::to_string(child), "status"}, controlEnv());
    close(gate[1]);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(o.exitCode, 4);
    EXPECT_EQ(o.err, "memtool: process " + std::to_string(child) +
                         " belongs to another user (uid 65534); memtool ctl reaches only your "
                         "own processes\n");
}

// A paused region's disk backup lived at the lowest free descriptor (3 in a small
// program), where the program's next file lands; one dup2()ed over it came back as
// the region's content, and the resume said ok. Now the backup lives high in the
// table, and a descriptor that no longer holds it fails the resume, naming the
// region, which stays paused.
TEST(CtlFaults, ADiskBackupTakenOverFailsTheResumeAndTheRegionStaysPaused) {
    const std::string backups = tempDir();
    Profiled p =
        profile({PYTHON_BIN, script("ctl_target.py"), "takeover"}, {"--backup-dir", backups});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    std::istringstream lines(p.outcome.out);
    std::string paused, resumed, message, state;
    std::getline(lines, paused);
    std::getline(lines, resumed);
    std::getline(lines, message);
    std::getline(lines, state);
    EXPECT_EQ(paused, "paused True 16777216 descriptors 1 high True");
    EXPECT_EQ(resumed, "resume False 0");
    // Named, and not said to be kept: the file the descriptor held is gone.
    EXPECT_EQ(message.rfind("message 1 region(s) could not be resumed and stay paused: 'w': the "
                            "backup file " +
                                backups + "/",
                            0),
              0u)
        << message;
    EXPECT_NE(message.find(": its descriptor "), std::string::npos) << message;
    EXPECT_NE(message.find(" no longer holds it (the program closed it, or put a file of its own "
                           "there with dup2); its content is lost"),
              std::string::npos)
        << message;
    EXPECT_EQ(state, "state [('w', 'paused')]");
}

// A process of a run announced another run's target pid in its handshake, and
// answered ctl for it (3 of 6 pauses "succeeded", the real region untouched). The
// pid a stream announces must be the pid that connected (SO_PEERCRED).
TEST(CtlFaults, AStreamThatClaimsAnotherPidIsRefused) {
    const std::string trace = tempDir() + "/t.json";
    std::string impostor;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN,
                     script("fake_collector.py"), "impostor", "1", R"({"regions":[]})"},
                    "", controlEnv(), [&](pid_t, const std::string& first) { impostor = first; });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const auto t = readJson(trace);
    ASSERT_EQ(t.at("processes").size(), 1u) << t.dump();
    const auto& p = t.at("processes").at(0);
    EXPECT_EQ(p.at("pid"), std::stoi(impostor));
    bool refused = false;
    for (const auto& w : p.at("warnings"))
        refused |= w == "refused a collector connection from pid " + impostor +
                            ": its handshake names pid 1";
    EXPECT_TRUE(refused) << p.at("warnings").dump();
}

// The rest of what the audit found accepted: each a usage error (2) now, before
// anything runs.
TEST(CtlFaults, RunAndCheckRefuseWhatTheyUsedToTake) {
    const std::string dir = tempDir();
    struct Case {
        std::vector<std::string> argv;
        std::string err;
    };
    const std::vector<Case> cases = {
        {{MEMTOOL_BIN, "run", "--backup-dir", "", "--", "/bin/true"},
         "--backup-dir: an empty name is no directory"},
        {{MEMTOOL_BIN, "run", "--wait-children", "0x10", "--", "/bin/true"},
         "'0x10' is not a number of seconds from 0 to 10000000"},
        {{MEMTOOL_BIN, "run", "--wait-children", "1e3", "--", "/bin/true"},
         "'1e3' is not a number of seconds from 0 to 10000000"},
        {{MEMTOOL_BIN, "run", "-o", dir + "/x%q.json", "--", "/bin/true"},
         "memtool: -o " + dir +
             "/x%q.json: %q is no pattern (%p: the pid, %r: the rank, %%: a %)\n"},
        {{MEMTOOL_BIN, "run", "-o", dir + "/x%", "--", "/bin/true"},
         "memtool: -o " + dir +
             "/x%: a % at the end is no pattern (%p: the pid, %r: the rank, %%: "
             "a %)\n"},
        {{MEMTOOL_BIN, "check", GOLDEN_DIR + "/traces/train.json", "--max-peak",
          "cuda:99999999999999999999=1"},
         "memtool: bad device 'cuda:99999999999999999999' (use cpu, pinned, shared, cuda, cuda:N, "
         "cuda:N.active, cuda:N.reserved, cuda:N.graphs, cuda:N.graphs_active, npu or npu:N)\n"},
    };
    for (const Case& c : cases) {
        Outcome o = run(c.argv);
        EXPECT_EQ(o.exitCode, 2) << c.argv[2] << " " << c.argv[3] << ": " << o.err;
        EXPECT_NE(o.err.find(c.err), std::string::npos) << o.err;
    }
    // Nothing was made of them.
    EXPECT_FALSE(std::ifstream(dir + "/x%q.json").good());
    // A pattern that is one still works, %% too.
    Outcome fine = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t%%.json", "--", "/bin/true"});
    EXPECT_EQ(fine.exitCode, 0) << fine.err;
    EXPECT_TRUE(std::ifstream(dir + "/t%.json").good());
}

// `ctl list` shows each command whole (it cut them at 40 characters), and a worker
// forked from the program as such: its parent's pid, marked (fork).
TEST(CtlFaults, ListShowsWholeCommandsAndMarksForkedWorkers) {
    const std::string dir = tempDir();
    const std::string flag = dir + "/go", padding(60, 'w');
    pid_t memtool = 0;
    std::string parent, child, listed;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--", PYTHON_BIN,
                     script("ctl_fork_list.py"), flag, padding},
                    "", controlEnv(), [&](pid_t pid, const std::string& first) {
                        memtool = pid;
                        std::istringstream words(first);
                        std::string ready;
                        words >> ready >> parent >> child;
                        // Both streams are admitted; the run lists the child once it
                        // has read its handshake.
                        for (int asked = 0; asked < 200; ++asked) {
                            listed = ctl({"list"}, controlEnv()).out;
                            if (listed.find("\n" + child + " ") != std::string::npos) break;
                        }
                        std::ofstream(flag) << "go\n";
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const std::string command =
        PYTHON_BIN + " " + script("ctl_fork_list.py") + " " + flag + " " + padding;
    // Its run's pid (what --run selects by) and no rank: no launcher set one.
    std::string runPid = std::to_string(memtool);
    runPid.resize(std::max<size_t>(runPid.size(), 8), ' ');
    const auto row = [&](std::string pid, std::string ppid) {
        pid.resize(std::max<size_t>(pid.size(), 8), ' ');
        ppid.resize(std::max<size_t>(ppid.size(), 14), ' ');
        return pid + " " + ppid + " " + runPid + " -     " + command + "\n";
    };
    EXPECT_EQ(listed.rfind("PID      PARENT         RUN      RANK  COMMAND\n", 0), 0u) << listed;
    EXPECT_NE(listed.find(row(parent, std::to_string(memtool))), std::string::npos) << listed;
    EXPECT_NE(listed.find(row(child, parent + " (fork)")), std::string::npos) << listed;
}
