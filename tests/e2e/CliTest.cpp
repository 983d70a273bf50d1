// Exit codes and one-line errors of the CLI itself.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// What closes every line report.
constexpr const char* kLineLegend =
    "\nPeak: the device's total, at most, while the line ran (what it called included) · "
    "Allocated: while it was on the stack · Self alloc: by the line itself\n";

std::string write(const std::string& text) {
    std::string path = tempDir() + "/file.json";
    std::ofstream(path) << text;
    return path;
}
}  // namespace

TEST(Cli, ReportRejectsBadInputWithExitTwo) {
    Outcome missing = run({MEMTOOL_BIN, "report", "/nonexistent/trace.json"});
    EXPECT_EQ(missing.exitCode, 2);
    EXPECT_EQ(missing.err,
              "memtool: cannot open /nonexistent/trace.json: No such file or directory\n");
    std::string bad = write("{ not json");
    Outcome invalid = run({MEMTOOL_BIN, "report", bad});
    EXPECT_EQ(invalid.exitCode, 2);
    EXPECT_EQ(invalid.err, "memtool: " + bad + ": not valid JSON\n");
    std::string other = write(R"({"schema": "memtool.trace/99", "processes": []})");
    Outcome schema = run({MEMTOOL_BIN, "report", other});
    EXPECT_EQ(schema.exitCode, 2);
    EXPECT_EQ(schema.err,
              "memtool: " + other +
                  ": unknown schema 'memtool.trace/99' (this memtool reads memtool.trace/1)\n");
    Outcome sort = run({MEMTOOL_BIN, "report", other, "--sort", "size"});
    EXPECT_EQ(sort.exitCode, 2);
}

// An option or argument a command does not take, or one it needs, is named with
// the command (CLI11 alone said "The following arguments were not expected:
// trace.json -f", naming the trace first, and "new is required").
TEST(Cli, AnUnknownOptionOrAMissingArgumentIsNamedWithItsCommand) {
    const struct {
        std::vector<std::string> args;
        std::string err;
    } cases[] = {
        {{"report", "-f", "html", "trace.json"},
         "memtool: report: unknown option '-f' (memtool report --help)\n"},
        {{"diff", "a.json", "b.json", "c.json"},
         "memtool: diff: unexpected argument 'c.json' (memtool diff --help)\n"},
        {{"check", "--max-peek", "cpu=1GiB", "t.json"},
         "memtool: check: unknown option '--max-peek' (memtool check --help)\n"},
        {{"diff", "base.json"}, "memtool: diff: new is required (memtool diff --help)\n"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> argv{MEMTOOL_BIN};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        Outcome o = run(argv);
        EXPECT_EQ(o.exitCode, 2) << c.err;
        EXPECT_EQ(o.err, c.err);
        EXPECT_EQ(o.out, "");
    }
}

TEST(Cli, AMissingOrMisspeltCommandIsNamed) {
    const std::string commands = "run, attach, ctl, report, check, diff; memtool --help)\n";
    Outcome none = run({MEMTOOL_BIN});
    EXPECT_EQ(none.exitCode, 2);
    EXPECT_EQ(none.err, "memtool: no command given (" + commands);
    Outcome typo = run({MEMTOOL_BIN, "reprot", "trace.json"});
    EXPECT_EQ(typo.exitCode, 2);
    EXPECT_EQ(typo.err, "memtool: unknown command 'reprot' (" + commands);
    EXPECT_EQ(typo.out, "");
    Outcome version = run({MEMTOOL_BIN, "--version"});
    EXPECT_EQ(version.exitCode, 0);
    EXPECT_EQ(version.out.rfind("memtool ", 0), 0u);
}

TEST(Cli, RunReportsCommandsThatCannotStart) {
    std::string trace = tempDir() + "/t.json";
    Outcome missing = run({MEMTOOL_BIN, "run", "-o", trace, "--", "/nonexistent/program"});
    EXPECT_EQ(missing.exitCode, 127);
    EXPECT_EQ(missing.err,
              "memtool: cannot run '/nonexistent/program': No such file or directory\n");
    Outcome notExec = run({MEMTOOL_BIN, "run", "-o", trace, "--", "/tmp"});
    EXPECT_EQ(notExec.exitCode, 126);
}

// memtool's last words (the summary on stderr) may find their reader gone, as in
// `memtool run ... 2>&1 | head -1`: the write fails, and memtool still exits
// with the program's code (before, it died of SIGPIPE: 141). The program gets
// SIGPIPE as memtool found it, not memtool's own SIG_IGN.
TEST(Cli, RunOutlivesAReaderThatHasGone) {
    const std::string trace = tempDir() + "/t.json";
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    close(fds[0]);  // nobody reads memtool's stderr
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args{MEMTOOL_BIN, "run", "-o", trace, "--", "/bin/sh", "-c", "exit 7"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 7);
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(trace)).at("processes").at(0).at("exit_code"), 7);

    const std::vector<std::string> ignored{"/bin/sh", "-c", "grep SigIgn /proc/self/status"};
    Outcome bare = run(ignored);
    std::vector<std::string> under{MEMTOOL_BIN, "run", "-q", "-o", trace, "--"};
    under.insert(under.end(), ignored.begin(), ignored.end());
    Outcome o = run(under);
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, bare.out);
    EXPECT_EQ(bare.out.rfind("SigIgn:\t", 0), 0u) << bare.out;
}

