// memtool run's own options: where the trace goes is checked before the program
// starts, options after the command are the command's, and a run that measured
// nothing says so.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

bool exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST(RunOptions, AnUnwritableOutputIsRefusedBeforeTheProgramRuns) {
    const std::string dir = tempDir();
    const std::string marker = dir + "/ran";
    const std::vector<std::string> program{"/bin/sh", "-c", "touch " + marker};
    auto runWithOutput = [&](const std::string& output) {
        std::vector<std::string> argv{MEMTOOL_BIN, "run", "-o", output, "--"};
        argv.insert(argv.end(), program.begin(), program.end());
        return run(argv);
    };
    Outcome noDir = runWithOutput(dir + "/no/such/dir/t.json");
    EXPECT_EQ(noDir.exitCode, 125);
    EXPECT_EQ(noDir.err,
              "memtool: cannot write " + dir + "/no/such/dir/t.json: No such file or directory\n");
    EXPECT_FALSE(exists(marker));
    Outcome aDir = runWithOutput(dir);
    EXPECT_EQ(aDir.exitCode, 125);
    EXPECT_EQ(aDir.err,
              "memtool: cannot write " + dir + ": it is a directory, not a regular file\n");
    EXPECT_FALSE(exists(marker));
}

TEST(RunOptions, ABackupDirectoryThatCannotBeUsedIsRefusedBeforeTheProgramRuns) {
    const std::string dir = tempDir();
    const std::string marker = dir + "/ran";
    auto runWithBackups = [&](const std::string& backups) {
        return run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--backup-dir", backups, "--",
                    "/bin/sh", "-c", "touch " + marker});
    };
    Outcome missing = runWithBackups(dir + "/none");
    EXPECT_EQ(missing.exitCode, 125);
    EXPECT_EQ(missing.err,
              "memtool: cannot keep backups in " + dir + "/none: No such file or directory\n");
    Outcome aFile = runWithBackups("/etc/hostname");
    EXPECT_EQ(aFile.exitCode, 125);
    EXPECT_EQ(aFile.err, "memtool: cannot keep backups in /etc/hostname: not a directory\n");
    EXPECT_FALSE(exists(marker));
    // A usable one, named relatively: the run goes on and leaves nothing in it.
    const std::string backups = tempDir();
    Outcome ok = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--backup-dir", ".", "--",
                      "/bin/sh", "-c", "touch " + marker},
                     "", {}, nullptr, backups);
    EXPECT_EQ(ok.exitCode, 0) << ok.err;
    EXPECT_TRUE(exists(marker));
    EXPECT_FALSE(exists(backups + "/t.json"));
}

TEST(RunOptions, DashWritesTheTraceToStdout) {
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", "-", "--", PYTHON_BIN, script("storages.py")});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const std::string programOutput = "views 10 (1000, 3000)\n";
    ASSERT_EQ(o.out.substr(0, programOutput.size()), programOutput);
    nlohmann::json trace = nlohmann::json::parse(o.out.substr(programOutput.size()));
    EXPECT_EQ(trace.at("processes").at(0).at("devices").at("cpu").at("peak_bytes"), 5000000);
    EXPECT_FALSE(exists("-"));
}

TEST(RunOptions, OptionsAfterTheCommandAreTheCommands) {
    const std::string dir = tempDir();
    const std::string trace = dir + "/trace.json";
    // Without "--": the program's -o, --epochs and -q are its own.
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, PYTHON_BIN, script("args.py"), "-o",
                     "foo", "--epochs", "1", "-q"},
                    "", {}, nullptr, dir);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "-o foo --epochs 1 -q\n");
    EXPECT_TRUE(exists(trace));
    EXPECT_FALSE(exists(dir + "/foo"));
    // With "--", and a "--" of the program's own after it.
    Outcome dashes = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN,
                          script("args.py"), "--", "-o", "x"});
    EXPECT_EQ(dashes.out, "-- -o x\n") << dashes.err;
    Outcome inner =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, PYTHON_BIN, script("args.py"), "--", "y"});
    EXPECT_EQ(inner.out, "-- y\n") << inner.err;
    // An option memtool does not know, before the command, is not the command.
    Outcome unknown = run({MEMTOOL_BIN, "run", "--bogus", PYTHON_BIN, script("args.py")});
    EXPECT_EQ(unknown.exitCode, 2);
    EXPECT_EQ(unknown.out, "");
    EXPECT_EQ(unknown.err,
              "memtool: run: unknown option --bogus (memtool's options go before the command; "
              "see memtool run --help)\n");
}

TEST(RunOptions, AProgramThatLoadedNoTrackedAllocatorSaysSo) {
    const std::string trace = tempDir() + "/trace.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-o", trace, "--", "/bin/true"});
    ASSERT_EQ(o.exitCode, 0);
    EXPECT_EQ(o.err,
              "memtool: wrote " + trace +
                  " (1 process)\n"
                  "memtool: nothing was measured: the program loaded no allocator memtool tracks "
                  "(PyTorch's libc10, CUDA); does it import torch, under a python that has it?\n");
    EXPECT_FALSE(readJson(trace).at("processes").at(0).at("tracked").get<bool>());
}

