// The hotspot table's site lines come from frames: the site, the nearest named
// frame it called, its callers; an allocation without a stack reads "(no stack)".
#include <gtest/gtest.h>

#include <sstream>

#include "core/Error.h"
#include "reporters/ProcessSelection.h"
#include "reporters/TableReporter.h"
#include "tests/TestFrames.h"
#include "trace/TraceReader.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;

TEST(TableReporter, SiteLinesComeFromFrames) {
    core::ProcessTrace p;
    p.pid = 9;
    p.command = {"python3", "t.py"};
    p.exitCode = 0;
    p.complete = true;
    p.devices["cpu"].peakBytes = 3072;
    p.devices["cpu"].allocatedBytes = 3072;
    p.devices["cpu"].allocCount = 2;
    p.frames = {nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
                nativeFrame("", "/usr/lib/libtorch_python.so", "", 0, 0x1a),
                pythonFrame("step", "/src/t.py", 3, true),
                pythonFrame("<module>", "/src/t.py", 9, true)};
    core::Hotspot h;
    h.device = "cpu";
    h.frames = {0, 1, 2, 3};
    h.siteFrame = 2;
    h.site = "step (/src/t.py:3)";
    h.allocatedBytes = h.peakBytes = 2048;
    h.count = 1;
    core::Hotspot none;
    none.device = "cpu";
    none.site = core::kNoStackSite;
    none.allocatedBytes = none.peakBytes = 1024;
    none.count = 1;
    p.hotspots = {h, none};
    core::Trace t;
    t.processes.push_back(p);
    std::ostringstream out;
    reporters::renderTable(t, reporters::ReportOptions{}, out);
    const std::string text = out.str();
    const std::string table = text.substr(text.find("\nTop "));
    // The unnamed frame between the site and c10 is skipped for "via".
    EXPECT_EQ(table,
              "\nTop 2 hotspots on cpu by peak\n"
              "  #         Peak    Allocated    Count       Leaked  Site\n"
              "  1     2.00 KiB     2.00 KiB        1          0 B  step (t.py:3)\n"
              "                                                   via c10::alloc_cpu (libc10.so)\n"
              "                                                   from <module> (t.py:9)\n"
              "  2     1.00 KiB     1.00 KiB        1          0 B  (no stack)\n"
              "Peak: what each site held at cpu's peak (they add up to it) · Leaked: still held at "
              "the end of the run\n");
}

namespace {

core::ProcessTrace process(int64_t pid, std::optional<int64_t> rank, uint64_t cpuPeak) {
    core::ProcessTrace p;
    p.pid = pid;
    p.ppid = 1;
    p.rank = rank;
    p.command = {"python3", "train.py"};
    p.exitCode = 0;
    p.complete = true;
    p.devices["cpu"].peakBytes = cpuPeak;
    return p;
}

}  // namespace

