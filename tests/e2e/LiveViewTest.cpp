// `memtool run --live` in a real terminal: a tmux session of its own (a private
// server socket) runs memtool; the test reads the screen with capture-pane and
// types with send-keys. The program under test waits on a FIFO, so the test
// decides when it goes on; the session's shell signals a tmux channel when
// memtool has exited.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// One tmux server and its session, killed with the object.
class Tmux {
public:
    Tmux(const std::string& dir, const std::string& command) : socket_(dir + "/tmux.sock") {
        std::ofstream(dir + "/tmux.conf") << "set -g remain-on-exit on\n";
        // The channel is signalled from inside the session when the command is done.
        const std::string shell = command + "; echo \"memtool exited $?\"; " + TMUX_BIN + " -S " +
                                  socket_ + " wait-for -S done";
        Outcome o = tmux({"-f", dir + "/tmux.conf", "new-session", "-d", "-x", "100", "-y", "30",
                          "-s", "live", shell});
        EXPECT_EQ(o.exitCode, 0) << o.err;
    }
    ~Tmux() { tmux({"kill-server"}); }
    Tmux(const Tmux&) = delete;
    Tmux& operator=(const Tmux&) = delete;

    // The screen and the lines scrolled off its top (tmux's "Pane is dead" line scrolls).
    std::string screen() { return tmux({"capture-pane", "-p", "-S", "-", "-t", "live"}).out; }
    void type(const std::string& keys) { tmux({"send-keys", "-t", "live", keys}); }
    // Blocks until the command in the session has finished.
    void waitUntilDone() { tmux({"wait-for", "done"}); }

    // Until `shows` holds for the screen, or a minute has passed. The live view draws
    // about once a second and nothing tells when a frame is out, so the screen is
    // read again and again: the condition decides, the pause between reads does not.
    bool waitFor(const std::function<bool(const std::string&)>& shows) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            last_ = screen();
            if (shows(last_)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }
    const std::string& last() const { return last_; }

private:
    Outcome tmux(std::vector<std::string> args) {
        args.insert(args.begin(), {"timeout", "120", TMUX_BIN, "-S", socket_});
        return run(args);
    }
    std::string socket_;
    std::string last_;
};

bool has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

// The FIFO the program waits on, and the line that lets it go on.
std::string makeFifo(const std::string& dir) {
    const std::string path = dir + "/go";
    EXPECT_EQ(mkfifo(path.c_str(), 0600), 0);
    return path;
}
void release(const std::string& fifo) {
    // Blocks until the program opens its end: it is waiting there.
    std::ofstream(fifo) << "go\n";
}

std::string inDir(const std::string& dir, const std::string& command) {
    return "cd " + dir + " && env LANG=C.UTF-8 " + command;
}

}  // namespace

TEST(LiveView, ShowsDevicesSitesAndRegionsAndQLeavesTheProgramRunning) {
    const std::string dir = tempDir();
    const std::string fifo = makeFifo(dir);
    Tmux t(dir, inDir(dir, MEMTOOL_BIN + " run --live -o trace.json -- " + PYTHON_BIN + " " +
                               script("live_target.py") + " " + fifo));
    // a (3,000,000 B) is held; kv (1,000,000 B) was allocated, then paused.
    ASSERT_TRUE(t.waitFor([](const std::string& s) {
        return has(s, "memtool live") && has(s, "<module> (live_target.py:9)") && has(s, "paused");
    })) << t.last();
    const std::string panel = t.last();
    EXPECT_TRUE(has(panel, "  cpu          now     2.86 MiB  peak     3.81 MiB")) << panel;
    EXPECT_TRUE(has(panel, "      2.86 MiB  cpu      <module> (live_target.py:9)")) << panel;
    EXPECT_TRUE(has(panel,
                    "  kv               cpu      paused           976.56 KiB  (976.56 KiB "
                    "paused)"))
        << panel;
    EXPECT_TRUE(has(panel, "q: leave the view")) << panel;
    // The program's own output stands above the panel, untouched.
    EXPECT_EQ(panel.rfind("ready\n", 0), 0u) << panel;

    t.type("q");
    ASSERT_TRUE(t.waitFor([](const std::string& s) { return !has(s, "memtool live"); }))
        << t.last();
    EXPECT_EQ(t.last().rfind("ready\n", 0), 0u) << t.last();

    release(fifo);  // the program goes on, and ends
    t.waitUntilDone();
    const std::string end = t.screen();
    EXPECT_TRUE(has(end,
                    "ready\nreleased\nmemtool: wrote trace.json (1 process, cpu peak 3.81 MiB)\n"
                    "memtool exited 0"))
        << end;
    EXPECT_FALSE(has(end, "memtool live")) << end;
    const nlohmann::json trace = readJson(dir + "/trace.json");
    const auto& p = trace.at("processes").at(0);
    EXPECT_TRUE(p.at("complete").get<bool>());
    EXPECT_EQ(p.at("devices").at("cpu").at("peak_bytes"), 4000000);
    EXPECT_EQ(p.at("control").at(0).at("action"), "pause");
}

