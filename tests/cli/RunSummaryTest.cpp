// The line `memtool run` ends with: the program's peaks, and which other
// process (a worker) held more, or did not finish.
#include <gtest/gtest.h>

#include "cli/run/RunCommand.h"

using namespace memtool;

namespace {

core::ProcessTrace process(int64_t pid,
                           std::initializer_list<std::pair<const char*, uint64_t>> peaks) {
    core::ProcessTrace p;
    p.pid = pid;
    p.complete = true;
    for (const auto& [device, peak] : peaks) p.devices[device].peakBytes = peak;
    return p;
}

}  // namespace

TEST(RunSummary, OneProcessGivesItsPeaks) {
    core::Trace t;
    t.processes.push_back(process(10, {{"cpu", 3000000}}));
    EXPECT_EQ(cli::runSummary(t, {"trace.json"}),
              "memtool: wrote trace.json (1 process, cpu peak 2.86 MiB)\n");
}

TEST(RunSummary, NoFileIsATraceDiscarded) {
    core::Trace t;
    t.processes.push_back(process(10, {{"cpu", 5000000}}));
    EXPECT_EQ(cli::runSummary(t, {}),
              "memtool: wrote no trace (-o /dev/null) (1 process, cpu peak 4.77 MiB)\n");
}

TEST(RunSummary, AWorkerThatHeldMoreIsNamedByDevice) {
    core::Trace t;
    t.processes.push_back(process(10, {{"cpu", 292}, {"cuda:0", 5000000}}));
    t.processes.push_back(process(11, {{"cpu", 2097152}, {"shared", 1048576}}));
    t.processes.push_back(process(12, {{"cpu", 3145728}, {"cuda:0", 4000000}}));
    EXPECT_EQ(cli::runSummary(t, {"t.json"}),
              "memtool: wrote t.json (3 processes, cpu peak 292 B, cuda:0 peak 4.77 MiB; largest: "
              "cpu 3.00 MiB in pid 12, shared 1.00 MiB in pid 11)\n");
    // The main process held the most: nothing more to say.
    t.processes[0].devices["cpu"].peakBytes = 3145728;
    t.processes[0].devices["shared"].peakBytes = 1048576;
    EXPECT_EQ(cli::runSummary(t, {"t.json"}),
              "memtool: wrote t.json (3 processes, cpu peak 3.00 MiB, cuda:0 peak 4.77 MiB, shared "
              "peak 1.00 MiB)\n");
}

TEST(RunSummary, AWrapperGivesItsFirstAllocatingChildAndEveryUnfinishedProcess) {
    core::Trace t;
    t.processes.push_back(process(10, {}));  // a shell
    t.processes.push_back(process(11, {{"cpu", 1024}}));
    t.processes.push_back(process(12, {{"cpu", 2048}}));
    t.processes[2].complete = false;
    t.processes[2].incompleteReason = "killed by signal 9";
    EXPECT_EQ(cli::runSummary(t, {"a.json", "b.json"}),
              "memtool: wrote 2 files (a.json ...) (3 processes, pid 11, cpu peak 1.00 KiB; "
              "largest: cpu 2.00 KiB in pid 12; pid 12 INCOMPLETE: killed by signal 9)\n");
    t.processes[0].tracked = t.processes[1].tracked = t.processes[2].tracked = false;
    t.processes[1].devices.clear();
    t.processes[2].devices.clear();
    t.processes[2].complete = true;
    EXPECT_EQ(cli::runSummary(t, {"a.json"}),
              "memtool: wrote a.json (3 processes)\nmemtool: nothing was measured: the program "
              "loaded no allocator memtool tracks (PyTorch's libc10, CUDA); does it import torch, "
              "under a python that has it?\n");
}

// Allocators were tracked and none was used (a script that imports torch and only
// prints): the line says so, rather than nothing at all.
TEST(RunSummary, ATrackedProgramThatAllocatedNothingSaysSo) {
    core::Trace t;
    t.processes.push_back(process(10, {}));
    EXPECT_EQ(cli::runSummary(t, {"t.json"}),
              "memtool: wrote t.json (1 process, nothing allocated)\n");
    t.processes.push_back(process(11, {}));
    EXPECT_EQ(cli::runSummary(t, {"t.json"}),
              "memtool: wrote t.json (2 processes, nothing allocated)\n");
}