// -o /dev/null, or a link to it: a run wanted for its control or its live view,
// not its trace. Nothing is written (no temporary is renamed onto the device) and
// the summary still gives the peak; another character device is still refused
// before the program starts.
TEST(Cli, RunToDevNullWritesNoTrace) {
    const std::string link = tempDir() + "/null";
    ASSERT_EQ(symlink("/dev/null", link.c_str()), 0);
    for (const std::string& out : {std::string("/dev/null"), link}) {
        Outcome o = run({MEMTOOL_BIN, "run", "-o", out, "--", PYTHON_BIN, script("storages.py")});
        EXPECT_EQ(o.exitCode, 0) << o.err;
        EXPECT_EQ(o.out, "views 10 (1000, 3000)\n");
        EXPECT_EQ(o.err, "memtool: wrote no trace (-o /dev/null) (1 process, cpu peak 4.77 MiB)\n");
    }
    struct stat st {};
    ASSERT_EQ(lstat("/dev/null", &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    Outcome zero = run({MEMTOOL_BIN, "run", "-o", "/dev/zero", "--", "/bin/true"});
    EXPECT_EQ(zero.exitCode, 125);
    EXPECT_EQ(zero.err,
              "memtool: cannot write /dev/zero: it is a character device, not a regular file\n");
}

TEST(Cli, AReportThatCannotBeWrittenSaysWhy) {
    Profiled p = profile({"/bin/sh", "-c", "exit 0"});
    const std::string dir = tempDir();
    const std::string trace = write(p.trace.dump());
    Outcome toDir = run({MEMTOOL_BIN, "report", trace, "-o", dir});
    EXPECT_EQ(toDir.exitCode, 2);
    EXPECT_EQ(toDir.err, "memtool: cannot write " + dir + ": Is a directory\n");
    Outcome nowhere = run({MEMTOOL_BIN, "report", trace, "-o", dir + "/no/such/r.txt"});
    EXPECT_EQ(nowhere.exitCode, 2);
    EXPECT_EQ(nowhere.err,
              "memtool: cannot write " + dir + "/no/such/r.txt: No such file or directory\n");
}

TEST(Cli, ProgramWithoutTorchGetsAnEmptyCompleteTrace) {
    Profiled p = profile({"/bin/sh", "-c", "exit 5"});
    EXPECT_EQ(p.outcome.exitCode, 5);
    EXPECT_EQ(p.process().at("exit_code"), 5);
    EXPECT_TRUE(p.process().at("complete").get<bool>());
    EXPECT_TRUE(p.process().at("devices").empty());
}

TEST(Cli, ReportRendersTextAndJson) {
    // Run where the script is, so that --lines reads it (SourceFiles.h).
    Profiled p = profile({PYTHON_BIN, script("storages.py")}, {}, SCRIPTS_DIR);
    std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << p.trace.dump();
    Outcome text = run({MEMTOOL_BIN, "report", trace, "--top", "2"});
    ASSERT_EQ(text.exitCode, 0) << text.err;
    // Peak, when (a time that varies), leaked, held at exit (the module's globals a
    // and c hold what was live), allocated, freed.
    EXPECT_NE(text.out.find("\ncpu                          4.77 MiB "), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find(
                  " s          0 B     4.77 MiB     5.72 MiB     5.72 MiB          3          3\n"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Top 2 hotspots on cpu by peak"), std::string::npos);
    EXPECT_NE(text.out.find("<module> (storages.py:4)"), std::string::npos);

    Outcome json = run(
        {MEMTOOL_BIN, "report", trace, "--format", "json", "--top", "1", "--sort", "allocated"});
    ASSERT_EQ(json.exitCode, 0);
    auto j = nlohmann::json::parse(json.out);
    const auto& top = j.at("processes").at(0).at("top_hotspots").at("cpu");
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top.at(0).at("allocated_bytes"), 3000000);

    Outcome lines = run({MEMTOOL_BIN, "report", trace, "--lines"}, "", {}, nullptr, SCRIPTS_DIR);
    ASSERT_EQ(lines.exitCode, 0);
    // Source text beside the numbers (3,000,000 + 1,000,000 live at line 10); the
    // def line of scratch shown, blank.
    EXPECT_NE(lines.out.find("    10      3.81 MiB    976.56 KiB    976.56 KiB        1      b = "
                             "torch.empty(1_000_000, dtype=torch.uint8)  # line 10"),
              std::string::npos)
        << lines.out;
    EXPECT_NE(
        lines.out.find("     9                                                     def scratch():"),
        std::string::npos)
        << lines.out;
}

namespace {
// A one-process trace whose cpu row and one line row are given.
std::string traceWith(const std::string& cpu, const std::string& line = "") {
    return write(
        R"json({"schema": "memtool.trace/1", "processes": [{"pid": 1, "command": ["x"], "complete": true,
        "duration_s": 1.0, "devices": {"cpu": )json" +
        cpu + R"json(}, "hotspots": [], "lines": [)json" + line + "]}]}");
}
const char* const kCpu =
    R"json({"peak_bytes": 10, "current_bytes": 0, "allocated_bytes": 10, "freed_bytes": 10,
    "alloc_count": 1, "free_count": 1})json";
}  // namespace

TEST(Cli, MalformedFieldsAreBadInput) {
    std::string negative =
        traceWith(R"json({"peak_bytes": -1, "current_bytes": 0, "allocated_bytes": 0,
        "freed_bytes": 0, "alloc_count": 0, "free_count": 0})json");
    for (const char* command : {"report", "diff"}) {
        std::vector<std::string> argv{MEMTOOL_BIN, command, negative};
        if (std::string(command) == "diff") argv.push_back(negative);
        Outcome o = run(argv);
        EXPECT_EQ(o.exitCode, 2) << command;
        EXPECT_EQ(o.err, "memtool: " + negative +
                             ": malformed trace: \"peak_bytes\" is -1, not a whole number >= 0\n");
    }
    std::string badFrame =
        write(R"json({"schema": "memtool.trace/1", "processes": [{"pid": 1, "command": ["x"],
        "complete": true, "duration_s": 1.0, "devices": {}, "frames": [], "hotspots": [{"device": "cpu",
        "site": "f (a.py:1)", "stack": ["f (a.py:1)"], "frames": [0], "site_frame": 0, "allocated_bytes": 1,
        "count": 1, "peak_bytes": 0, "leaked_bytes": 0}]}]})json");
    Outcome check = run({MEMTOOL_BIN, "check", badFrame, "--max-peak", "cpu=1"});
    EXPECT_EQ(check.exitCode, 2);
    EXPECT_EQ(check.err,
              "memtool: " + badFrame +
                  ": malformed trace: frame id 0 is not in the frames table (0 frames)\n");
}

