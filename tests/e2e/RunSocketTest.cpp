// The collectors' socket of `memtool run`: only the program and its descendants
// join the run's stream, and the socket's directory goes away on every way out,
// even when memtool itself was killed (the next run removes it).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>

#include "core/Records.h"
#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

std::set<std::string> entries(const std::string& dir) {
    std::set<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d))
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
                names.insert(e->d_name);
        closedir(d);
    }
    return names;
}

// "PID SOCKET", as fake_collector.py wait prints it.
struct Waiting {
    pid_t pid = 0;
    std::string socket;
};
Waiting parseWaiting(const std::string& line) {
    const size_t space = line.find(' ');
    return Waiting{static_cast<pid_t>(std::stol(line.substr(0, space))), line.substr(space + 1)};
}

// Connects to `socket` as this process, sends a valid handshake and reads until
// memtool hangs up; true when it did so without reading a byte.
bool hungUpOnUs(const std::string& socket) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
    memtool::core::Handshake h;
    h.pid = getpid();
    h.command = {"intruder"};
    const std::vector<uint8_t> bytes = memtool::core::encodeHandshake(h);
    (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    char c;
    const ssize_t n = read(fd, &c, 1);  // memtool closes it: end of file (or a reset)
    close(fd);
    return n <= 0;
}

}  // namespace

TEST(RunSocket, AProcessThatIsNotTheProgramsCannotJoin) {
    // This test process runs as the same user, but memtool is its child, not the
    // program's parent.
    const std::string trace = tempDir() + "/t.json";
    bool refused = false;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN,
                     script("fake_collector.py"), "wait"},
                    "", {}, [&](pid_t, const std::string& first) {
                        const Waiting w = parseWaiting(first);
                        refused = hungUpOnUs(w.socket);
                        kill(w.pid, SIGUSR1);
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_TRUE(refused);
    const nlohmann::json t = readJson(trace);
    ASSERT_EQ(t.at("processes").size(), 1u) << t.dump();  // the intruder's stream is not in it
    EXPECT_EQ(
        t.at("processes").at(0).at("warnings"),
        nlohmann::json({"the program loaded no allocator memtool tracks (no libc10 CPU "
                        "allocator)",
                        "refused a collector connection from pid " + std::to_string(getpid()) +
                            ", which does not descend from the program"}));
}

