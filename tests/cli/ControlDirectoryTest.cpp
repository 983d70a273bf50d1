// The control directory and socket of `memtool ctl`: private to the user, and a
// connection from another user refused on its peer credentials.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "cli/ctl/ControlDirectory.h"
#include "core/Error.h"
#include "tests/TempDir.h"

using namespace memtool;

namespace {

std::string tempDir() { return memtool::test_support::makeTempDir("memtool-ctldir"); }

std::string refusal(const std::string& dir) {
    setenv("MEMTOOL_CONTROL_DIR", dir.c_str(), 1);
    try {
        cli::controlDirectory(true, 1);
    } catch (const core::Error& e) {
        unsetenv("MEMTOOL_CONTROL_DIR");
        return e.what();
    }
    unsetenv("MEMTOOL_CONTROL_DIR");
    return "";
}

}  // namespace

TEST(ControlDirectory, IsMadePrivateAndRefusedWhenNot) {
    const std::string base = tempDir();
    const std::string fresh = base + "/ctl";
    EXPECT_EQ(refusal(fresh), "");
    struct stat st {};
    ASSERT_EQ(stat(fresh.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);

    const std::string open = base + "/open";
    mkdir(open.c_str(), 0755);
    chmod(open.c_str(), 0755);
    EXPECT_EQ(refusal(open), "refusing the control directory " + open +
                                 ": others may use it (mode 0755; it must be 0700)");

    const std::string link = base + "/link";
    ASSERT_EQ(symlink(fresh.c_str(), link.c_str()), 0);
    EXPECT_EQ(refusal(link), "refusing the control directory " + link + ": it is not a directory");

    if (geteuid() == 0) {
        const std::string theirs = base + "/theirs";
        mkdir(theirs.c_str(), 0700);
        ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
        EXPECT_EQ(refusal(theirs), "refusing the control directory " + theirs +
                                       ": it belongs to uid 65534, not to you");
    }
}

// Even on a socket anyone may connect to, a peer of another user is hung up on.
TEST(ControlDirectory, AcceptPeerRefusesAnotherUser) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to become another user for the test";
    const std::string dir = tempDir();
    chmod(dir.c_str(), 0755);
    const std::string path = dir + "/open.sock";
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    chmod(path.c_str(), 0777);
    ASSERT_EQ(listen(listener, 4), 0);
    pid_t child = fork();
    if (child == 0) {
        if (setuid(65534) != 0) _exit(2);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(3);
        char c;
        _exit(read(fd, &c, 1) == 0 ? 0 : 4);  // end of file: the server hung up
    }
    pollfd p{listener, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);  // the stranger's connection is waiting
    EXPECT_EQ(cli::acceptPeer(listener), cli::kRefusedPeer);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    // Our own connection is kept.
    int ours = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(connect(ours, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    const int accepted = cli::acceptPeer(listener);
    EXPECT_GE(accepted, 0);
    close(accepted);
    close(ours);
    close(listener);
}

// Any local user could stop another's runs by making /tmp/memtool-UID first (every
// run exited 125). Now the user's own cache directory serves instead, and the run
// says what was wrong. Played in a mount namespace of its own, whose /tmp is a
// fresh tmpfs: the machine's /tmp/memtool-UID is left alone.
TEST(ControlDirectory, ASquattedTmpDirectoryFallsBackToTheUsersCache) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, for a mount namespace and another user";
    int status = 0;
    const pid_t child = fork();
    if (child == 0) {
        if (unshare(CLONE_NEWNS) != 0 ||
            mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
            mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") != 0)
            _exit(77);
        const std::string squatted = "/tmp/memtool-" + std::to_string(geteuid());
        if (mkdir(squatted.c_str(), 0777) != 0 || chown(squatted.c_str(), 65534, 65534) != 0 ||
            mkdir("/tmp/home", 0700) != 0)
            _exit(10);
        unsetenv("MEMTOOL_CONTROL_DIR");
        unsetenv("XDG_RUNTIME_DIR");
        unsetenv("XDG_CACHE_HOME");
        setenv("HOME", "/tmp/home", 1);
        const int err = open("/tmp/home/err", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(err, 2);
        std::string dir;
        try {
            dir = cli::controlDirectory(true, 125);
        } catch (const core::Error&) {
            _exit(11);
        }
        if (dir != "/tmp/home/.cache/memtool/control") _exit(12);
        struct stat st {};
        if (stat(dir.c_str(), &st) != 0 || (st.st_mode & 07777) != 0700) _exit(13);
        // ctl, which does not create it, finds the same directory.
        try {
            if (cli::controlDirectory(false, 1) != dir) _exit(14);
        } catch (const core::Error&) {
            _exit(15);
        }
        char said[512] = {};
        const int in = open("/tmp/home/err", O_RDONLY);
        if (in < 0 || read(in, said, sizeof said - 1) < 0) _exit(16);
        const std::string expected =
            "memtool: warning: refusing the control directory " + squatted +
            ": it belongs to uid 65534, not to you (made by someone else?); using " + dir +
            " instead\n";
        _exit(std::string(said) == expected + expected ? 0 : 17);
    }
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no mount namespace here";
    EXPECT_EQ(WEXITSTATUS(status), 0);
}
