// Files memtool is handed: only regular files are read, never past a limit, and a
// file is replaced through a temporary no one else can have planted.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/Error.h"
#include "core/Files.h"
#include "tests/TempDir.h"

using namespace memtool;

namespace {

std::string filesTempDir() { return memtool::test_support::makeTempDir("memtool-files-test"); }

std::string contents(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::set<std::string> entries(const std::string& dir) {
    std::set<std::string> names;
    DIR* d = opendir(dir.c_str());
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
    names.erase(".");
    names.erase("..");
    return names;
}

// The error a read gives, empty when it succeeds.
std::string readError(const std::string& path, uint64_t limit) {
    std::string why;
    return core::readRegularFile(path, limit, &why) ? "" : why;
}

}  // namespace

TEST(Files, ReadsARegularFileWhole) {
    const std::string path = filesTempDir() + "/a.txt";
    std::ofstream(path) << "line 1\nline 2\n";
    std::string why;
    EXPECT_EQ(core::readRegularFile(path, 14, &why), "line 1\nline 2\n");
    EXPECT_EQ(why, "");
}

TEST(Files, RefusesWhatIsNotARegularFileWithoutOpeningIt) {
    const std::string dir = filesTempDir();
    // A FIFO without a writer: opening it for reading would wait for one forever.
    ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
    EXPECT_EQ(readError(dir + "/fifo", 1 << 20), "it is a FIFO, not a regular file");
    // A device that never ends.
    EXPECT_EQ(readError("/dev/zero", 1 << 20), "it is a character device, not a regular file");
    EXPECT_EQ(readError(dir, 1 << 20), "it is a directory, not a regular file");
    EXPECT_EQ(readError(dir + "/missing", 1 << 20), "No such file or directory");
}

TEST(Files, RefusesAFileLargerThanTheLimitBeforeReadingIt) {
    // Sparse: a terabyte that takes no disk and would take all memory.
    const std::string path = filesTempDir() + "/huge";
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, off_t{1} << 40), 0);
    close(fd);
    EXPECT_EQ(readError(path, 256 << 20), "it is larger than 256.00 MiB (1099511627776 bytes)");
    // The limit itself is allowed.
    std::ofstream(path, std::ios::trunc) << "12345";
    EXPECT_EQ(readError(path, 5), "");
    EXPECT_EQ(readError(path, 4), "it is larger than 4 B (5 bytes)");
}

TEST(Files, ReplacingNeverFollowsAPlantedLink) {
    const std::string dir = filesTempDir();
    const std::string victim = dir + "/victim", trace = dir + "/trace.json";
    std::ofstream(victim) << "precious";
    // Where memtool used to write its temporary file, and would have followed the link.
    ASSERT_EQ(symlink(victim.c_str(), (trace + ".tmp").c_str()), 0);
    const mode_t before = umask(022);
    core::replaceFile(trace, "{}\n", core::kExitRunFailed);
    umask(before);
    EXPECT_EQ(contents(victim), "precious");
    EXPECT_EQ(contents(trace), "{}\n");
    char target[256] = {};
    ASSERT_GT(readlink((trace + ".tmp").c_str(), target, sizeof target - 1), 0);
    EXPECT_EQ(std::string(target), victim);
    // No temporary file is left behind, and the trace has a new file's mode.
    EXPECT_EQ(entries(dir), (std::set<std::string>{"trace.json", "trace.json.tmp", "victim"}));
    struct stat st {};
    ASSERT_EQ(stat(trace.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u);
}

// trace.json goes out in pieces (the bodies memtool run rendered ahead): more
// than one writev takes (IOV_MAX, 1,024), empty ones among them, in their order.
TEST(Files, AFileReplacedFromPiecesHoldsThemInOrder) {
    const std::string dir = filesTempDir();
    const std::string trace = dir + "/trace.json";
    std::vector<std::string> texts;
    std::string expected;
    for (int i = 0; i < 2500; ++i) {
        texts.push_back(i % 7 == 0 ? std::string() : std::to_string(i) + ",");
        expected += texts.back();
    }
    texts.push_back(std::string(1 << 20, 'x'));  // past what a pipe or socket takes at once
    expected += texts.back();
    const std::vector<std::string_view> pieces(texts.begin(), texts.end());
    core::replaceFile(trace, pieces, core::kExitRunFailed);
    EXPECT_EQ(contents(trace), expected);
    EXPECT_EQ(entries(dir), (std::set<std::string>{"trace.json"}));
    core::replaceFile(trace, std::span<const std::string_view>(), core::kExitRunFailed);
    EXPECT_EQ(contents(trace), "");
}

TEST(Files, ReplacingALinkReplacesTheLinkNotItsTarget) {
    const std::string dir = filesTempDir();
    const std::string victim = dir + "/victim", trace = dir + "/trace.json";
    std::ofstream(victim) << "precious";
    ASSERT_EQ(symlink(victim.c_str(), trace.c_str()), 0);
    core::replaceFile(trace, "new", core::kExitRunFailed);
    EXPECT_EQ(contents(victim), "precious");
    struct stat st {};
    ASSERT_EQ(lstat(trace.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(contents(trace), "new");
}

TEST(Files, ReplacingFailsWithAClearErrorAndLeavesNothing) {
    const std::string dir = filesTempDir();
    try {
        core::replaceFile(dir + "/missing/trace.json", "x", core::kExitRunFailed);
        FAIL() << "no error";
    } catch (const core::Error& e) {
        EXPECT_EQ(e.exitCode(), core::kExitRunFailed);
        EXPECT_EQ(std::string(e.what()),
                  "cannot write " + dir + "/missing/trace.json: No such file or directory");
    }
    // A directory where the file should go: written, then the rename fails.
    ASSERT_EQ(mkdir((dir + "/taken").c_str(), 0700), 0);
    try {
        core::replaceFile(dir + "/taken", "x", core::kExitRunFailed);
        FAIL() << "no error";
    } catch (const core::Error& e) {
        EXPECT_EQ(std::string(e.what()), "cannot write " + dir + "/taken: Is a directory");
    }
    EXPECT_EQ(entries(dir), (std::set<std::string>{"taken"}));
}

TEST(Files, APipeFromTheShellIsReadWhenAskedForAndBounded) {
    // What `memtool diff <(git show ...) new.json` hands over: /dev/fd/N, a pipe.
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(write(fds[1], "{\"a\": 1}", 8), 8);
    close(fds[1]);
    const std::string path = "/dev/fd/" + std::to_string(fds[0]);
    EXPECT_EQ(readError(path, 100), "it is a FIFO, not a regular file");  // not asked for
    std::string why;
    EXPECT_EQ(core::readRegularFile(path, 100, &why, true), "{\"a\": 1}");
    close(fds[0]);
    // Bounded like a file.
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(write(fds[1], "123456", 6), 6);
    close(fds[1]);
    EXPECT_EQ(core::readRegularFile("/dev/fd/" + std::to_string(fds[0]), 5, &why, true),
              std::nullopt);
    EXPECT_EQ(why, "it is larger than 5 B (6 bytes)");
    close(fds[0]);
    // A FIFO in the file system is refused all the same, unopened.
    const std::string fifo = filesTempDir() + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(core::readRegularFile(fifo, 100, &why, true), std::nullopt);
    EXPECT_EQ(why, "it is a FIFO, not a regular file");
}