// A trace of several processes opens with one line each: pid, rank, the peak per
// device and when (on one clock), what it leaked, how it ended and the command; --pid and --rank
// keep only the processes they name.
TEST(TableReporter, ARunOfSeveralProcessesOpensWithOneLineEach) {
    core::Trace t;
    t.processes = {process(10, std::nullopt, 2048), process(11, 0, 3 << 20), process(12, 0, 1000),
                   process(13, std::nullopt, 0), process(14, std::nullopt, 0)};
    t.processes[1].ppid = 10;  // a rank its launcher started
    t.processes[2].ppid = 11;
    t.processes[2].forked = true;
    t.processes[2].devices["shared"].peakBytes = 4000000;
    t.processes[3].ppid = 10;
    t.processes[3].forked = true;
    t.processes[3].exitCode.reset();
    t.processes[3].exitSignal = 9;  // a worker the OOM killer took, as its parent reaped it
    t.processes[3].devices.clear();
    // A forkserver's worker: its command is a line of Python, cut here to 60
    // characters, whole in its section.
    t.processes[4].forked = true;
    t.processes[4].ppid = 15;
    t.processes[4].command = {"python3", "-c",
                              "from multiprocessing.forkserver import main; main(13, 14, "
                              "['__main__'], **{'sys_path': ['/tmp/données']})"};
    t.processes[4].complete = false;
    t.processes[4].incompleteReason = "the stream ended without its end record";
    t.processes[4].devices.clear();
    std::ostringstream out;
    reporters::renderTable(t, reporters::ReportOptions{}, out);
    const std::string text = out.str();
    EXPECT_EQ(text.substr(0, text.find("\nCommand:")),
              "5 processes, 1 rank · peak times in seconds from each one's start\n"
              "     pid  rank  peak per device @time                            leake"
              "d  exit               command\n"
              "      10     -  cpu 2.00 KiB @0.000s                                0 "
              "B  exit code 0        python3 train.py\n"
              "      11     0  cpu 3.00 MiB @0.000s                                0 "
              "B  exit code 0        python3 train.py  (started by 10)\n"
              "      12     0  cpu 1000 B @0.000s, shared 3.81 MiB @0.000s         0 "
              "B  exit code 0        python3 train.py  (forked from 11)\n"
              "      13     -  -                                                   0 "
              "B  killed by signal 9 python3 train.py  (forked from 10)\n"
              "      14     -  -                                                   0 "
              "B  exit code 0        python3 -c 'from multiprocessing.forkserver impo"
              "rt main; ...  (forked from 15)  (trace incomplete)\n");
    EXPECT_NE(text.find("Command:  python3 -c 'from multiprocessing.forkserver import main; "
                        "main(13, 14, ['\\''__main__'\\''], **{'\\''sys_path'\\'': "
                        "['\\''/tmp/données'\\'']})'\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Process:  pid 12 · rank 0 · forked from 11 · exit code 0"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Process:  pid 11 · rank 0 · started by 10 · exit code 0"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\nProcess 4 of 5\n"), std::string::npos);
    EXPECT_NE(text.find("Process:  pid 13 · forked from 10 · killed by signal 9"),
              std::string::npos)
        << text;

    const core::Trace rank0 = reporters::selectProcesses(t, {std::nullopt, 0});
    ASSERT_EQ(rank0.processes.size(), 2u);
    EXPECT_EQ(rank0.processes[0].pid, 11);
    const core::Trace one = reporters::selectProcesses(t, {12, std::nullopt});
    ASSERT_EQ(one.processes.size(), 1u);
    std::ostringstream single;
    reporters::renderTable(one, reporters::ReportOptions{}, single);
    EXPECT_EQ(single.str().find(" processes"), std::string::npos);  // one process: no list
    try {
        reporters::selectProcesses(t, {std::nullopt, 5});
        ADD_FAILURE() << "rank 5 was found";
    } catch (const core::Error& e) {
        EXPECT_EQ(e.exitCode(), core::kExitBadInput);
        EXPECT_STREQ(e.what(),
                     "the trace has no process with rank 5 (it has: 10, 11 (rank 0), 12 "
                     "(rank 0), 13, 14)");
    }
}

namespace {

// A CPU out-of-memory whose request and largest holder are the native frame
// at::empty(long) in libtorch_cpu.so (as `memtool run --site all` names them).
core::ProcessTrace outOfMemory() {
    core::ProcessTrace p = process(5, std::nullopt, 3072);
    p.devices["cpu"].allocatedBytes = 3072;
    p.frames = {nativeFrame("at::empty(long)", "/usr/lib/libtorch_cpu.so"),
                pythonFrame("grow", "/w/oom.py", 16, true)};
    core::Hotspot h;
    h.device = "cpu";
    h.frames = {0, 1};
    h.siteFrame = 0;
    h.site = "at::empty(long) (/usr/lib/libtorch_cpu.so)";
    h.stack = {h.site, "grow (/w/oom.py:16)"};
    h.allocatedBytes = h.peakBytes = 2048;
    h.count = 1;
    p.hotspots = {h};
    core::OomEvent e;
    e.device = "cpu";
    e.requestedBytes = 64 << 20;
    e.source = "allocator";
    e.frames = {0, 1};
    e.siteFrame = 0;
    e.site = h.site;
    e.stack = h.stack;
    e.file = "/w/oom.py";
    e.line = 16;
    e.function = "grow";
    e.heldOn = "cpu";
    e.liveBytes = 3072;
    e.bySite = {{h.site, 2048, 0}, {"(1 other site)", 1024, std::nullopt}};
    p.oom = {e};
    p.oomCount = 1;
    return p;
}

std::string tableOf(const core::Trace& t) {
    std::ostringstream out;
    reporters::renderTable(t, reporters::ReportOptions{}, out);
    return out.str();
}

}  // namespace