// Two inputs that used to escape as exceptions and end as "internal error" with 125.
TEST(Cli, OddButValidInputIsNoInternalError) {
    std::string t = traceWith(kCpu);
    // A percentage past a double's range.
    std::string huge = std::string(400, '9') + "%";
    Outcome increase = run({MEMTOOL_BIN, "check", t, "--baseline", t, "--max-increase", huge});
    EXPECT_EQ(increase.exitCode, 2);
    EXPECT_EQ(increase.err,
              "memtool: bad increase '" + huge + "' (use a percentage like 5% or a size)\n");
    // Arguments long enough to overflow std::regex's recursion (SIGSEGV before).
    const std::string longer = std::string(100000, '9');
    Outcome percent =
        run({MEMTOOL_BIN, "check", t, "--baseline", t, "--max-increase", longer + "%"});
    EXPECT_EQ(percent.exitCode, 2);
    EXPECT_EQ(percent.err,
              "memtool: bad increase '" + longer + "%' (use a percentage like 5% or a size)\n");
    Outcome device = run({MEMTOOL_BIN, "check", t, "--max-peak", "cuda:" + longer + "=1"});
    EXPECT_EQ(device.exitCode, 2);
    EXPECT_EQ(device.err,
              "memtool: bad device 'cuda:" + longer +
                  "' (use cpu, pinned, shared, cuda, cuda:N, cuda:N.active, "
                  "cuda:N.reserved, cuda:N.graphs, cuda:N.graphs_active, npu or npu:N)\n");
    // A function name that is no Python identifier: the line report renders it.
    std::string odd = traceWith(
        kCpu, R"json({"file": "/nonexistent/a.py", "line": 2, "function": "f(", "device": "cpu",
        "peak_bytes": 10, "allocated_bytes": 10, "self_allocated_bytes": 10, "count": 1})json");
    Outcome lines = run({MEMTOOL_BIN, "report", odd, "--lines", "--all-files", "--read-any-file"});
    EXPECT_EQ(lines.exitCode, 0) << lines.err;
    EXPECT_EQ(lines.out,
              "\n## f( — /nonexistent/a.py [cpu] (pid 1)\n"
              "  Line          Peak     Allocated    Self alloc    Count  Code\n"
              "        (source not found; line numbers only)\n"
              "     2          10 B          10 B          10 B        1  \n" +
                  std::string(kLineLegend));
}

