// Which files `report --lines` reads: inside both the trace's cwd and the current
// directory (a trace recorded elsewhere: relative to its cwd, from here), regular
// files only, unless --all-files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <initializer_list>
#include <map>

#include "tests/TempDir.h"
#include "trace/SourceFiles.h"

using namespace memtool;
using reporters::SourceFiles;

namespace {

std::string sourcesTempDir() {
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
    "--read-any-file reads it";
const char* const kNotRecorded =
    "the trace has no directory here and no record of this file; --read-any-file reads it";

// The files a trace recorded (ProcessTrace::sources), by name; their text is not
// what these tests look at.
std::map<std::string, core::SourceFile> recordedAs(std::initializer_list<std::string> names) {
    std::map<std::string, core::SourceFile> out;
    for (const auto& n : names) out[n] = core::SourceFile{};
    return out;
}

// A project directory holding src/a.py, and a directory elsewhere.
struct Fixture {
    std::string project = sourcesTempDir(), elsewhere = sourcesTempDir();
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
    // --read-any-file lifts the rule.
    const auto all = SourceFiles(fx.project, true).read(fx.elsewhere + "/secret");
    EXPECT_TRUE(all.found);
    EXPECT_EQ(all.lines, (std::map<uint64_t, std::string>{{1, "password"}}));
}

TEST(SourceFiles, ATraceCwdOfSlashReadsNothingOutsideTheCurrentDirectory) {
    // The cwd is in the trace too: a crafted "/" does not open the whole disk, and
    // is no directory of the trace's own: only files it recorded are read, for their
    // hash alone.
    Fixture fx;
    InDirectory here(fx.project);
    const auto recorded = recordedAs({"/etc/passwd", fx.project + "/src/a.py"});
    EXPECT_EQ(SourceFiles("/", false, &recorded).read("/etc/passwd").why, kOutside);
    EXPECT_EQ(SourceFiles("/", false, &recorded).read(fx.elsewhere + "/secret").why, kNotRecorded);
    const auto a = SourceFiles("/", false, &recorded).read(fx.project + "/src/a.py");
    EXPECT_TRUE(a.found);
    EXPECT_TRUE(a.hash.has_value());
    EXPECT_TRUE(a.lines.empty());
    EXPECT_EQ(SourceFiles("/", false).read(fx.project + "/src/a.py").why, kNotRecorded);
}

// A report run in / or $HOME on a trace without a cwd read any file the trace
// named relative to it: etc/shadow, .ssh/id_rsa. Now only the files the trace
// recorded a hash of are read, and their text is never what is shown.
TEST(SourceFiles, ATraceWithoutACwdReadsOnlyWhatItRecorded) {
    Fixture fx;
    InDirectory here(fx.elsewhere);
    EXPECT_EQ(SourceFiles("", false).read("secret").why, kNotRecorded);
    const auto recorded = recordedAs({"secret"});
    const auto read = SourceFiles("", false, &recorded).read("secret");
    EXPECT_TRUE(read.found);
    EXPECT_TRUE(read.lines.empty());
    EXPECT_TRUE(SourceFiles("", true).read("secret").found);  // --read-any-file
    EXPECT_EQ(SourceFiles("", true).read("secret").lines.size(), 1u);
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
    // Only files the trace recorded, and only for their hash (whether they changed).
    const auto recorded =
        recordedAs({"/nonexistent/app/src/a.py", "src/a.py", "/nonexistent/application/src/a.py",
                    "/etc/passwd", fx.project + "/src/a.py"});
    const SourceFiles files("/nonexistent/app/", false, &recorded);
    EXPECT_TRUE(files.read("/nonexistent/app/src/a.py").found);
    EXPECT_TRUE(files.read("src/a.py").found);
    EXPECT_TRUE(files.read("src/a.py").lines.empty());
    EXPECT_EQ(files.read("/nonexistent/application/src/a.py").why, kOutside);
    EXPECT_EQ(files.read("/etc/passwd").why, kOutside);
    EXPECT_EQ(SourceFiles("/nonexistent/app/", false).read("src/a.py").why, kNotRecorded);
    // No cwd recorded at all: relative names only.
    EXPECT_TRUE(SourceFiles("", false, &recorded).read("src/a.py").found);
    EXPECT_EQ(SourceFiles("", false, &recorded).read(fx.project + "/src/a.py").why, kOutside);
}

TEST(SourceFiles, AReportRunOutsideTheTracesDirectoryReadsNothingOfIt) {
    Fixture fx;
    InDirectory here(fx.elsewhere);
    EXPECT_EQ(SourceFiles(fx.project, false).read(fx.project + "/src/a.py").why, kOutside);
    EXPECT_TRUE(SourceFiles(fx.project, true).read(fx.project + "/src/a.py").found);
}