// The out-of-memory section names the request's site and the sites that held
// memory as the hotspot table names sites (C++ parameters dropped), from their
// frames; an older trace, whose event kept text only, reads the same.
TEST(TableReporter, OutOfMemorySitesReadAsHotspotSitesDo) {
    core::Trace t;
    t.processes = {outOfMemory()};
    const std::string text = tableOf(t);
    EXPECT_EQ(text.substr(0, text.find("Command:")),
              "Out of memory on cpu: 64.00 MiB requested at at::empty (libtorch_cpu.so) while "
              "3.00 KiB were held; held by:\n"
              "      2.00 KiB  at::empty (libtorch_cpu.so)\n"
              "      1.00 KiB  (1 other site)\n"
              "\n");
    EXPECT_NE(text.find("     2.00 KiB     2.00 KiB        1          0 B  at::empty "
                        "(libtorch_cpu.so)\n"),
              std::string::npos)
        << text;

    nlohmann::json old = reporters::traceToJson(t);
    nlohmann::json& e = old["processes"][0]["oom"][0];
    e.erase("frames");
    e.erase("site_frame");
    for (auto& row : e["by_site"]) row.erase("site_frame");
    EXPECT_EQ(tableOf(reporters::traceFromJson(old, "old.json")), text);
}

// A process without a device either never loaded an allocator memtool tracks (a
// launcher shell) or loaded one and allocated nothing through it (torch.multiprocessing's
// parent): the reports say which, and give no leak moment for nothing.
TEST(TableReporter, AProcessThatAllocatedNothingSaysWhy) {
    core::Trace t;
    for (bool tracked : {false, true}) {
        core::ProcessTrace p;
        p.pid = tracked ? 11 : 10;
        p.command = {tracked ? "python3" : "bash"};
        p.exitCode = 0;
        p.complete = true;
        p.tracked = tracked;
        p.leakMoment = core::kLeakAtPython;
        t.processes.push_back(p);
    }
    std::ostringstream out;
    reporters::renderTable(t, reporters::ReportOptions{}, out);
    const std::string text = out.str();
    EXPECT_NE(text.find("Process:  pid 10 · exit code 0 · 0.000 s · trace complete\n\n"
                        "No tracked allocations (the program loaded no allocator memtool "
                        "tracks).\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Process:  pid 11 · exit code 0 · 0.000 s · trace complete\n\n"
                        "No tracked allocations (memtool tracked the program's allocator, and "
                        "nothing was allocated through it).\n"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("Leaks:"), std::string::npos) << text;
}

// A command shows as a shell would read it back, on one line: code passed to
// `python3 -c` with its newlines, quotes, an empty word.
TEST(TableReporter, ACommandShowsQuotedAsAShellReadsItBack) {
    EXPECT_EQ(reporters::commandLine({"/usr/bin/python3", "train.py", "--lr=0.1", "a,b:c@d%e+f"}),
              "/usr/bin/python3 train.py --lr=0.1 a,b:c@d%e+f");
    EXPECT_EQ(reporters::commandLine({"python3", "-c", "import torch; print('hi')"}),
              "python3 -c 'import torch; print('\\''hi'\\'')'");
    EXPECT_EQ(reporters::commandLine({"python3", "-c", "import os\n\tos.exit('\\')\x01"}),
              "python3 -c $'import os\\n\\tos.exit(\\'\\\\\\')\\x01'");
    EXPECT_EQ(reporters::commandLine({"x", "", "a b", "$HOME", "*"}), "x '' 'a b' '$HOME' '*'");
    core::ProcessTrace p = process(10, std::nullopt, 0);
    p.command = {"python3", "-c", "x = 1\ny = 2"};
    EXPECT_TRUE(reporters::commandContains(p, "x = 1\ny"));        // the words
    EXPECT_TRUE(reporters::commandContains(p, "-c $'x = 1\\ny"));  // as shown
    EXPECT_FALSE(reporters::commandContains(p, "z"));
}

// A command is cut by characters, never inside one: 57 of them and "...".
TEST(TableReporter, ALongCommandIsCutBetweenCharacters) {
    core::ProcessTrace p = process(10, std::nullopt, 0);
    std::string accents;
    for (int i = 0; i < 40; ++i) accents += "é";  // two bytes each
    p.command = {"python3", accents};             // 48 characters
    EXPECT_EQ(reporters::shortCommand(p, 60), "python3 " + accents);
    EXPECT_EQ(reporters::shortCommand(p, 48), "python3 " + accents);
    EXPECT_EQ(reporters::shortCommand(p, 47), "python3 " + accents.substr(0, 2 * 36) + "...");
    EXPECT_EQ(reporters::processLabel(p), "pid 10 (python3 " + accents + ")");
}