// ctl's own options work before or after the PID; every other word is the
// process's command's (yield --to disk reaches the process whole).
TEST(Cli, CtlOptionsAreTakenAnywhereAndTheirValuesChecked) {
    const std::vector<std::string> env{"MEMTOOL_CONTROL_DIR=" + tempDir() + "/control"};
    Outcome none = run({MEMTOOL_BIN, "ctl"}, "", env);
    EXPECT_EQ(none.exitCode, 2);
    EXPECT_EQ(none.err,
              "memtool: ctl: say `list`, or a process id (or --all, --rank N, --run ID) and a "
              "command\n");
    Outcome badFormat = run({MEMTOOL_BIN, "ctl", "1", "status", "--format", "xml"}, "", env);
    EXPECT_EQ(badFormat.exitCode, 2);
    EXPECT_EQ(badFormat.err, "memtool: ctl: --format is text or json, not 'xml'\n");
    Outcome noValue = run({MEMTOOL_BIN, "ctl", "1", "yield", "--timeout"}, "", env);
    EXPECT_EQ(noValue.exitCode, 2);
    EXPECT_EQ(noValue.err, "memtool: ctl: --timeout needs a value\n");
    Outcome badTimeout = run({MEMTOOL_BIN, "ctl", "1", "restore", "--timeout=soon"}, "", env);
    EXPECT_EQ(badTimeout.exitCode, 2);
    EXPECT_EQ(badTimeout.err,
              "memtool: ctl: --timeout takes seconds (above 0, at most 10000000), not 'soon'\n");
    // Before the PID too; no endless or negative wait (inf overflowed the deadline).
    for (const char* seconds : {"inf", "nan", "-5", "0", "1e8"}) {
        Outcome before = run({MEMTOOL_BIN, "ctl", "--timeout", seconds, "list"}, "", env);
        EXPECT_EQ(before.exitCode, 2) << seconds;
        EXPECT_EQ(before.err, std::string("memtool: --timeout: takes seconds (above 0, at most "
                                          "10000000), not '") +
                                  seconds + "'\n");
        Outcome after = run({MEMTOOL_BIN, "ctl", "1", "status", "--timeout", seconds}, "", env);
        EXPECT_EQ(after.exitCode, 2) << seconds;
    }
    // snapshot's -o is checked before the process is asked (as run's -o before it
    // starts): a place no file can be made is a usage error, whatever the process.
    Outcome nowhere =
        run({MEMTOOL_BIN, "ctl", "1", "snapshot", "-o", "/nonexistent/t.json"}, "", env);
    EXPECT_EQ(nowhere.exitCode, 2);
    EXPECT_EQ(nowhere.err,
              "memtool: cannot write /nonexistent/t.json: No such file or directory\n");
    // Well-formed: the words reach the lookup of process 1 (not ours), options and all.
    Outcome yield =
        run({MEMTOOL_BIN, "ctl", "1", "yield", "--to", "disk", "--format=json"}, "", env);
    EXPECT_EQ(yield.exitCode, 3);
    EXPECT_EQ(yield.err,
              "memtool: process 1 does not run under memtool (see `memtool ctl list`)\n");
}

// Counts are whole numbers in decimal: CLI11 alone took "-1" as the largest count,
// "0x3" as three and refused "08" as a bad octal number.
TEST(Cli, CountsAreDecimalWholeNumbers) {
    const std::string t = traceWith(kCpu);
    for (const char* bad : {"-1", "0x3", "1.5", "", "99999999999999999999", "1000000001"}) {
        for (const char* option : {"--top", "--depth"}) {
            Outcome o = run({MEMTOOL_BIN, "report", t, option, bad});
            EXPECT_EQ(o.exitCode, 2) << option << " " << bad;
            EXPECT_EQ(o.err, std::string("memtool: ") + option + ": '" + bad +
                                 "' is not a whole number from 0 to 1000000000\n");
        }
        Outcome diff = run({MEMTOOL_BIN, "diff", t, t, "--top", bad});
        EXPECT_EQ(diff.exitCode, 2) << bad;
    }
    for (const char* good : {"08", "0", "000", "1000000000"}) {
        Outcome o = run({MEMTOOL_BIN, "report", t, "--top", good, "--depth", good});
        EXPECT_EQ(o.exitCode, 0) << good << ": " << o.err;
        Outcome diff = run({MEMTOOL_BIN, "diff", t, t, "--top", good});
        EXPECT_EQ(diff.exitCode, 0) << good << ": " << diff.err;
    }
}

