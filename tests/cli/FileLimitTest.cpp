// With no descriptor left, a connection waiting on a listening socket makes it
// readable on every poll: memtool run's event loop would spin a core. The spare
// descriptor takes it and closes it instead; its peer sees the end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cli/run/FileLimit.h"

using memtool::cli::FileLimit;

TEST(FileLimit, AConnectionPastTheLastDescriptorIsShedNotLeftWaiting) {
    FileLimit::retakeSpare();
    const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(listener, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = "memtool-file-limit-test-" + std::to_string(getpid());
    std::memcpy(addr.sun_path + 1, name.data(), name.size());  // abstract: no file
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
    ASSERT_EQ(listen(listener, 4), 0);
    const int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), len), 0);

    // Every descriptor under a low limit in use, the spare among them.
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    rlimit low = saved;
    low.rlim_cur = 64;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    std::vector<int> filler;
    for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
    ASSERT_EQ(errno, EMFILE);

    bool shed = false;
    EXPECT_EQ(FileLimit::acceptOrShed(listener, &shed), -1);
    EXPECT_TRUE(shed);
    EXPECT_EQ(errno, EMFILE);
    char byte;
    EXPECT_EQ(read(client, &byte, 1), 0);  // closed unheard: its end of file
    // Nothing waits now: nothing shed, and the spare is back.
    EXPECT_EQ(FileLimit::acceptOrShed(listener, &shed), -1);
    EXPECT_FALSE(shed);
    EXPECT_EQ(open("/dev/null", O_RDONLY | O_CLOEXEC), -1);

    for (int fd : filler) close(fd);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    close(client);
    close(listener);
}
