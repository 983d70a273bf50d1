// Whether memtool's collector can load into the program a run starts.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/run/PreloadReach.h"
#include "tests/TempDir.h"

using memtool::cli::preloadUnreachable;

namespace {

const std::string kStatic = STATIC_PROGRAM_BIN;
const std::string kStaticSays =
    " is statically linked: memtool's collector (LD_PRELOAD) cannot load into it; link it "
    "dynamically against LibTorch";

std::string script(const std::string& dir, const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), 0755);
    return path;
}

}  // namespace

TEST(PreloadReach, AStaticallyLinkedProgramIsNamed) {
    EXPECT_EQ(preloadUnreachable(kStatic, ""), kStatic + kStaticSays);
    // By name, looked up as execvp does: the first directory of PATH that has it.
    const std::string dir = std::filesystem::path(kStatic).parent_path();
    const std::string name = std::filesystem::path(kStatic).filename();
    EXPECT_EQ(preloadUnreachable(name, "/nonexistent:" + dir), dir + "/" + name + kStaticSays);
    EXPECT_EQ(preloadUnreachable(name, "/nonexistent"), "");
}

TEST(PreloadReach, ADynamicallyLinkedProgramOrAFileThatIsNoneIsNotNamed) {
    EXPECT_EQ(preloadUnreachable("/bin/true", ""), "");
    EXPECT_EQ(preloadUnreachable("true", "/bin"), "");
    EXPECT_EQ(preloadUnreachable("/nonexistent/program", ""), "");
    const std::string dir = memtool::test_support::makeTempDir("memtool-reach");
    EXPECT_EQ(preloadUnreachable(script(dir, "text", "just words\n"), ""), "");
    EXPECT_EQ(preloadUnreachable(script(dir, "empty", ""), ""), "");
    // Not a regular file: not opened (a FIFO would block the reader).
    const std::string fifo = dir + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0700), 0);
    EXPECT_EQ(preloadUnreachable(fifo, ""), "");
    EXPECT_EQ(preloadUnreachable(script(dir, "via-fifo", "#!" + fifo + "\n"), ""), "");
}

TEST(PreloadReach, AScriptIsJudgedByItsInterpreter) {
    const std::string dir = memtool::test_support::makeTempDir("memtool-reach");
    const std::string name = std::filesystem::path(kStatic).filename();
    const std::string path = std::filesystem::path(kStatic).parent_path();
    EXPECT_EQ(preloadUnreachable(script(dir, "direct", "#!" + kStatic + " -x\n"), ""),
              kStatic + kStaticSays);
    // Through env, past its options and assignments, along PATH.
    EXPECT_EQ(preloadUnreachable(
                  script(dir, "env", "#!/usr/bin/env -S FOO=1 " + name + " --flag\n"), path),
              path + "/" + name + kStaticSays);
    EXPECT_EQ(preloadUnreachable(script(dir, "shell", "#!/bin/sh\nexit 0\n"), ""), "");
    EXPECT_EQ(preloadUnreachable(script(dir, "python", "#!/usr/bin/env python3\n"), "/usr/bin"),
              "");
}

TEST(PreloadReach, ASetgidProgramOfAnotherGroupIsNamed) {
    const std::string dir = memtool::test_support::makeTempDir("memtool-reach");
    const std::string copy = dir + "/true";
    std::filesystem::copy_file("/bin/true", copy);
    // Owned by a group this process is not running as: exec would change its
    // group, and the loader would run in secure mode.
    const gid_t other = getegid() == 0 ? 1 : 0;
    if (chown(copy.c_str(), static_cast<uid_t>(-1), other) != 0)
        GTEST_SKIP() << "cannot give a file to group " << other << " here (not root)";
    ASSERT_EQ(chmod(copy.c_str(), 02755), 0);
    EXPECT_EQ(preloadUnreachable(copy, ""),
              copy +
                  " runs setuid or setgid: the dynamic loader ignores LD_PRELOAD in it, so "
                  "memtool's collector cannot load into it");
    // Of this process's own group, it changes nothing: not named.
    ASSERT_EQ(chown(copy.c_str(), static_cast<uid_t>(-1), getegid()), 0);
    ASSERT_EQ(chmod(copy.c_str(), 02755), 0);  // chown cleared the bit
    EXPECT_EQ(preloadUnreachable(copy, ""), "");
}