// A trace is a regular file of bounded size: anything else is refused before it
// is read (a FIFO would block, /dev/zero never end, a huge file take all memory).
TEST(Cli, TraceMustBeARegularFileOfBoundedSize) {
    const std::string dir = tempDir();
    ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
    Outcome fifo = run({MEMTOOL_BIN, "report", dir + "/fifo"});
    EXPECT_EQ(fifo.exitCode, 2);
    EXPECT_EQ(fifo.err,
              "memtool: cannot open " + dir + "/fifo: it is a FIFO, not a regular file\n");
    Outcome zero = run({MEMTOOL_BIN, "diff", "/dev/zero", "/dev/zero"});
    EXPECT_EQ(zero.exitCode, 2);
    EXPECT_EQ(zero.err,
              "memtool: cannot open /dev/zero: it is a character device, not a regular file\n");
    // Sparse: 300 GiB that take no disk.
    const std::string huge = dir + "/huge.json";
    { std::ofstream(huge) << ""; }
    ASSERT_EQ(truncate(huge.c_str(), off_t{300} << 30), 0);
    Outcome big = run({MEMTOOL_BIN, "check", huge, "--max-peak", "cpu=1"});
    EXPECT_EQ(big.exitCode, 2);
    EXPECT_EQ(big.err, "memtool: cannot open " + huge +
                           ": it is larger than 256.00 MiB (322122547200 bytes); "
                           "MEMTOOL_MAX_TRACE_BYTES raises the limit\n");
    // The limit is the environment's to change.
    const std::string t = traceWith(kCpu);
    Outcome lowered = run({MEMTOOL_BIN, "report", t}, "", {"MEMTOOL_MAX_TRACE_BYTES=100"});
    EXPECT_EQ(lowered.exitCode, 2);
    EXPECT_EQ(lowered.err.rfind("memtool: cannot open " + t + ": it is larger than 100 B (", 0), 0u)
        << lowered.err;
    Outcome raised = run({MEMTOOL_BIN, "report", t}, "", {"MEMTOOL_MAX_TRACE_BYTES=1KiB"});
    EXPECT_EQ(raised.exitCode, 0) << raised.err;
    Outcome nonsense = run({MEMTOOL_BIN, "report", t}, "", {"MEMTOOL_MAX_TRACE_BYTES=lots"});
    EXPECT_EQ(nonsense.exitCode, 2);
    EXPECT_EQ(nonsense.err, "memtool: MEMTOOL_MAX_TRACE_BYTES='lots' is not a size (e.g. 2GiB)\n");
}

// JSON nested a million deep parses, but printing or copying it would overflow
// the stack: such a file is no trace.
TEST(Cli, DeeplyNestedJsonIsBadInput) {
    const std::string deep = write(R"({"schema": "memtool.trace/1", "processes": )" +
                                   std::string(1000000, '[') + std::string(1000000, ']') + "}");
    Outcome o = run({MEMTOOL_BIN, "report", deep});
    EXPECT_EQ(o.exitCode, 2);
    EXPECT_EQ(o.err, "memtool: " + deep + ": not a memtool trace (nested deeper than 64 levels)\n");
    // Within the limit, the malformed field is quoted briefly.
    const std::string wrong = traceWith(
        R"json({"peak_bytes": [[[[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]]]],
        "current_bytes": 0, "allocated_bytes": 0, "freed_bytes": 0, "alloc_count": 0,
        "free_count": 0})json");
    Outcome quoted = run({MEMTOOL_BIN, "report", wrong});
    EXPECT_EQ(quoted.exitCode, 2);
    EXPECT_EQ(quoted.err, "memtool: " + wrong +
                              ": malformed trace: \"peak_bytes\" is [[[[1,2,3,4,5,6,7,8,9,10,11,12,"
                              "13,14,15,..., not a whole number >= 0\n");
}

