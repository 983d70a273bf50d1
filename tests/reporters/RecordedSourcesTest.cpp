// The code trace.json keeps of the user's files: what memtool run records (the
// lines the reports show, the file's hash), how it travels through trace.json,
// how a hostile trace's is refused, and how the line table shows it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/Error.h"
#include "core/SourceHash.h"
#include "reporters/LineReporter.h"
#include "tests/TempDir.h"
#include "tests/TestFrames.h"
#include "trace/RecordedSources.h"
#include "trace/TraceReader.h"

using namespace memtool;
using memtool::testing::pythonFrame;

namespace {

const std::string kProgram =
    "import torch\n"         // 1
    "\n"                     // 2
    "def make(n):\n"         // 3
    "    # a comment\n"      // 4
    "    return alloc(n)\n"  // 5
    "\n"                     // 6
    "def unused():\n"        // 7
    "    pass\n"             // 8
    "\n"                     // 9
    "x = make(3)\n";         // 10

core::LineStat row(const std::string& file, uint64_t line, const std::string& function) {
    core::LineStat l;
    l.file = file;
    l.line = line;
    l.function = function;
    l.device = "cpu";
    l.peakBytes = l.allocatedBytes = l.selfAllocatedBytes = 3;
    l.count = 1;
    return l;
}

// A process of a run in `dir` that allocated on prog.py's lines 5 and 10.
core::Trace traceOf(const std::string& dir) {
    core::ProcessTrace p;
    p.pid = 9;
    p.cwd = dir;
    p.lines = {row("prog.py", 5, "make"), row("prog.py", 10, "<module>"),
               row("/usr/lib/python3.10/threading.py", 900, "run"), row("gone.py", 4, "f")};
    p.frames = {pythonFrame("make", "prog.py", 5, true),
                pythonFrame("<module>", "prog.py", 10, true),
                pythonFrame("run", "/usr/lib/python3.10/threading.py", 900, false)};
    core::Trace t;
    t.processes.push_back(p);
    return t;
}

std::string tempDirectory() { return memtool::test_support::makeTempDir("memtool-sources"); }

}  // namespace

TEST(RecordedSources, KeepTheLinesTheReportsShowAndTheFilesHash) {
    const std::string dir = tempDirectory();
    std::ofstream(dir + "/prog.py") << kProgram;
    core::Trace t = traceOf(dir);
    reporters::recordSources(t);
    const auto& sources = t.processes[0].sources;
    // The library file is not the user's; gone.py could not be read.
    ASSERT_EQ(sources.size(), 1u);
    const core::SourceFile& prog = sources.at("prog.py");
    EXPECT_EQ(prog.fnv1a64, core::fnv1a64(kProgram));
    // make's block from its def (3 to 5), and line 10 (a block of its own).
    EXPECT_EQ(prog.lines, (std::map<uint64_t, std::string>{{3, "def make(n):"},
                                                           {4, "    # a comment"},
                                                           {5, "    return alloc(n)"},
                                                           {10, "x = make(3)"}}));
}

TEST(RecordedSources, TravelThroughTraceJson) {
    core::Trace t = traceOf("/src");
    t.processes[0].sources["prog.py"] = {0x00a1b2c3d4e5f607ULL,
                                         {{3, "def make(n):"}, {10, "x = 1"}}};
    const std::string text = reporters::traceToText(t);
    EXPECT_NE(text.find("\"fnv1a64\": \"00a1b2c3d4e5f607\""), std::string::npos) << text;
    const core::Trace back = reporters::traceFromText(text, "t.json");
    const core::SourceFile& prog = back.processes[0].sources.at("prog.py");
    EXPECT_EQ(prog.fnv1a64, 0x00a1b2c3d4e5f607ULL);
    EXPECT_EQ(prog.lines, t.processes[0].sources.at("prog.py").lines);
    // A trace without any keeps none (and writes no key).
    core::Trace none = traceOf("/src");
    EXPECT_EQ(reporters::traceToText(none).find("\"sources\""), std::string::npos);
}