TEST(LiveView, TheLastFrameStaysWhenTheProgramEnds) {
    const std::string dir = tempDir();
    const std::string fifo = makeFifo(dir);
    Tmux t(dir, inDir(dir, MEMTOOL_BIN + " run --live -o trace.json -- " + PYTHON_BIN + " " +
                               script("live_target.py") + " " + fifo));
    ASSERT_TRUE(t.waitFor([](const std::string& s) { return has(s, "live_target.py:9"); }))
        << t.last();
    release(fifo);
    t.waitUntilDone();
    const std::string end = t.screen();
    // The final frame: a freed at exit, the region's block freed too.
    EXPECT_TRUE(has(end, "  cpu          now          0 B  peak     3.81 MiB")) << end;
    EXPECT_TRUE(has(end, "  kv               cpu      resident                0 B  (0 B paused)"))
        << end;
    // What memtool prints next follows the frame's last line, not the blank rows the
    // panel kept below it (ten of them, before).
    EXPECT_TRUE(has(end,
                    "(0 B paused)\nmemtool: wrote trace.json (1 process, cpu peak 3.81 MiB)\n"
                    "memtool exited 0"))
        << end;
}

TEST(LiveView, KeysComeFromTheTerminalNeverFromTheProgramsStdin) {
    const std::string dir = tempDir();
    const std::string fifo = makeFifo(dir);
    Tmux t(dir, inDir(dir, "printf 'abc\\n' | " + MEMTOOL_BIN + " run --live -o trace.json -- " +
                               PYTHON_BIN + " " + script("live_stdin.py") + " " + fifo));
    // Two seconds of frames: memtool has waited on its keys many times over while
    // "abc" sat in the pipe; reading them from stdin would have taken it.
    ASSERT_TRUE(t.waitFor([](const std::string& s) { return has(s, " 2 s "); })) << t.last();
    release(fifo);
    t.waitUntilDone();
    const std::string end = t.screen();
    EXPECT_TRUE(has(end, "waiting\nABC\n")) << end;
    EXPECT_TRUE(has(end, "memtool exited 0")) << end;
}

TEST(LiveView, WithoutATerminalTheProgramRunsAsWithout) {
    const std::string dir = tempDir();
    // setsid: no controlling terminal, whatever ran the tests.
    Outcome o = run({"setsid", "-w", MEMTOOL_BIN, "run", "--live", "-o", dir + "/trace.json", "--",
                     PYTHON_BIN, script("echo_stdin.py")},
                    "hello\n");
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "HELLO\n");  // the program's bytes, as without --live
    EXPECT_EQ(o.err.rfind("memtool: --live: no terminal (/dev/tty: No such device or address); the "
                          "program runs without the live view\n",
                          0),
              0u)
        << o.err;
    EXPECT_TRUE(readJson(dir + "/trace.json").at("processes").at(0).at("complete").get<bool>());
    Outcome quiet = run({MEMTOOL_BIN, "run", "--live", "-q", "--", "true"});
    EXPECT_EQ(quiet.exitCode, 2);
}