// A trace names its source files, and may come from someone else: --lines reads
// only regular files inside both its cwd and the directory report runs in, unless
// --all-files (this printed /etc/passwd, and read /dev/zero until memory ran out).
TEST(Cli, LineReportReadsOnlyTheProgramsOwnFiles) {
    const std::string here = tempDir();
    ASSERT_EQ(mkfifo((here + "/fifo.py").c_str(), 0600), 0);
    auto row = [](const std::string& file) {
        return R"json({"file": ")json" + file +
               R"json(", "line": 1, "function": "f", "device": "cpu", "peak_bytes": 10,
               "allocated_bytes": 10, "self_allocated_bytes": 10, "count": 1})json";
    };
    // A crafted cwd of "/" would put every file inside it: "/" is no directory of the
    // trace's own, so only files it recorded are read (none here), and none shown.
    std::string t = write(
        R"json({"schema": "memtool.trace/1", "processes": [{"pid": 1, "command": ["x"],
        "cwd": "/", "complete": true, "duration_s": 1.0, "devices": {"cpu": )json" +
        std::string(kCpu) + R"json(}, "hotspots": [], "lines": [)json" + row("/etc/passwd") + "," +
        row("/dev/zero") + "," + row(here + "/fifo.py") + "]}]}");
    Outcome o = run({MEMTOOL_BIN, "report", t, "--lines"}, "", {}, nullptr, here);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const std::string header = "  Line          Peak     Allocated    Self alloc    Count  Code\n";
    const std::string unrecorded =
        "        (source not read: the trace has no directory here and no record of this file; "
        "--read-any-file reads it)\n";
    const std::string numbers = "     1          10 B          10 B          10 B        1  \n";
    EXPECT_EQ(o.out, "\n## f — /dev/zero [cpu] (pid 1)\n" + header + unrecorded + numbers +
                         "\n## f — /etc/passwd [cpu] (pid 1)\n" + header + unrecorded + numbers +
                         "\n## f — " + here + "/fifo.py [cpu] (pid 1)\n" + header + unrecorded +
                         numbers + kLineLegend);
    // --all-files only adds library files' rows; it reads nothing more.
    Outcome library =
        run({MEMTOOL_BIN, "report", t, "--lines", "--all-files"}, "", {}, nullptr, here);
    EXPECT_EQ(library.out, o.out);
    // --read-any-file reads any regular file, and says so; a device or FIFO still is none.
    Outcome all =
        run({MEMTOOL_BIN, "report", t, "--lines", "--read-any-file"}, "", {}, nullptr, here);
    ASSERT_EQ(all.exitCode, 0) << all.err;
    EXPECT_EQ(all.err,
              "memtool: --read-any-file: reading every file this trace names, wherever it is\n");
    EXPECT_NE(all.out.find("\n## f — /dev/zero [cpu] (pid 1)\n" + header +
                           "        (source not read: it is a character device, not a regular "
                           "file)\n" +
                           numbers),
              std::string::npos)
        << all.out;
    EXPECT_NE(all.out.find("\n## f — /etc/passwd [cpu] (pid 1)\n" + header +
                           "     1          10 B          10 B          10 B        1  root:"),
              std::string::npos)
        << all.out;
    EXPECT_NE(all.out.find("(source not read: it is a FIFO, not a regular file)"),
              std::string::npos)
        << all.out;
}

// A stream from a broken or hostile process of the run: memtool run neither
// hangs nor loses the trace.
TEST(Cli, RunSymbolizesAroundAModuleThatIsAFifo) {
    // libdw used to open the FIFO and wait for a writer for ever, signals blocked.
    const std::string dir = tempDir();
    Profiled p = profile({PYTHON_BIN, script("fake_collector.py"), "fifo", dir});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "sent\n");
    EXPECT_TRUE(p.process().at("complete").get<bool>()) << p.process().dump();
    EXPECT_EQ(p.process().at("command"), nlohmann::json({"hostile"}));
    const auto& h = p.process().at("hotspots").at(0);
    EXPECT_EQ(h.at("stack"), nlohmann::json({"?? (libfifo.so+0x100)"}));
    EXPECT_EQ(h.at("allocated_bytes"), 100);
}

