// Which files `report --lines` reads: inside both the trace's cwd and the current
// directory (a trace recorded elsewhere: relative to its cwd, from here), regular
// files only, unless --all-files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/TempDir.h"
#include "trace/SourceFiles.h"

using namespace memtool;
using reporters::SourceFiles;

namespace {

std::string tempDir() {
    const std::string dir = memtool::test_support::makeTempDir("memtool-source-test");
    // Resolved, as the reader compares resolved paths.
    char* real = realpath(dir.c_str(), nullptr);
    std::string out(real);
    free(real);
    return out;
}

// Runs the test body in `dir`, and goes back.
class InDirectory {
public:
    explicit InDirectory(const std::string& dir) {
        getcwd(previous_, sizeof previous_);
        if (chdir(dir.c_str()) != 0) throw std::runtime_error("chdir " + dir);
    }
    ~InDirectory() {
        if (chdir(previous_) != 0) std::abort();
    }

private:
    char previous_[4096];
};

const char* const kOutside =
    "outside the directory the trace was recorded in or the one memtool runs in; "
    "--all-files reads it";

// A project directory holding src/a.py, and a directory elsewhere.
struct Fixture {
    std::string project = tempDir(), elsewhere = tempDir();
    Fixture() {
        mkdir((project + "/src").c_str(), 0700);
        std::ofstream(project + "/src/a.py") << "def f():\n    return 1\n";
        std::ofstream(elsewhere + "/secret") << "password\n";
    }
};

}  // namespace

TEST(SourceFiles, ReadsTheProgramsFilesWhereItRan) {
    Fixture fx;
    InDirectory here(fx.project);
    const SourceFiles files(fx.project, false);
    const auto absolute = files.read(fx.project + "/src/a.py");
    EXPECT_TRUE(absolute.found);
    EXPECT_EQ(absolute.lines,
              (std::map<uint64_t, std::string>{{1, "def f():"}, {2, "    return 1"}}));
    EXPECT_TRUE(files.read("src/a.py").found);  // relative to the trace's cwd
    const auto missing = files.read(fx.project + "/src/b.py");
    EXPECT_FALSE(missing.found);
    EXPECT_EQ(missing.why, "");  // merely not there
}

TEST(SourceFiles, NeverReadsOutsideTheTracesDirectory) {
    Fixture fx;
    InDirectory here(fx.project);
    const SourceFiles files(fx.project, false);
    const std::string sibling = fx.elsewhere.substr(fx.elsewhere.rfind('/') + 1);
    for (const std::string& name :
         {std::string("/etc/passwd"), fx.elsewhere + "/secret", "../" + sibling + "/secret",
          "src/../../" + sibling + "/secret"}) {
        const auto r = files.read(name);
        EXPECT_FALSE(r.found) << name;
        EXPECT_TRUE(r.lines.empty()) << name;
        EXPECT_EQ(r.why, kOutside) << name;
    }
    // Nor through a link inside it that leads out.
    ASSERT_EQ(symlink((fx.elsewhere + "/secret").c_str(), (fx.project + "/src/link.py").c_str()),
              0);
    EXPECT_EQ(files.read("src/link.py").why, kOutside);
    // --all-files lifts the rule.
    const auto all = SourceFiles(fx.project, true).read(fx.elsewhere + "/secret");
    EXPECT_TRUE(all.found);
    EXPECT_EQ(all.lines, (std::map<uint64_t, std::string>{{1, "password"}}));
}

TEST(SourceFiles, ATraceCwdOfSlashReadsNothingOutsideTheCurrentDirectory) {
    // The cwd is in the trace too: a crafted "/" does not open the whole disk.
    Fixture fx;
    InDirectory here(fx.project);
    EXPECT_EQ(SourceFiles("/", false).read("/etc/passwd").why, kOutside);
    EXPECT_EQ(SourceFiles("/", false).read(fx.elsewhere + "/secret").why, kOutside);
    EXPECT_TRUE(SourceFiles("/", false).read(fx.project + "/src/a.py").found);
}

TEST(SourceFiles, OnlyRegularFilesAreRead) {
    Fixture fx;
    InDirectory here(fx.project);
    ASSERT_EQ(mkfifo((fx.project + "/src/fifo.py").c_str(), 0600), 0);
    EXPECT_EQ(SourceFiles(fx.project, false).read("src/fifo.py").why,
              "it is a FIFO, not a regular file");
    EXPECT_EQ(SourceFiles(fx.project, true).read("/dev/zero").why,
              "it is a character device, not a regular file");
}

TEST(SourceFiles, ATraceRecordedElsewhereIsReadFromTheCurrentDirectory) {
    // The trace's cwd does not exist here (a CI machine's checkout): its files are
    // read at the same place relative to the current directory.
    Fixture fx;
    InDirectory here(fx.project);
    const SourceFiles files("/nonexistent/app/", false);
    EXPECT_TRUE(files.read("/nonexistent/app/src/a.py").found);
    EXPECT_TRUE(files.read("src/a.py").found);
    EXPECT_EQ(files.read("/nonexistent/application/src/a.py").why, kOutside);
    EXPECT_EQ(files.read("/etc/passwd").why, kOutside);
    // No cwd recorded at all: relative names only.
    EXPECT_TRUE(SourceFiles("", false).read("src/a.py").found);
    EXPECT_EQ(SourceFiles("", false).read(fx.project + "/src/a.py").why, kOutside);
}

TEST(SourceFiles, AReportRunOutsideTheTracesDirectoryReadsNothingOfIt) {
    Fixture fx;
    InDirectory here(fx.elsewhere);
    EXPECT_EQ(SourceFiles(fx.project, false).read(fx.project + "/src/a.py").why, kOutside);
    EXPECT_TRUE(SourceFiles(fx.project, true).read(fx.project + "/src/a.py").found);
}