TEST(RecordedSources, AHostileTracesSourcesAreBadInput) {
    auto load = [](const std::string& sources) {
        const std::string text =
            R"({"schema": "memtool.trace/1", "processes": [{"pid": 1, "command": ["x"],
            "complete": true, "duration_s": 1.0, "devices": {}, "hotspots": [], "sources": )" +
            sources + "}]}";
        try {
            reporters::traceFromText(text, "t.json");
        } catch (const core::Error& e) {
            EXPECT_EQ(e.exitCode(), core::kExitBadInput);
            return std::string(e.what());
        }
        return std::string("loaded");
    };
    const std::string ok = R"("fnv1a64": "00a1b2c3d4e5f607")";
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": [[1, "x"], [7, ""]]}})"), "loaded");
    EXPECT_EQ(load(R"([])"), "t.json: malformed trace: \"sources\" is not an object");
    EXPECT_EQ(load(R"({"a.py": {"fnv1a64": "00A1B2C3D4E5F607", "lines": []}})"),
              "t.json: malformed trace: the hash of source \"a.py\" is \"00A1B2C3D4E5F607\", not "
              "16 lowercase hex digits (FNV-1a, 64 bits)");
    EXPECT_EQ(load(R"({"a.py": {"fnv1a64": 12, "lines": []}})"),
              "t.json: malformed trace: the hash of source \"a.py\" is 12, not 16 lowercase hex "
              "digits (FNV-1a, 64 bits)");
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": [[2, "x"], [2, "y"]]}})"),
              "t.json: malformed trace: the lines of source \"a.py\" are not numbered from 1 up");
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": [[0, "x"]]}})"),
              "t.json: malformed trace: the lines of source \"a.py\" are not numbered from 1 up");
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": [[-1, "x"]]}})"),
              "t.json: malformed trace: a line number of source \"a.py\" is -1, not a whole "
              "number >= 0");
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": [[1, "x\ny"]]}})"),
              "t.json: malformed trace: line 1 of source \"a.py\" is more than one line");
    EXPECT_EQ(
        load(R"({"a.py": {)" + ok + R"(, "lines": [[1, ")" + std::string(65537, 'x') + R"("]]}})"),
        "t.json: malformed trace: line 1 of source \"a.py\" is longer than 64 KiB");
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": [[1]]}})"),
              "t.json: malformed trace: a line of source \"a.py\" is [1], not [line, text]");
    EXPECT_EQ(load(R"({"a.py": {)" + ok + R"(, "lines": {"1": "x"}}})"),
              "t.json: malformed trace: the lines of source \"a.py\" are not an array");
    EXPECT_EQ(load(R"({"a.py": 3})"),
              "t.json: malformed trace: source \"a.py\" is 3, not an object");
}

TEST(RecordedSources, TheLineTableShowsThemAndSaysOnceWhenTheFileChanged) {
    core::Trace t = traceOf("/src");
    t.processes[0].lines.resize(2);
    t.processes[0].sources["prog.py"] = {
        core::fnv1a64(kProgram),
        {{3, "def make(n):"}, {5, "    return alloc(n)"}, {10, "x = make(3)"}}};
    auto render = [&](const std::string& here) {
        reporters::LineReportOptions o;
        o.readSource = [&](const std::string&, const std::string&) {
            reporters::SourceText s;
            if (here.empty()) return s;  // not on this machine
            s.lines = reporters::numberedLines(here);
            s.hash = core::fnv1a64(here);
            s.found = true;
            return s;
        };
        std::ostringstream out;
        reporters::renderLines(t, o, out);
        return out.str();
    };
    const std::string recorded =
        "\n## make — prog.py [cpu] (pid 9)\n"
        "  Line          Peak     Allocated    Self alloc    Count  Code\n"
        "     3                                                     def make(n):\n"
        "     5           3 B           3 B           3 B        1      return alloc(n)\n"
        "\n## <module> — prog.py [cpu] (pid 9)\n"
        "  Line          Peak     Allocated    Self alloc    Count  Code\n"
        "    10           3 B           3 B           3 B        1  x = make(3)\n";
    EXPECT_EQ(render("").substr(0, recorded.size()), recorded);
    EXPECT_EQ(render(kProgram).substr(0, recorded.size()), recorded);
    // A line inserted above: the recorded code, and a note on the file's first block only.
    const std::string changed = render("# new\n" + kProgram);
    const std::string note = "        (prog.py changed since the run: lines shown as recorded)\n";
    EXPECT_EQ(changed.substr(0, changed.find("\n## <module>")),
              "\n## make — prog.py [cpu] (pid 9)\n"
              "  Line          Peak     Allocated    Self alloc    Count  Code\n" +
                  note +
                  "     3                                                     def make(n):\n"
                  "     5           3 B           3 B           3 B        1      return "
                  "alloc(n)\n");
    EXPECT_EQ(changed.find(note, changed.find(note) + 1), std::string::npos);
}