TEST(Cli, ReportSitesSkipWrappersAndGroup) {
    Profiled p = profile({PYTHON_BIN, script("optimizer.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << p.trace.dump();
    // The optimizer's state: made in Adam.step, reached through torch's wrappers, and
    // held at exit by the module's global `opt` (exp_avg and exp_avg_sq, 2,002,000
    // bytes each, and a 4-byte step per parameter): held, not leaked. torch 1.13
    // makes each kind on a line of Adam.step of its own (adam.py:218, 220): 1.91 MiB
    // held on each row. torch 2.x makes them all in Adam._init_group, called from one
    // line of Adam.step (adam.py:238 in 2.14): one row of 3.82 MiB (4,004,008 bytes).
    const std::string held = torchMajorVersion() == 1 ? "1.91 MiB" : "3.82 MiB";
    Outcome text = run({MEMTOOL_BIN, "report", trace, "--top", "20"});
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("          0 B     " + held + "  train (optimizer.py:13)\n" +
                            std::string(64, ' ') + "via Adam.step (adam.py:"),
              std::string::npos)
        << text.out;
    EXPECT_EQ(text.out.find("wrapper"), std::string::npos) << text.out;
    Outcome library = run({MEMTOOL_BIN, "report", trace, "--top", "20", "--site", "library"});
    EXPECT_NE(library.out.find("     1.91 MiB  Adam.step (adam.py:"), std::string::npos)
        << library.out;
    Outcome ops = run({MEMTOOL_BIN, "report", trace, "--group-by", "op", "--sort", "held-at-exit"});
    EXPECT_NE(ops.out.find(
                  "  Operator\n  1     3.82 MiB     3.82 MiB        4          0 B     3.82 MiB  "
                  "aten::zeros_like\n"),
              std::string::npos)
        << ops.out;
    // Folded stacks and the line table have no hotspot rows to shape.
    Outcome misplaced =
        run({MEMTOOL_BIN, "report", trace, "--group-by", "op", "--format", "collapsed"});
    EXPECT_EQ(misplaced.exitCode, 2);
    EXPECT_EQ(misplaced.err,
              "memtool: --group-by shapes hotspot rows (the text report's table, --format json "
              "or html), not --format collapsed\n");
    Outcome lines = run({MEMTOOL_BIN, "report", trace, "--lines", "--depth", "2"});
    EXPECT_EQ(lines.exitCode, 2);
    EXPECT_EQ(lines.err,
              "memtool: --depth shapes hotspot rows (the text report's table, --format json or "
              "html), not the --lines table\n");
}

// The HTML report's hotspot tables make the text table's choices: grouped rows
// (their column named after the grouping, no stack to open), and a site chosen
// again with the frames --depth shows below it.
TEST(Cli, HtmlHotspotTablesFollowSiteDepthAndGrouping) {
    const std::string wrappers = GOLDEN_DIR + "/traces/wrappers.json";
    Outcome modules =
        run({MEMTOOL_BIN, "report", wrappers, "--format", "html", "--group-by", "module"});
    ASSERT_EQ(modules.exitCode, 0) << modules.err;
    EXPECT_NE(modules.out.find(
                  "<h3>cpu <span class=\"sub\">top 3 modules by peak</span></h3>\n"
                  "<table class=\"hotspots sortable\" data-device=\"cpu\">\n<thead><tr><th "
                  "class=\"num\">#</th><th>Module</th><th class=\"num\">Peak</th><th "
                  "class=\"num\">Allocated</th><th class=\"num\">Count</th><th "
                  "class=\"num\">Leaked</th></tr></thead>\n<tbody>\n"
                  "<tr><td class=\"num\" data-v=\"1\">1</td><td class=\"site\" data-v=\"(no "
                  "module&apos;s forward)\">(no module&apos;s forward)</td><td class=\"num\" "
                  "data-v=\"2000000\">1.91 MiB</td><td class=\"num\" data-v=\"2004096\">1.91 "
                  "MiB</td><td class=\"num\" data-v=\"3\">3</td><td class=\"num\" "
                  "data-v=\"2000000\">1.91 MiB</td></tr>\n"
                  "<tr><td class=\"num\" data-v=\"2\">2</td><td class=\"site\" "
                  "data-v=\"Linear.forward (linear.py)\">Linear.forward (linear.py)</td><td "
                  "class=\"num\" data-v=\"128000\">125.00 KiB</td><td class=\"num\" "
                  "data-v=\"256000\">250.00 KiB</td><td class=\"num\" data-v=\"2\">2</td><td "
                  "class=\"num\" data-v=\"0\">0 B</td></tr>\n"
                  "<tr><td class=\"num\" data-v=\"3\">3</td><td class=\"site\" "
                  "data-v=\"ReLU.forward (activation.py)\">ReLU.forward (activation.py)</td><td "
                  "class=\"num\" data-v=\"128000\">125.00 KiB</td><td class=\"num\" "
                  "data-v=\"128000\">125.00 KiB</td><td class=\"num\" data-v=\"1\">1</td><td "
                  "class=\"num\" data-v=\"0\">0 B</td></tr>\n</tbody></table>\n"),
              std::string::npos)
        << modules.out;

    Outcome library = run({MEMTOOL_BIN, "report", wrappers, "--format", "html", "--site", "library",
                           "--depth", "2", "--top", "1"});
    ASSERT_EQ(library.exitCode, 0) << library.err;
    EXPECT_NE(library.out.find("<td class=\"site\" data-v=\"Adam.step (adam.py:218)\"><details>"
                               "<summary>Adam.step (adam.py:218)</summary>"),
              std::string::npos)
        << library.out;
    EXPECT_NE(library.out.find("<li class=\"at\">Adam.step "
                               "(/usr/lib/python3/dist-packages/torch/optim/adam.py:218)</li>"),
              std::string::npos)
        << library.out;
    EXPECT_NE(library.out.find("</ol></details><div class=\"via\">via at::_ops::zeros_like::call "
                               "(libtorch_cpu.so.2.1)</div><div class=\"via\">via "
                               "at::detail::empty_strided_generic (libtorch_cpu.so.2.1)</div></td>"
                               "<td class=\"num\" data-v=\"2000000\">1.91 MiB</td>"),
              std::string::npos)
        << library.out;
}

TEST(Cli, ReportSaysWhyInsteadOfIgnoring) {
    const std::string train = GOLDEN_DIR + "/traces/train.json";
    // --function without --lines was ignored.
    Outcome function = run({MEMTOOL_BIN, "report", train, "--function", "train_step"});
    EXPECT_EQ(function.exitCode, 2);
    EXPECT_EQ(function.err, "memtool: --function selects rows of the line table: add --lines\n");
    // --sort active on a trace without caching-allocator figures sorted by peak, silently.
    Outcome active = run({MEMTOOL_BIN, "report", train, "--sort", "active"});
    EXPECT_EQ(active.exitCode, 2);
    EXPECT_EQ(active.err,
              "memtool: --sort active: the trace has no active or reserved figures (PyTorch's "
              "CUDA caching allocator, seen through the torch bridge); sort by peak, allocated, "
              "count, leaked or held-at-exit\n");
    // A function in a library file was blamed on missing Python stacks.
    Outcome library = run({MEMTOOL_BIN, "report", train, "--lines", "--function", "Thread.run"});
    EXPECT_EQ(library.exitCode, 0);
    EXPECT_EQ(library.out,
              "No line of your own code matches --function Thread.run: it is in library files "
              "(/usr/lib/python3.11/threading.py); --all-files shows them.\n");
    Outcome none = run({MEMTOOL_BIN, "report", train, "--lines", "--function", "nope"});
    EXPECT_EQ(none.out, "No line matches --function nope.\n");
    // --format json took no notice of --lines.
    Outcome json = run(
        {MEMTOOL_BIN, "report", train, "--lines", "--function", "make_batch", "--format", "json"});
    ASSERT_EQ(json.exitCode, 0) << json.err;
    const nlohmann::json table = nlohmann::json::parse(json.out)["processes"][0]["line_table"];
    ASSERT_EQ(table.size(), 1u) << table.dump(1);
    EXPECT_EQ(table[0].at("line"), 8);
    EXPECT_EQ(table[0].at("peak_bytes"), 9437184);
}

// A name in a trace is another program's text: report's table and lines, folded
// stacks and diff show its control characters escaped, never send them to the
// terminal (issue 51 item 9). The golden trace with one native function renamed.
TEST(Cli, NamesFromATraceNeverDriveTheTerminal) {
    std::ifstream in(GOLDEN_DIR + "/traces/train.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = "at::detail::empty_cpu";
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1))
        text.replace(at, name.size(), "at::detail::\\u001b[2J\\u0007empty_cpu");
    const std::string hostile = write(text);
    // No ";" in it: folded stacks use that to join frames.
    const std::string escaped = "at::detail::\\x1b[2J\\x07empty_cpu";
    const std::vector<std::vector<std::string>> commands = {
        {MEMTOOL_BIN, "report", hostile},
        {MEMTOOL_BIN, "report", hostile, "--format", "collapsed"},
        {MEMTOOL_BIN, "diff", GOLDEN_DIR + "/traces/train.json", hostile},
    };
    for (const auto& argv : commands) {
        Outcome o = run(argv);
        ASSERT_EQ(o.exitCode, 0) << argv[1] << ": " << o.err;
        EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << argv[1] << ": " << o.out;
        EXPECT_EQ(o.out.find('\x07'), std::string::npos) << argv[1];
        EXPECT_NE(o.out.find(escaped), std::string::npos) << argv[1] << ": " << o.out;
    }
}