TEST(RunSocket, AnOrphanedDescendantStillJoins) {
    // Its parent exited before it connected: re-parented to memtool (a child
    // subreaper), not to init, it is still the program's.
    Profiled p = profile({PYTHON_BIN, script("fake_collector.py"), "orphan"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "orphan sent\n");
    ASSERT_EQ(p.trace.at("processes").size(), 2u) << p.trace.dump();
    const auto& orphan = p.trace.at("processes").at(1);
    EXPECT_EQ(orphan.at("command"), nlohmann::json({"orphan"}));
    EXPECT_TRUE(orphan.at("complete").get<bool>()) << orphan.dump();
    EXPECT_EQ(p.process().at("warnings").size(), 1u) << p.process().dump();
}

TEST(RunSocket, AStreamThatBreaksBeforeItsHandshakeIsNamedInTheTrace) {
    // A handshake that never ends: memtool hangs up at the record limit.
    Profiled p = profile({PYTHON_BIN, script("fake_collector.py"), "endless"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "cut off after 64 MiB\n");
    EXPECT_EQ(p.process().at("warnings").at(1),
              "a collector's stream broke before its handshake: the stream broke: a record "
              "longer than 67108864 bytes");
}

TEST(RunSocket, TheDirectoryOfAKilledRunGoesWithTheNextRun) {
    const std::string tmp = tempDir();
    const std::string env = "TMPDIR=" + tmp;
    // Something else's, shaped like a run directory but without a pid file: kept.
    ASSERT_EQ(mkdir((tmp + "/memtool-run-foreign").c_str(), 0700), 0);
    std::string killedDir;
    Outcome killed = run(
        {MEMTOOL_BIN, "run", "-q", "-o", tmp + "/t.json", "--", PYTHON_BIN,
         script("fake_collector.py"), "wait"},
        "", {env}, [&](pid_t memtool, const std::string& first) {
            const Waiting w = parseWaiting(first);
            killedDir = w.socket.substr(0, w.socket.rfind('/'));
            // A second run while this one lives leaves its directory.
            Outcome meanwhile = run(
                {MEMTOOL_BIN, "run", "-q", "-o", tmp + "/t2.json", "--", "/bin/true"}, "", {env});
            EXPECT_EQ(meanwhile.exitCode, 0) << meanwhile.err;
            EXPECT_EQ(entries(killedDir), (std::set<std::string>{"collector.sock", "run.pid"}));
            kill(memtool, SIGKILL);
            int status;
            waitpid(memtool, &status, 0);
            kill(w.pid, SIGUSR1);
        });
    EXPECT_EQ(killed.signal, 0);  // reaped in the callback
    const std::string name = killedDir.substr(tmp.size() + 1);
    // Its run directory stays, nothing else: backups are unnamed files, which
    // need no directory of their own.
    EXPECT_EQ(entries(tmp), (std::set<std::string>{"memtool-run-foreign", name, "t2.json"}))
        << "left behind by the killed run";
    // The next run finds that run gone and removes its directory.
    Outcome next =
        run({MEMTOOL_BIN, "run", "-q", "-o", tmp + "/t3.json", "--", "/bin/true"}, "", {env});
    EXPECT_EQ(next.exitCode, 0) << next.err;
    EXPECT_EQ(entries(tmp).count(name), 0u);
    EXPECT_EQ(entries(tmp).count("memtool-run-foreign"), 1u);
}

TEST(RunSocket, ASocketPathTooLongLeavesNothingBehind) {
    // sun_path holds 107 bytes: a TMPDIR of 100 leaves no room for the socket's name.
    std::string tmp = tempDir() + "/";
    tmp += std::string(100 - tmp.size(), 'd');
    ASSERT_EQ(mkdir(tmp.c_str(), 0700), 0);
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", tmp + "/t.json", "--", "/bin/true"}, "",
                    {"TMPDIR=" + tmp});
    EXPECT_EQ(o.exitCode, 125);
    EXPECT_EQ(o.err.rfind("memtool: the collector socket's path " + tmp + "/memtool-run-", 0), 0u)
        << o.err;
    EXPECT_NE(o.err.find(" is too long (134 bytes, at most 107): set TMPDIR to a shorter "
                         "directory\n"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(entries(tmp), std::set<std::string>{});
}

TEST(RunSocket, AReplyNestedTooDeeplyReachesCtlAsText) {
    // Parsed and passed on as JSON, a million levels overflowed memtool run's stack
    // when it wrote them to memtool ctl, and the whole run was lost.
    const std::string control = "MEMTOOL_CONTROL_DIR=" + tempDir() + "/ctl";
    const std::string trace = tempDir() + "/t.json";
    Outcome ctl;
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("fake_collector.py"),
             "deep-reply"},
            "", {control}, [&](pid_t, const std::string& first) {
                ctl = run({MEMTOOL_BIN, "ctl", "--format", "json", first, "status"}, "", {control});
                kill(std::stoi(first), SIGUSR1);
            });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    ASSERT_EQ(ctl.exitCode, 0) << ctl.err;
    const nlohmann::json answer = nlohmann::json::parse(ctl.out);
    EXPECT_EQ(answer.at("status"), "ok");
    EXPECT_EQ(answer.at("body"), std::string(1000000, '[') + std::string(1000000, ']'));
    const nlohmann::json t = readJson(trace);
    EXPECT_TRUE(t.at("processes").at(0).at("complete").get<bool>()) << t.dump();
}