// A program LD_PRELOAD cannot reach (statically linked) runs as it does bare, and
// the run says why nothing was measured.
TEST(RunOptions, AProgramTheCollectorCannotLoadIntoSaysWhy) {
    const std::string trace = tempDir() + "/trace.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-o", trace, "--", STATIC_PROGRAM_BIN, "7"});
    EXPECT_EQ(o.exitCode, 7);
    const std::string why = std::string(STATIC_PROGRAM_BIN) +
                            " is statically linked: memtool's collector (LD_PRELOAD) cannot load "
                            "into it; link it dynamically against LibTorch";
    EXPECT_EQ(o.err, "memtool: wrote " + trace +
                         " (1 process)\nmemtool: nothing was measured: " + why + "\n");
    const nlohmann::json p = readJson(trace).at("processes").at(0);
    EXPECT_FALSE(p.at("tracked").get<bool>());
    EXPECT_EQ(p.at("exit_code"), 7);
    EXPECT_EQ(p.at("warnings"), nlohmann::json::array({why}));
    // The report and a CI check say it too.
    Outcome report = run({MEMTOOL_BIN, "report", trace});
    ASSERT_EQ(report.exitCode, 0) << report.err;
    EXPECT_NE(report.out.find("\nNo tracked allocations: " + why + ".\n"), std::string::npos)
        << report.out;
    Outcome check = run({MEMTOOL_BIN, "check", trace, "--max-peak", "cpu=1MiB"});
    EXPECT_EQ(check.exitCode, 1);
    EXPECT_EQ(check.out,
              "FAIL  nothing was measured: " + why + "\nmemtool check: 1 check, 1 failed\n");
}

namespace {

// The lines of `text` that start with `prefix`.
std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix) {
    std::vector<std::string> lines;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(at, end - at);
        if (line.compare(0, prefix.size(), prefix) == 0) lines.push_back(line);
        at = end + 1;
    }
    return lines;
}

}  // namespace

// MEMTOOL_LOG=debug: the collector says what it decided, one line each on stderr,
// with its pid; nothing else on stderr changes, and without it there is no such line.
TEST(RunOptions, DebugLogSaysWhatTheCollectorDecided) {
    const std::string dir = tempDir();
    const std::vector<std::string> program{PYTHON_BIN, "-c",
                                           "import sys, torch\n"
                                           "x = torch.empty(1000)\n"
                                           "sys.stderr.write('program done\\n')\n"};
    auto runWith = [&](const std::vector<std::string>& env) {
        std::vector<std::string> argv{MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--"};
        argv.insert(argv.end(), program.begin(), program.end());
        return run(argv, "", env);
    };
    Outcome quiet = runWith({});
    ASSERT_EQ(quiet.exitCode, 0) << quiet.err;
    EXPECT_EQ(quiet.err, "program done\n");

    Outcome o = runWith({"MEMTOOL_LOG=debug"});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const nlohmann::json p = readJson(dir + "/t.json").at("processes").at(0);
    const std::string prefix = "memtool[debug] " + std::to_string(p.at("pid").get<int>()) + ": ";
    const std::vector<std::string> lines = linesStartingWith(o.err, "memtool[");
    ASSERT_GE(lines.size(), 4u) << o.err;
    for (const std::string& line : lines)
        EXPECT_EQ(line.compare(0, prefix.size(), prefix), 0) << line;
    // Every other line of stderr is the program's.
    EXPECT_EQ(linesStartingWith(o.err, "program done"), std::vector<std::string>{"program done"});
    EXPECT_EQ(
        o.err.size(), std::string("program done\n").size() + [&] {
            size_t bytes = 0;
            for (const std::string& line : lines) bytes += line.size() + 1;
            return bytes;
        }());
    EXPECT_EQ(lines.front().substr(prefix.size(), 28), "collector loaded, stream to ");
    EXPECT_EQ(lines.front().substr(lines.front().size() - 15), "/collector.sock");
    EXPECT_EQ(linesStartingWith(o.err, prefix + "stream open"),
              std::vector<std::string>{prefix + "stream open, native stacks on, python stacks on"});
    EXPECT_EQ(linesStartingWith(o.err, prefix + "native stacks: "),
              std::vector<std::string>{prefix + "native stacks: memtool's CFI walk"});
    // The stream's end counts what the trace counts.
    const nlohmann::json& stream = p.at("stream");
    EXPECT_EQ(linesStartingWith(o.err, prefix + "stream end: "),
              std::vector<std::string>{
                  prefix + "stream end: " + std::to_string(stream.at("records").get<uint64_t>()) +
                  " records, 0 events missed"});
    // libc10's allocator, hooked where libc10 is.
    const std::vector<std::string> hooked =
        linesStartingWith(o.err, prefix + "allocator hooked in ");
    ASSERT_EQ(hooked.size(), 1u) << o.err;
    const std::string library = hooked[0].substr(hooked[0].rfind('/') + 1);
    EXPECT_EQ(library.compare(0, 9, "libc10.so"), 0) << hooked[0];  // Debian's: libc10.so.1.13
    // Each module the stream announced, by number.
    EXPECT_EQ(linesStartingWith(o.err, prefix + "module 1: ").size(), 1u) << o.err;

    Outcome bad = runWith({"MEMTOOL_LOG=verbose"});
    ASSERT_EQ(bad.exitCode, 0) << bad.err;
    EXPECT_EQ(bad.err,
              "memtool: MEMTOOL_LOG=verbose: unknown level (debug or warn); warnings only\n"
              "program done\n");
}
