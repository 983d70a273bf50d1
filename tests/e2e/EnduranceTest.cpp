// What a fault-and-abuse audit found solid, kept as tests (issue 51): a thousand
// pause/resume and yield/restore cycles checksummed every time, and a disk too full
// for a backup. Labelled `slow` (about a minute); CI runs them with the rest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

TEST(Endurance, AThousandPausesAndYieldsLoseNothing) {
    Profiled p = profile({PYTHON_BIN, script("cycles.py")},
                         {"--pausable", "all", "--backup-dir", tempDir()});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out,
              "pause/resume 1000 failed 0 []\n"
              "yield/restore 1000 failed 0 []\n");
    // Every one of them is in the trace, a yield and a restore once per region they
    // moved (w, and "default", which --pausable all puts the rest in).
    std::map<std::string, int> seen;
    for (const auto& c : p.process().at("control"))
        ++seen[c.at("action").get<std::string>() + " " + c.at("tag").get<std::string>()];
    EXPECT_EQ(seen, (std::map<std::string, int>{{"pause w", 1000},
                                                {"resume w", 1000},
                                                {"yield w", 1000},
                                                {"yield default", 1000},
                                                {"restore w", 1000},
                                                {"restore default", 1000}}));
}

// The backup directory on an 8 MiB tmpfs of a mount namespace of its own (root
// only), a 16 MiB region to pause: refused before anything is released, and said.
TEST(Endurance, ABackupThatDoesNotFitFailsThePauseAndKeepsTheContent) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to mount a small tmpfs";
    const std::string dir = tempDir();
    const std::string trace = dir + "/t.json";
    const std::string backups = dir + "/full";
    Outcome o = run({"unshare", "--mount", "--propagation", "private", "sh", "-c",
                     "mkdir -p \"$1\" && mount -t tmpfs -o size=8m memtool-test \"$1\" || exit 77; "
                     "shift; exec \"$@\"",
                     "sh", backups, MEMTOOL_BIN, "run", "-q", "-o", trace, "--backup-dir", backups,
                     "--", PYTHON_BIN, script("disk_full.py")});
    if (o.exitCode == 77) GTEST_SKIP() << "no tmpfs can be mounted here: " << o.err;
    ASSERT_EQ(o.exitCode, 0) << o.err;
    std::istringstream lines(o.out);
    std::string pause, message, state, intact;
    std::getline(lines, pause);
    std::getline(lines, message);
    std::getline(lines, state);
    std::getline(lines, intact);
    EXPECT_EQ(pause, "pause False False 0");
    EXPECT_NE(message.find("no room for the backup in " + backups), std::string::npos) << message;
    EXPECT_NE(message.find("(16777216 bytes): No space left on device"), std::string::npos)
        << message;
    EXPECT_EQ(state, "state [('w', 'resident')]");
    EXPECT_EQ(intact, "intact True");
}
