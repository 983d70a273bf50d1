// Every process of a run: forked children (os.fork, a multiprocessing pool, a
// DataLoader's workers), exec'd images, torchrun's ranks, storages in shared
// memory, and a program that takes memtool's socket over. Real Python + torch
// (Debian's /usr/bin/python3) under the real `memtool run`.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;
using nlohmann::json;

namespace {

// The processes of a trace other than processes[0], in trace order.
std::vector<json> others(const Profiled& p) {
    const json& all = p.trace.at("processes");
    return std::vector<json>(all.begin() + 1, all.end());
}

uint64_t deviceFigure(const json& process, const std::string& device, const char* field) {
    const json& devices = process.at("devices");
    return devices.contains(device) ? devices.at(device).at(field).get<uint64_t>() : 0;
}

// The process is whole: its stream ended with its end record and every counter matched.
void expectWhole(const json& process) {
    EXPECT_TRUE(process.at("complete").get<bool>()) << process.value("incomplete_reason", "");
    EXPECT_TRUE(process.at("stream").at("verified").get<bool>()) << process.at("stream").dump();
}

}  // namespace

TEST(Processes, AForkedChildIsAProcessOfItsOwnWithItsOwnBytes) {
    Profiled p = profile({PYTHON_BIN, script("fork_inherit.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "child 7\n");
    const json& parent = p.process();
    expectWhole(parent);
    EXPECT_FALSE(parent.contains("forked"));
    EXPECT_EQ(deviceFigure(parent, "cpu", "allocated_bytes"), 3000000u);
    EXPECT_EQ(deviceFigure(parent, "cpu", "peak_bytes"), 3000000u);

    ASSERT_EQ(others(p).size(), 1u) << p.trace.at("processes").dump(1);
    const json child = others(p).at(0);
    expectWhole(child);
    EXPECT_EQ(child.at("forked"), true);
    EXPECT_EQ(child.at("ppid"), parent.at("pid"));
    EXPECT_EQ(child.at("exit_code"), 7);  // os._exit(7), told by its collector
    // Its own two storages; the one it inherited and freed is its parent's, and
    // that free changed nothing of the child's.
    const json& cpu = child.at("devices").at("cpu");
    EXPECT_EQ(cpu.at("allocated_bytes"), 6000000);
    EXPECT_EQ(cpu.at("alloc_count"), 2);
    EXPECT_EQ(cpu.at("free_count"), 0);
    EXPECT_EQ(cpu.at("freed_bytes"), 0);
    EXPECT_EQ(cpu.at("peak_bytes"), 6000000);
    EXPECT_EQ(child.at("stream").at("unmatched_frees"), 0);
    // Its stacks go on into the frames its parent entered before the fork.
    const json mine = hotspotWithSite(child, "fork_inherit.py:12");
    ASSERT_FALSE(mine.is_null()) << child.at("hotspots").dump(1);
    EXPECT_EQ(mine.at("allocated_bytes"), 5000000);
    const std::string stack = mine.at("stack").dump();
    EXPECT_NE(stack.find("fork_here (" + script("fork_inherit.py") + ":21)"), std::string::npos)
        << stack;
    EXPECT_NE(stack.find("<module> (" + script("fork_inherit.py") + ":25)"), std::string::npos)
        << stack;
}

TEST(Processes, AForkChildKilledByASignalSaysWhichAsItsParentReapedIt) {
    Profiled p = profile({PYTHON_BIN, script("fork_killed.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "child killed by 9\n");
    expectWhole(p.process());
    ASSERT_EQ(others(p).size(), 1u) << p.trace.at("processes").dump(1);
    const json child = others(p).at(0);
    EXPECT_EQ(child.at("forked"), true);
    EXPECT_EQ(child.at("exit_signal"), 9);  // SIGKILL, from the parent's os.waitpid
    EXPECT_TRUE(child.at("exit_code").is_null());
    // Its stream was cut short; what its collector still held in its buffer (the
    // 2,000,000-byte storage) was read back from it, and the counts it kept
    // beside it match: the trace is whole.
    expectWhole(child);
    EXPECT_EQ(deviceFigure(child, "cpu", "allocated_bytes"), 2000000u);
}

// Workers ended by SIGTERM, as a multiprocessing Pool ends its own when it
// closes: their unsent records are read back and the counts they kept match, so
// each trace is whole, and a CI check of the run passes (only the program itself
// being killed fails it).
TEST(Processes, WorkersEndedBySigtermAreWholeAndPassACheck) {
    Profiled p = profile({PYTHON_BIN, script("worker_terminated.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "750000 [-15, -15]\n");
    ASSERT_EQ(others(p).size(), 2u) << p.trace.at("processes").dump(1);
    uint64_t allocated = 0;
    for (const json& worker : others(p)) {
        expectWhole(worker);
        EXPECT_EQ(worker.at("exit_signal"), SIGTERM);
        allocated += deviceFigure(worker, "cpu", "allocated_bytes");
    }
    EXPECT_EQ(allocated, 3000000u);  // 1 and 2 MB
    const std::string trace = tempDir() + "/pool.json";
    std::ofstream(trace) << p.trace.dump();
    Outcome check = run({MEMTOOL_BIN, "check", trace, "--max-peak", "cpu=1GiB"});
    EXPECT_EQ(check.exitCode, 0) << check.out;
}

TEST(Processes, ForkChildrenOfAThreadedProgramAreEachWhole) {
    Profiled p = profile({PYTHON_BIN, script("fork_child.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    ASSERT_EQ(others(p).size(), 20u);
    for (const json& child : others(p)) {
        expectWhole(child);
        EXPECT_EQ(child.at("exit_code"), 0);
        const json& cpu = child.at("devices").at("cpu");
        EXPECT_EQ(cpu.at("allocated_bytes"), 5000000);  // the churn thread did not come along
        EXPECT_EQ(cpu.at("alloc_count"), 1);
    }
}

TEST(Processes, AForkPoolsWorkersAreRecorded) {
    Profiled p = profile({PYTHON_BIN, script("pool_fork.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "[1000000, 2000000]\n");
    expectWhole(p.process());
    ASSERT_EQ(others(p).size(), 2u) << p.trace.at("processes").dump(1);
    // Which worker took which task is the pool's choice; together they made both.
    uint64_t allocated = 0, count = 0;
    std::multiset<uint64_t> sizes;
    for (const json& worker : others(p)) {
        expectWhole(worker);
        EXPECT_EQ(worker.at("forked"), true);
        EXPECT_EQ(worker.at("exit_code"), 0);
        allocated += deviceFigure(worker, "cpu", "allocated_bytes");
        count += deviceFigure(worker, "cpu", "alloc_count");
        for (const json& h : worker.at("hotspots"))
            if (h.at("site").get<std::string>().find("pool_fork.py:17") != std::string::npos)
                sizes.insert(h.at("allocated_bytes").get<uint64_t>() /
                             h.at("count").get<uint64_t>());
    }
    EXPECT_EQ(allocated, 3000000u);
    EXPECT_EQ(count, 2u);
    EXPECT_EQ(sizes, (std::multiset<uint64_t>{1000000, 2000000}));
}

TEST(Processes, ADataLoadersWorkersAndTheirBatchesInSharedMemory) {
    Profiled p = profile({PYTHON_BIN, script("loader.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "sum 28.0\n");
    const json& main = p.process();
    expectWhole(main);
    // The main process maps the batches its workers made: they are not its bytes.
    EXPECT_FALSE(main.at("devices").contains("shared")) << main.at("devices").dump();
    ASSERT_EQ(others(p).size(), 2u) << p.trace.at("processes").dump(1);
    const std::string torchDir = torchPackageDir();
    for (const json& worker : others(p)) {
        expectWhole(worker);
        EXPECT_EQ(worker.at("forked"), true);
        EXPECT_EQ(worker.at("exit_code"), 0);
        // Batches go round-robin: two each. Per batch, two items of 1,000,000 bytes
        // and the collated 2,000,000 in shared memory (collate's own tensor header,
        // a few bytes on cpu, comes on top).
        const json item = hotspotWithSite(worker, "loader.py:13");
        ASSERT_FALSE(item.is_null()) << worker.at("hotspots").dump(1);
        EXPECT_EQ(item.at("allocated_bytes"), 4000000);
        EXPECT_EQ(item.at("count"), 4);
        EXPECT_GE(deviceFigure(worker, "cpu", "allocated_bytes"), 4000000u);
        EXPECT_LT(deviceFigure(worker, "cpu", "allocated_bytes"), 4000100u);
        EXPECT_EQ(deviceFigure(worker, "shared", "allocated_bytes"), 4000000u);
        EXPECT_EQ(deviceFigure(worker, "shared", "alloc_count"), 2u);
        EXPECT_EQ(deviceFigure(worker, "shared", "free_count"), 2u);
        EXPECT_EQ(deviceFigure(worker, "shared", "current_bytes"), 0u);
        const uint64_t sharedPeak = deviceFigure(worker, "shared", "peak_bytes");
        EXPECT_TRUE(sharedPeak == 2000000 || sharedPeak == 4000000) << sharedPeak;
        EXPECT_EQ(worker.at("devices").at("shared").at("source"), "shm");
        // The batch's stack: collate in the worker loop the child runs, beneath it the
        // frames of the main process that forked it, whose innermost user line is the
        // loop over the DataLoader: the site.
        const json batch = hotspotWithSite(worker, "loader.py:18", "shared");
        ASSERT_FALSE(batch.is_null()) << worker.at("hotspots").dump(1);
        EXPECT_EQ(batch.at("allocated_bytes"), 4000000);
        EXPECT_NE(batch.at("stack").dump().find("default_collate (" + torchDir +
                                                "/utils/data/_utils/collate.py"),
                  std::string::npos)
            << batch.at("stack").dump(1);
    }
    // The report opens with one line per process.
    const std::string dir = tempDir();
    const std::string trace = dir + "/t.json";
    std::ofstream(trace) << p.trace.dump();
    Outcome report = run({MEMTOOL_BIN, "report", trace});
    ASSERT_EQ(report.exitCode, 0) << report.err;
    EXPECT_EQ(report.out.rfind("3 processes · ", 0), 0u) << report.out;
    const std::string workerLine =
        std::to_string(others(p).at(0).at("pid").get<int64_t>()) + "     -  cpu ";
    EXPECT_NE(report.out.find(workerLine), std::string::npos) << report.out;
    EXPECT_NE(report.out.find("(forked from " + std::to_string(main.at("pid").get<int64_t>())),
              std::string::npos);
    // --pid picks one.
    Outcome one = run({MEMTOOL_BIN, "report", trace, "--pid",
                       std::to_string(others(p).at(1).at("pid").get<int64_t>())});
    ASSERT_EQ(one.exitCode, 0) << one.err;
    EXPECT_EQ(one.out.find(" processes "), std::string::npos);
    EXPECT_NE(one.out.find("shared"), std::string::npos);
    // -o with %p: a report per process.
    Outcome each = run({MEMTOOL_BIN, "report", trace, "-o", dir + "/report-%p.txt"});
    ASSERT_EQ(each.exitCode, 0) << each.err;
    for (const json& q : p.trace.at("processes"))
        EXPECT_TRUE(std::filesystem::exists(dir + "/report-" +
                                            std::to_string(q.at("pid").get<int64_t>()) + ".txt"));
    Outcome none = run({MEMTOOL_BIN, "report", trace, "--pid", "1"});
    EXPECT_EQ(none.exitCode, 2);
    EXPECT_NE(none.err.find("has no process with pid 1"), std::string::npos) << none.err;
}

// share_memory_() in both of torch's sharing strategies: the storage moves from the
// CPU row to `shared` in the process that made it; a child that gets it through a
// queue maps it and counts nothing.
class SharedMemory : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedMemory, CountedOnceInTheProcessThatCreatedIt) {
    Profiled p = profile({PYTHON_BIN, script("shared_memory.py"), GetParam()});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "child saw 3000000\nexit 0\n");
    const json& main = p.process();
    expectWhole(main);
    // file_system keeps a 64-byte reference count in front of the storage
    // (torch's RefcountedMapAllocator): the mapping is that much larger.
    const uint64_t mapped = GetParam() == "file_system" ? 3000064 : 3000000;
    EXPECT_EQ(deviceFigure(main, "shared", "allocated_bytes"), mapped);
    EXPECT_EQ(deviceFigure(main, "shared", "peak_bytes"), mapped);
    EXPECT_EQ(deviceFigure(main, "shared", "alloc_count"), 1u);
    EXPECT_EQ(deviceFigure(main, "shared", "current_bytes"), 0u);  // freed by `del a`
    // Its CPU storage was copied over and freed: on cpu it counts once, as ever.
    const json zeros = hotspotWithSite(main, "shared_memory.py:19");
    ASSERT_FALSE(zeros.is_null()) << main.at("hotspots").dump(1);
    EXPECT_EQ(zeros.at("allocated_bytes"), 3000000);
    EXPECT_EQ(zeros.at("leaked_bytes"), 0);
    const json shared = hotspotWithSite(main, "shared_memory.py:20", "shared");
    ASSERT_FALSE(shared.is_null()) << main.at("hotspots").dump(1);
    for (const json& q : others(p)) {
        if (q.value("forked", false) != true) continue;  // torch's shm manager, say
        EXPECT_FALSE(q.at("devices").contains("shared")) << q.at("devices").dump();
    }
}

INSTANTIATE_TEST_SUITE_P(Strategies, SharedMemory,
                         ::testing::Values("file_descriptor", "file_system"));

TEST(Processes, AnImageThatExecsIsNeitherKilledNorLeaking) {
    Profiled p = profile({PYTHON_BIN, script("exec_self.py")});
    EXPECT_EQ(p.outcome.exitCode, 5) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "exec'd 1000000\n");
    // processes[0]: the image the program ended in, with the program's exit code.
    const json& last = p.process();
    expectWhole(last);
    EXPECT_EQ(last.at("exit_code"), 5);
    EXPECT_EQ(deviceFigure(last, "cpu", "allocated_bytes"), 1000000u);
    ASSERT_EQ(others(p).size(), 1u) << p.trace.at("processes").dump(1);
    const json first = others(p).at(0);
    EXPECT_EQ(first.at("pid"), last.at("pid"));
    // The failed exec changed nothing: one stream, whole, with both storages.
    expectWhole(first);
    EXPECT_EQ(first.at("exec"), true);
    EXPECT_TRUE(first.at("exit_code").is_null());
    EXPECT_EQ(deviceFigure(first, "cpu", "allocated_bytes"), 2500000u);
    // What it held went with the image: nothing leaked.
    EXPECT_EQ(deviceFigure(first, "cpu", "current_bytes"), 0u);
    EXPECT_EQ(deviceFigure(first, "cpu", "peak_bytes"), 2500000u);
    for (const json& h : first.at("hotspots")) EXPECT_EQ(h.at("leaked_bytes"), 0);
    // check finds nothing killed: the program's image is whole.
    const std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << p.trace.dump();
    Outcome check = run({MEMTOOL_BIN, "check", trace});
    EXPECT_EQ(check.exitCode, 0) << check.out;
}

// subprocess execs in a vfork child, which shares its parent's memory: an exec
// that fails there (and the child's _exit) must leave the parent's stream alone.
TEST(Processes, AFailedExecInAVforkChildLeavesTheParentsStreamAlone) {
    const std::string dir = tempDir();
    const std::string program = dir + "/spawn.py";
    std::ofstream(program) << "import subprocess, torch\n"
                              "a = torch.empty(1000, dtype=torch.uint8)\n"
                              "try:\n"
                              "    subprocess.run(['/nonexistent/program'])\n"
                              "except FileNotFoundError:\n"
                              "    pass\n"
                              "b = torch.empty(2000, dtype=torch.uint8)\n"
                              "print(subprocess.run(['true']).returncode)\n";
    Profiled p = profile({PYTHON_BIN, program});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "0\n");
    expectWhole(p.process());
    EXPECT_EQ(deviceFigure(p.process(), "cpu", "allocated_bytes"), 3000u);
    EXPECT_EQ(p.trace.at("processes").size(), 1u);  // `true` loads no torch
}

TEST(Processes, AProgramThatTakesTheSocketOverGetsNoneOfMemtoolsBytes) {
    Profiled p = profile({PYTHON_BIN, script("steal_socket.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "stolen sockets 1 bytes received 0\n");
    EXPECT_NE(p.outcome.err.find("memtool: the program closed memtool's socket"), std::string::npos)
        << p.outcome.err;
    const json& proc = p.process();
    EXPECT_FALSE(proc.at("complete").get<bool>());
    EXPECT_EQ(proc.at("incomplete_reason")
                  .get<std::string>()
                  .find("the program closed memtool's socket and reused its descriptor"),
              0u)
        << proc.at("incomplete_reason");
    EXPECT_EQ(proc.at("exit_code"), 0);
    // What arrived before is there: the first storage.
    EXPECT_EQ(hotspotWithSite(proc, "steal_socket.py:10").at("allocated_bytes"), 1000000);
}

// A hundred fork children, one after another: each is a whole process of the
// trace, its 1,000 B at its own line, named from the object files and module
// records the run read once for all of them.
TEST(Processes, AHundredChildrenOneAfterAnotherAreEachWhole) {
    Profiled p = profile({PYTHON_BIN, script("fork_sequence.py"), "100"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "children 100 failed 0\n");
    const std::vector<json> children = others(p);
    ASSERT_EQ(children.size(), 100u);
    for (const json& child : children) {
        expectWhole(child);
        EXPECT_EQ(deviceFigure(child, "cpu", "allocated_bytes"), 1000u);
        EXPECT_EQ(hotspotWithSite(child, "fork_sequence.py:14").at("allocated_bytes"), 1000);
    }
}

// The collector's descriptors (its socket, its shared send buffer) sit high in the
// table: a program that closes the low ones, as a daemon does, is profiled on.
TEST(Processes, AProgramThatClosesItsLowDescriptorsIsProfiledOn) {
    Profiled p = profile({PYTHON_BIN, script("close_low_fds.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "buffers below 767: 0 above: 1\n");
    expectWhole(p.process());
    EXPECT_EQ(hotspotWithSite(p.process(), "close_low_fds.py:7").at("allocated_bytes"), 1000000);
    EXPECT_EQ(hotspotWithSite(p.process(), "close_low_fds.py:18").at("allocated_bytes"), 2000000);
}

// A daemon closes every descriptor it has from 3 up (python-daemon does, by
// closefrom, os.closerange or one os.close at a time): memtool's stay open, and
// the stream goes on whole through each way.
TEST(Processes, AProgramThatClosesEveryDescriptorIsProfiledOn) {
    Profiled p = profile({PYTHON_BIN, script("close_all_fds.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    // The directory listing's own descriptor is gone by the time it is closed.
    EXPECT_EQ(p.outcome.out, "still works refused 1 bad range -1 True\n");
    expectWhole(p.process());
    EXPECT_EQ(p.process().at("warnings"), json::array()) << p.process().at("warnings");
    for (const auto& [line, bytes] : std::vector<std::pair<int, int>>{
             {11, 1000000}, {13, 2000000}, {15, 3000000}, {23, 4000000}})
        EXPECT_EQ(hotspotWithSite(p.process(), "close_all_fds.py:" + std::to_string(line))
                      .at("allocated_bytes"),
                  bytes)
            << line;
}

// A child the program left running, which connects only after the program
// exited (it was still importing torch): memtool run waits for it as for a
// stream, takes it whole and, having adopted it, knows its exit code.
TEST(Processes, AChildThatConnectsAfterTheProgramExitedIsWaitedFor) {
    Profiled p = profile({PYTHON_BIN, script("late_child.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "parent done\n");
    const json& all = p.trace.at("processes");
    ASSERT_EQ(all.size(), 2u) << all.dump(1);
    EXPECT_EQ(deviceFigure(all.at(0), "cpu", "allocated_bytes"), 2000000u);
    EXPECT_EQ(deviceFigure(all.at(1), "cpu", "allocated_bytes"), 1000000u);
    expectWhole(all.at(1));
    EXPECT_EQ(all.at(1).at("exit_code"), 3);
    EXPECT_EQ(all.at(0).at("warnings"), json::array()) << all.at(0).at("warnings");
}

// The program's descriptor table below memtool's own is what it is bare: nothing
// of the collector's (libunwind's pipe included) takes a low number, so a
// program's first open() gets the number it gets bare, and one started with its
// stdout closed finds fd 1 closed, not taken by memtool.
TEST(Processes, AProgramFindsTheDescriptorNumbersItFindsBare) {
    const std::string dir = tempDir();
    for (const char* redirect : {"", ">&-"}) {
        const std::vector<std::string> shell = {"/bin/sh", "-c",
                                                std::string("exec \"$@\" ") + redirect, "sh"};
        std::vector<std::string> bare = shell, profiled = shell;
        for (const std::string& word : {PYTHON_BIN, script("descriptor_numbers.py")})
            bare.push_back(word);
        for (const std::string& word :
             {std::string(MEMTOOL_BIN), std::string("run"), std::string("-q"), std::string("-o"),
              dir + "/trace.json", std::string("--"), std::string(PYTHON_BIN),
              script("descriptor_numbers.py")})
            profiled.push_back(word);
        const Outcome alone = run(bare), under = run(profiled);
        ASSERT_EQ(alone.exitCode, 0) << alone.err;
        ASSERT_EQ(under.exitCode, 0) << under.err;
        EXPECT_EQ(under.err, alone.err) << "redirect: " << redirect;
        EXPECT_EQ(alone.err.substr(alone.err.size() - 8), " 250000\n") << alone.err;
        EXPECT_EQ(deviceFigure(readJson(dir + "/trace.json").at("processes").at(0), "cpu",
                               "allocated_bytes"),
                  1000000u);
    }
}

// Two fork children that reach memtool in either order, run after run: the trace
// lists them in order of birth (pid), so that diff pairs each with its own
// counterpart and finds nothing grew.
TEST(Processes, ChildrenAreListedInOrderOfBirthWhicheverConnectsFirst) {
    const std::string dir = tempDir();
    for (const char* order : {"first", "second"}) {
        Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/" + order + ".json", "--",
                         PYTHON_BIN, script("fork_order.py"), order});
        ASSERT_EQ(o.exitCode, 0) << o.err;
        const json all = readJson(dir + "/" + order + ".json").at("processes");
        ASSERT_EQ(all.size(), 3u) << all.dump(1);
        EXPECT_LT(all.at(1).at("pid"), all.at(2).at("pid")) << order;
        EXPECT_EQ(deviceFigure(all.at(1), "cpu", "allocated_bytes"), 1000000u) << order;
        EXPECT_EQ(deviceFigure(all.at(2), "cpu", "allocated_bytes"), 2000000u) << order;
    }
    Outcome diff =
        run({MEMTOOL_BIN, "diff", dir + "/first.json", dir + "/second.json", "--format", "json"});
    ASSERT_EQ(diff.exitCode, 0) << diff.err;
    const json d = json::parse(diff.out);
    ASSERT_EQ(d.at("processes").size(), 3u);
    for (const json& process : d.at("processes"))
        for (const json& device : process.at("devices"))
            EXPECT_EQ(device.at("peak_delta_bytes"), 0) << process.dump();
}

// memtool run holds two descriptors per process of the run (its socket and its
// send buffer), and one per object file its stacks are named from: 40 children
// alive at once need more than a soft limit of 64. The CLI raises its own limit to the
// hard one; the program keeps the limit it was given.
namespace {

// fork_many.py's 40 children under `prlimit --nofile=LIMITS`: the trace's processes.
json fortyChildrenUnder(const std::string& limits) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run({"/usr/bin/prlimit", "--nofile=" + limits, MEMTOOL_BIN, "run", "-q", "-o",
                     trace, "--", PYTHON_BIN, script("fork_many.py"), "40"});
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "soft limit 64\nchildren 40 failed 0\n");
    return readJson(trace).at("processes");
}

}  // namespace

TEST(Processes, ARunOfMoreProcessesThanTheSoftFileLimitIsWhole) {
    const json processes = fortyChildrenUnder("64:");
    ASSERT_EQ(processes.size(), 41u);
    uint64_t childBytes = 0;
    for (const json& p : processes) {
        expectWhole(p);
        if (p.at("pid") != processes.at(0).at("pid"))
            childBytes += deviceFigure(p, "cpu", "allocated_bytes");
    }
    EXPECT_EQ(childBytes, 40u * 1000u);
}

// Where the hard limit is that low too, the connections past it are refused with
// the reason in the trace (their processes run on), and the run ends with its trace.
TEST(Processes, ConnectionsPastTheHardFileLimitAreRefusedAndTheTraceIsWritten) {
    const json processes = fortyChildrenUnder("64:64");
    const json& warnings = processes.at(0).at("warnings");
    EXPECT_LT(processes.size(), 41u);
    // Each process missing from the trace was refused, and its warnings say why (a
    // refused child may try again as it exits, and be refused for that too).
    EXPECT_GE(processes.size() + warnings.size(), 41u) << warnings;
    size_t noDescriptor = 0;
    for (const json& w : warnings) {
        EXPECT_EQ(w.get<std::string>().rfind("refused a collector connection", 0), 0u) << w;
        noDescriptor += w ==
                        "refused a collector connection: memtool run has no descriptor left "
                        "(Too many open files; its limit is 64)";
    }
    EXPECT_GT(noDescriptor, 0u) << warnings;
}

// A thread of the program holds a collector lock while another forks: the
// child starts with none held, and records its own allocation.
class ForkUnderLocks : public ::testing::TestWithParam<std::string> {};

TEST_P(ForkUnderLocks, TheChildNeverInheritsAHeldLock) {
    Profiled p = profile({FORK_UNDER_LOCKS_BIN, GetParam()});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.out << p.outcome.err;
    EXPECT_NE(p.outcome.out.find("forked under the"), std::string::npos);
    expectWhole(p.process());
    ASSERT_EQ(others(p).size(), 1u) << p.trace.at("processes").dump(1);
    const json child = others(p).at(0);
    expectWhole(child);
    EXPECT_EQ(deviceFigure(child, "cpu", "allocated_bytes"), 1000000u);
    EXPECT_EQ(deviceFigure(child, "cpu", "alloc_count"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Locks, ForkUnderLocks, ::testing::Values("scan", "engine"));

// torchrun (torch.distributed.run, gloo, two ranks on the CPU): each rank is a
// process of the trace with its rank, selected by --rank, written to its own
// file with -o %r.
TEST(Processes, TorchrunRanks) {
    const std::string dir = tempDir();
    const std::string pattern = dir + "/rank%r.json";
    // torch 1.13's torchrun parses its --redirects/--tee defaults wrongly under
    // Python 3.11 (an IntFlag of 0 is no member there): pass values it reads. Its
    // rendezvous listens on a free port (--standalone's is fixed, 29400: two runs at
    // once would join each other's job).
    Outcome o = run({MEMTOOL_BIN,
                     "run",
                     "-q",
                     "-o",
                     pattern,
                     "--",
                     PYTHON_BIN,
                     "-m",
                     "torch.distributed.run",
                     "--nnodes",
                     "1",
                     "--nproc_per_node",
                     "2",
                     "--rdzv_backend",
                     "c10d",
                     "--rdzv_endpoint",
                     "localhost:0",
                     "--rdzv_id",
                     "memtool-e2e",
                     "--redirects",
                     "1",
                     "--tee",
                     "1",
                     script("ddp.py")});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    // The agent (no rank) and each rank in a file of its own.
    ASSERT_TRUE(std::filesystem::exists(dir + "/ranknone.json")) << o.err;
    for (int rank : {0, 1}) {
        const std::string file = dir + "/rank" + std::to_string(rank) + ".json";
        ASSERT_TRUE(std::filesystem::exists(file)) << file;
        const json processes = readJson(file).at("processes");
        ASSERT_EQ(processes.size(), 1u) << processes.dump(1);
        const json& r = processes.at(0);
        expectWhole(r);
        EXPECT_EQ(r.at("rank"), rank);
        EXPECT_EQ(r.at("local_rank"), rank);
        EXPECT_EQ(r.at("world_size"), 2);
        EXPECT_EQ(r.at("rank_environment").at("RANK"), std::to_string(rank));
        EXPECT_EQ(r.at("exit_code"), 0);
        // rank r filled (r + 1) * 250,000 float32s.
        const json t = hotspotWithSite(r, "ddp.py:9");
        ASSERT_FALSE(t.is_null()) << r.at("hotspots").dump(1);
        EXPECT_EQ(t.at("allocated_bytes"), 1000000 * (rank + 1));
    }
    // One trace holding them all: --rank selects, and check and diff take it.
    const std::string all = dir + "/all.json";
    json merged = readJson(dir + "/ranknone.json");
    for (int rank : {0, 1})
        merged["processes"].push_back(
            readJson(dir + "/rank" + std::to_string(rank) + ".json").at("processes").at(0));
    std::ofstream(all) << merged.dump();
    Outcome report = run({MEMTOOL_BIN, "report", all});
    ASSERT_EQ(report.exitCode, 0) << report.err;
    EXPECT_EQ(report.out.rfind("3 processes, 2 ranks · ", 0), 0u) << report.out;
    // The three files read together are that trace
    Outcome files = run({MEMTOOL_BIN, "report", dir + "/ranknone.json", dir + "/rank0.json",
                         dir + "/rank1.json", "--format", "json"});
    ASSERT_EQ(files.exitCode, 0) << files.err;
    Outcome one = run({MEMTOOL_BIN, "report", all, "--format", "json"});
    // (the files' processes stand in rank order, the agent after the ranks).
    const json fromFiles = json::parse(files.out).at("ranks"),
               fromOne = json::parse(one.out).at("ranks");
    EXPECT_EQ(fromFiles.at("spread"), fromOne.at("spread"));
    EXPECT_EQ(fromFiles.at("hosts"), fromOne.at("hosts"));
    EXPECT_EQ(fromFiles.at("spread").at("cpu").at("largest").at("rank"), 1);
    Outcome rank1 = run({MEMTOOL_BIN, "report", all, "--rank", "1"});
    ASSERT_EQ(rank1.exitCode, 0) << rank1.err;
    EXPECT_NE(rank1.out.find("· rank 1 ·"), std::string::npos) << rank1.out;
    EXPECT_EQ(rank1.out.find("· rank 0 ·"), std::string::npos);
    Outcome check = run({MEMTOOL_BIN, "check", all, "--rank", "1", "--max-peak", "cpu=1999999"});
    EXPECT_EQ(check.exitCode, 1) << check.out << check.err;
    Outcome diff = run({MEMTOOL_BIN, "diff", all, all, "--rank", "0"});
    EXPECT_EQ(diff.exitCode, 0) << diff.err;
}

// Two ranks of 4,000,000 and 7,000,000 B that hold theirs at once, started by a
// launcher that sets RANK and WORLD_SIZE as torchrun does: one view of the job
// names rank 1 as holding most, the spread 1.75x, and the host's combined peak
// from their timelines on one clock; the same from a file per rank.
TEST(Processes, EveryRankInOneViewFromOneTraceOrAFilePerRank) {
    const std::string dir = tempDir();
    Profiled p = profile({PYTHON_BIN, script("hold_launcher.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "done 0 0\n");
    const std::string trace = dir + "/trace.json";
    std::ofstream(trace) << p.trace.dump();
    auto expectRanks = [](const json& ranks) {
        EXPECT_EQ(ranks.at("ranks"), 2);
        const json& cpu = ranks.at("spread").at("cpu");
        EXPECT_EQ(cpu.at("largest").at("rank"), 1);
        EXPECT_EQ(cpu.at("largest").at("peak_bytes"), 7000000);
        EXPECT_EQ(cpu.at("smallest").at("rank"), 0);
        EXPECT_EQ(cpu.at("smallest").at("peak_bytes"), 4000000);
        EXPECT_EQ(cpu.at("spread"), 1.75);
        // The launcher imports no torch: the ranks are the host's two processes.
        ASSERT_EQ(ranks.at("hosts").size(), 1u) << ranks.dump(1);
        const json& host = ranks.at("hosts")[0];
        EXPECT_EQ(host.at("device"), "cpu");
        EXPECT_EQ(host.at("combined_peak_bytes"), 11000000);
        EXPECT_EQ(host.at("sum_of_peaks_bytes"), 11000000);
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        EXPECT_EQ(host.at("host"), name);
    };
    Outcome report = run({MEMTOOL_BIN, "report", trace, "--format", "json"});
    ASSERT_EQ(report.exitCode, 0) << report.err;
    expectRanks(json::parse(report.out).at("ranks"));
    Outcome text = run({MEMTOOL_BIN, "report", trace, "--bytes", "exact"});
    const std::string pid1 = std::to_string(p.trace.at("processes")[2].at("pid").get<int>());
    EXPECT_NE(text.out.find("Largest:  cpu: rank 1 holds most, 7,000,000 B on cpu (pid " + pid1 +
                            "); least rank 0, 4,000,000 B; spread 1.75x\n"),
              std::string::npos)
        << text.out;
    EXPECT_EQ(run({MEMTOOL_BIN, "check", trace, "--max-rank-spread", "75%"}).exitCode, 0);
    Outcome over = run({MEMTOOL_BIN, "check", trace, "--max-rank-spread", "50%"});
    EXPECT_EQ(over.exitCode, 1) << over.out;
    EXPECT_NE(over.out.find("FAIL  cpu rank spread: rank 1 holds"), std::string::npos) << over.out;
    // A trace per rank (memtool run -o rank%r.json), read together.
    Outcome split = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/rank%r.json", "--", PYTHON_BIN,
                         script("hold_launcher.py")});
    ASSERT_EQ(split.exitCode, 0) << split.err;
    Outcome files =
        run({MEMTOOL_BIN, "report", dir + "/rank0.json", dir + "/rank1.json", "--format", "json"});
    ASSERT_EQ(files.exitCode, 0) << files.err;
    expectRanks(json::parse(files.out).at("ranks"));
    EXPECT_EQ(run({MEMTOOL_BIN, "check", dir + "/rank0.json", dir + "/rank1.json",
                   "--max-rank-spread", "50%"})
                  .exitCode,
              1);
    // The same file twice is one process given twice, not a job of two.
    Outcome twice = run({MEMTOOL_BIN, "report", dir + "/rank0.json", dir + "/rank0.json"});
    EXPECT_EQ(twice.exitCode, 2);
    EXPECT_NE(twice.err.find("hold the same process"), std::string::npos) << twice.err;
}

// A child whose environment the program made itself (subprocess's env={...},
// `env -i`, posix_spawn with a list of its own, an exec after os.environ.clear())
// still gets memtool's variables: every one is a whole process of the trace,
// with its own bytes, and keeps its own LD_PRELOAD and PYTHONPATH entries after
// memtool's.
TEST(Processes, ChildrenGivenAnEnvironmentOfTheProgramsOwnAreProfiled) {
    Profiled p = profile({PYTHON_BIN, script("own_environment.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out,
              "2000 [] []\n"
              "3000 [] []\n"
              "4000 ['libc.so.6'] ['/nonexistent']\n"
              "5000 [] []\n")
        << p.outcome.err;
    // The image the program ended in first, then the one before its exec and the
    // three children (`env` loads no torch: not a process of the trace).
    const json& all = p.trace.at("processes");
    ASSERT_EQ(all.size(), 5u) << all.dump(1);
    std::multiset<uint64_t> sizes;
    for (const json& process : all) {
        expectWhole(process);
        sizes.insert(deviceFigure(process, "cpu", "allocated_bytes"));
    }
    EXPECT_EQ(sizes, (std::multiset<uint64_t>{1000, 2000, 3000, 4000, 5000}));
    EXPECT_EQ(deviceFigure(p.process(), "cpu", "allocated_bytes"), 5000u);
}
