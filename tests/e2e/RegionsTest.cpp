// Pausable memory regions of a real PyTorch program (Debian's torch, CPU) under
// the real CLI: from inside (import memtool) and from outside (memtool ctl).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// `memtool ctl` run as another user (nobody), for what a stranger may see.
Outcome ctlAsNobody(const std::vector<std::string>& words) {
    int out[2], err[2];
    if (pipe(out) || pipe(err)) return {};
    pid_t child = fork();
    if (child == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(99);
        std::vector<std::string> argv{MEMTOOL_BIN, "ctl"};
        argv.insert(argv.end(), words.begin(), words.end());
        std::vector<char*> args;
        for (auto& a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        setenv("MEMTOOL_CONTROL_DIR", controlDir().c_str(), 1);
        execv(args[0], args.data());
        _exit(98);
    }
    close(out[1]);
    close(err[1]);
    Outcome o;
    char buf[4096];
    for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;)
        o.out.append(buf, static_cast<size_t>(n));
    for (ssize_t n; (n = read(err[0], buf, sizeof buf)) > 0;)
        o.err.append(buf, static_cast<size_t>(n));
    close(out[0]);
    close(err[0]);
    int status = 0;
    waitpid(child, &status, 0);
    o.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return o;
}

}  // namespace

TEST(Regions, ThePythonApiPausesAndResumesExactly) {
    // A backup directory of its own, for the script to see that no name ever
    // appears in it: the backup is an unnamed file its descriptor holds.
    const std::string dir = tempDir();
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--backup-dir", dir, "--", PYTHON_BIN,
                     script("regions.py"), "api"},
                    "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "pause True True 268435456 1 True 1\n"
              "kv still there True\n"
              "pause kv 67108864\n"
              "resume True 268435456 True 0\n"
              "again nothing to resume: region 'weights' is not paused\n"
              "resume kv 67108864 [('weights', 'resident'), ('kv', 'resident')]\n");
    const auto p = readJson(trace).at("processes").at(0);
    EXPECT_TRUE(p.at("complete").get<bool>());
    const auto& cpu = p.at("devices").at("cpu");
    // Both regions were live together: the peak; the sums' small results came
    // while one of them was paused.
    EXPECT_EQ(cpu.at("peak_bytes").get<uint64_t>(), 320 * MiB);
    EXPECT_EQ(cpu.at("paused_bytes"), 0);
    ASSERT_EQ(p.at("control").size(), 4u);
    const auto& first = p.at("control").at(0);
    EXPECT_EQ(first.at("action"), "pause");
    EXPECT_EQ(first.at("origin"), "api");
    EXPECT_EQ(first.at("tag"), "weights");
    EXPECT_EQ(first.at("device"), "cpu");
    EXPECT_EQ(first.at("bytes"), 256 * MiB);
    EXPECT_EQ(first.at("backup"), "disk");
    EXPECT_TRUE(first.at("ok").get<bool>());
    // Live at the end: nothing (the interpreter freed both tensors on its way out).
    EXPECT_EQ(p.at("regions"), nlohmann::json::parse(R"([
        {"tag": "weights", "device": "cpu", "backup": "disk", "bytes": 0, "paused_bytes": 0},
        {"tag": "kv", "device": "cpu", "backup": "none", "bytes": 0, "paused_bytes": 0}])"));
    Outcome report = run({MEMTOOL_BIN, "report", trace});
    EXPECT_NE(
        report.out.find("weights                  cpu        disk             0 B          0 B"),
        std::string::npos)
        << report.out;
    EXPECT_NE(report.out.find("Memory control (4 events)"), std::string::npos) << report.out;
}

// A daemon's closing every descriptor from 3 up while a region is paused: its disk
// backup (an unnamed file only a descriptor holds) stays open, the resume reads
// it back whole, and the stream goes on.
TEST(Regions, ADiskBackupOutlivesTheProgramClosingEveryDescriptor) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("close_fds_paused.py")},
        "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // 8,000,000 bytes of int64, paused in whole pages from the block's start.
    EXPECT_EQ(o.out, "pause True 8003584\nresume True 8003584\nintact True\n");
    const auto p = readJson(trace).at("processes").at(0);
    EXPECT_TRUE(p.at("complete").get<bool>()) << p.value("incomplete_reason", "");
    EXPECT_EQ(p.at("control").size(), 2u);
}

// Code written for torch_memory_saver, with its import changed to memtool's, in a
// CPU-only process. Its regions serve the device allocator only: CPU tensors made
// in them were region memory (gone after a pause without a backup, and one stray
// CPU tensor failed every pause with a host backup); they are the program's own
// now, the default tag entered with a host and a disk backup in turn. pause() and
// resume() returned None whatever happened; they raise where torch_memory_saver
// fails or ends the process, and a tag with nothing is nothing, as there.
TEST(Regions, TorchMemorySaversApiRunsWithOneImportChanged) {
    const std::string dir = tempDir();
    // A file where the script asks for a backup directory: refused with the reason.
    { std::ofstream(dir + "/file") << "x"; }
    const std::string trace = tempDir() + "/t.json";
    std::vector<std::string> env = controlEnv();
    env.push_back("TMS_DISK_BACKUP_DIR=" + dir + "/env-backups");
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("tms_compat.py"), dir},
            "", env);
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "enabled True env dir made True\n"
              "submodules cuda False ('preload', 'torch')\n"
              "cpu tensors untouched True True True True\n"
              "regions []\n"
              "pause kv ok\n"
              "kv backed up in the env dir 1\n"
              "pause kv raised: torch_memory_saver.pause('kv'): its memory is paused already "
              "(torch_memory_saver ends the process on a second pause)\n"
              "resume kv ok\n"
              "resume kv raised: torch_memory_saver.resume('kv'): its memory is not paused "
              "(torch_memory_saver ends the process on a resume without a pause)\n"
              "pause no-such-tag ok\n"
              "kv kept True\n"
              "pause lost raised: torch_memory_saver.pause('lost') failed: pause failed, nothing "
              "was released: cannot create the backup file in DIR/gone: No such file or "
              "directory\n"
              "lost untouched True\n"
              "disable outside a region: disable() should be called only when tms is active "
              "(inside a region(), or with TMS_INIT_ENABLE=1)\n"
              "refused: cpu_backup_backend requires enable_cpu_backup=True\n"
              "refused: cpu_backup_backend is 'pinned' or 'mmap', not 'paged'\n"
              "refused: enable_cpu_backup and enable_disk_backup are mutually exclusive\n"
              "refused: the backup directory DIR/file is not a directory\n"
              "host pool 0 0 0\n"
              "refused: max_bytes must be None or a number of bytes >= 0, not -1\n"
              "refused: max_bytes must be None or a number of bytes >= 0, not '8GiB'\n"
              "retain False True\n"
              "margin: Only setter is supported\n"
              "refused: region(graphs=True) needs the preload hook mode (as torch_memory_saver's "
              "cuda_graph)\n");
    const auto p = readJson(trace).at("processes").at(0);
    EXPECT_EQ(p.at("regions"), nlohmann::json::parse(R"([
        {"tag": "kv", "device": "cpu", "backup": "disk", "bytes": 0, "paused_bytes": 0},
        {"tag": "lost", "device": "cpu", "backup": "disk", "bytes": 0, "paused_bytes": 0}])"));
    ASSERT_EQ(p.at("control").size(), 3u);  // kv's pause and resume, lost's failed pause
    EXPECT_EQ(p.at("control").at(0).at("bytes"), MiB);
    EXPECT_EQ(p.at("control").at(2).at("ok"), false);
}

// A paused tensor's content, read from its disk backup while the region stays
// paused (memtool.read_backup, torch_memory_saver's get_cpu_backup).
TEST(Regions, APausedTensorIsReadFromItsBackup) {
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--backup-dir",
                     tempDir(), "--", PYTHON_BIN, script("read_backup.py")},
                    "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "resident: region 'weights' is not paused: its memory holds the content\n"
              "whole torch.float32 (3000000,) True\n"
              "view (1000100,) True\n"
              "tms True None\n"
              "refused: region 'scratch' was paused without a backup: its content is gone\n"
              "refused: this memory is no region's\n"
              "still paused ['paused', 'paused']\n"
              "after resume True\n");
}

// A fork child's regions are its own; its parent's, inherited, are not its to
// pause (that once broke its stream with a control event for a region it never
// declared), and each process's trace has its own regions and events.
TEST(Regions, AForkChildPausesItsOwnRegionsOnly) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--backup-dir", tempDir(), "--",
                     PYTHON_BIN, script("fork_regions.py")},
                    "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "child sees []\n"
              "child paused 2097152 [('wkv', 'paused')]\n"
              "child reads its copy of the parent's True\n"
              "child resumed 2097152 True\n"
              "parent paused 1048576 [('kv', 'paused')]\n"
              "parent kept True\n");
    const auto processes = readJson(trace).at("processes");
    ASSERT_EQ(processes.size(), 2u);
    for (const auto& p : processes) {
        EXPECT_TRUE(p.at("complete").get<bool>()) << p.at("incomplete_reason");
        const bool child = p.at("pid") != processes.at(0).at("pid");
        ASSERT_EQ(p.at("regions").size(), 1u) << p.at("regions");
        EXPECT_EQ(p.at("regions").at(0).at("tag"), child ? "wkv" : "kv");
        ASSERT_EQ(p.at("control").size(), 2u) << p.at("control");
        EXPECT_EQ(p.at("control").at(0).at("bytes"), child ? 2 * MiB : MiB);
        EXPECT_EQ(p.at("control").at(1).at("action"), "resume");
    }
}

TEST(Regions, MemtoolCtlDrivesTheProgramFromOutside) {
    const std::string dir = tempDir();  // backups: no name ever appears there
    const std::string trace = tempDir() + "/t.json";
    std::string pauseOut, statusOut, listOut, resumeOut, notOurs;
    int pauseCode = -1, resumeCode = -1, notOursCode = -1;
    Outcome strangerList, strangerPause;
    uint64_t rssBefore = 0, rssPaused = 0;
    mode_t dirMode = 0, socketMode = 0;
    Outcome o =
        run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--backup-dir", dir, "--", PYTHON_BIN,
             script("regions.py"), "ctl"},
            "", controlEnv(), [&](pid_t memtool, const std::string& first) {
                ASSERT_EQ(first.rfind("ready ", 0), 0u) << first;
                const pid_t target = static_cast<pid_t>(std::stol(first.substr(6)));
                const std::string pid = std::to_string(target);
                struct stat st {};
                stat(controlDir().c_str(), &st);
                dirMode = st.st_mode & 07777;
                stat((controlDir() + "/run-" + std::to_string(memtool) + ".sock").c_str(), &st);
                socketMode = st.st_mode & 07777;
                rssBefore = rssOf(target);
                Outcome pause = ctl({pid, "pause", "weights"}, controlEnv());
                pauseCode = pause.exitCode;
                pauseOut = pause.out;
                rssPaused = rssOf(target);
                statusOut = ctl({pid, "status"}, controlEnv()).out;
                listOut = ctl({"list"}, controlEnv()).out;
                Outcome resume = ctl({pid, "resume"}, controlEnv());
                resumeCode = resume.exitCode;
                resumeOut = resume.out;
                Outcome other = ctl({"1", "status"}, controlEnv());
                notOursCode = other.exitCode;
                notOurs = other.err;
                if (geteuid() == 0) {  // root can become a stranger for a moment
                    strangerList = ctlAsNobody({"list"});
                    strangerPause = ctlAsNobody({pid, "pause"});
                }
                kill(target, SIGUSR1);
            });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(dirMode, 0700u);
    EXPECT_EQ(socketMode, 0600u);
    EXPECT_EQ(pauseCode, 0);
    EXPECT_EQ(
        pauseOut.rfind(
            "pause 'weights': 256.00 MiB (268435456 bytes) released from 1 allocation in ", 0),
        0u)
        << pauseOut;
    // and where the content went.
    const std::string where = " s; 256.00 MiB (268435456 bytes) to disk\n";
    EXPECT_EQ(pauseOut.substr(pauseOut.size() - std::min(pauseOut.size(), where.size())), where);
    EXPECT_GE(rssBefore - rssPaused, 256 * MiB);
    EXPECT_NE(
        statusOut.find(
            "weights                  cpu      disk     256.00 MiB          0 B   256.00 MiB  "
            "paused"),
        std::string::npos)
        << statusOut;
    EXPECT_NE(listOut.find("weights cpu 256.00 MiB paused, kv cpu 64.00 MiB resident"),
              std::string::npos)
        << listOut;
    EXPECT_EQ(resumeCode, 0);
    EXPECT_EQ(
        resumeOut.rfind(
            "resume every region: 256.00 MiB (268435456 bytes) restored from 1 allocation in ", 0),
        0u)
        << resumeOut;
    EXPECT_EQ(notOursCode, 3);
    EXPECT_EQ(notOurs, "memtool: process 1 does not run under memtool (see `memtool ctl list`)\n");
    if (geteuid() == 0) {
        // Another user can neither list nor command the process: the directory is
        // not theirs, and the process is not theirs to signal either.
        EXPECT_EQ(strangerList.exitCode, 1);
        EXPECT_EQ(strangerList.err, "memtool: refusing the control directory " + controlDir() +
                                        ": it belongs to uid 0, not to you\n");
        EXPECT_EQ(strangerPause.exitCode, 1);  // the directory check comes first
    }
    // The program went on with its data where it was, and the backup file is gone.
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "intact True 0\n");
    const auto p = readJson(trace).at("processes").at(0);
    ASSERT_EQ(p.at("control").size(), 2u);
    EXPECT_EQ(p.at("control").at(0).at("origin"), "ctl");
    EXPECT_EQ(p.at("control").at(1).at("action"), "resume");
}

TEST(Regions, TouchingPausedMemoryEndsTheProgramWithAMessage) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("regions.py"), "touch"},
        "", controlEnv());
    EXPECT_EQ(o.signal, SIGSEGV);
    EXPECT_EQ(o.out, "touching\n");
    EXPECT_NE(o.err.find("memtool: the program touched paused memory at 0x"), std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find(" (region 'kv', paused by memtool: resume it before use); ending the "
                         "program with SIGSEGV\n"),
              std::string::npos)
        << o.err;
}

TEST(Regions, OutsideMemtoolRunTheApiDoesNothing) {
    Outcome o = run({PYTHON_BIN, "-W", "always", "-c",
                     "import sys; sys.path.insert(0, sys.argv[1]); import memtool\n"
                     "with memtool.region('w'): pass\n"
                     "print(memtool.enabled, memtool.pause().changed, memtool.regions())",
                     std::string(MEMTOOL_BIN).substr(0, std::string(MEMTOOL_BIN).rfind("/bin/")) +
                         "/lib/python"});
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "False False []\n");
    EXPECT_NE(o.err.find("memtool.pause: this process does not run under `memtool run`"),
              std::string::npos)
        << o.err;
}

namespace {
// tests/fakes/CudaRegionUser.cpp under memtool run (`options` before it, `args`
// after), with the test doubles of the runtime (linked) and the driver.
Outcome runCudaRegionUser(const std::vector<std::string>& options,
                          const std::vector<std::string>& args,
                          const std::vector<std::string>& extraEnv = {}) {
    std::vector<std::string> command{MEMTOOL_BIN, "run", "-q", "--cuda", "runtime-hooks"};
    command.insert(command.end(), options.begin(), options.end());
    command.push_back("--");
    command.push_back(CUDA_REGION_USER_BIN);
    command.insert(command.end(), args.begin(), args.end());
    std::vector<std::string> env{std::string("MEMTOOL_CUDA_DRIVER=") + FAKE_CUDA_DRIVER,
                                 "MEMTOOL_CONTROL_DIR=" + controlDir()};
    env.insert(env.end(), extraEnv.begin(), extraEnv.end());
    return run(command, "", env);
}
}  // namespace

// CUDA memory in a region, through the runtime hooks and the CUDA VMM backend, with
// test doubles of the runtime and the driver whose device memory is host memory.
TEST(Regions, CudaMemoryIsPausedThroughTheDriversVmmApi) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runCudaRegionUser({"-o", trace}, {});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    // 3,000,000 bytes take two 2 MiB granules of device memory; all of it goes on
    // pause and comes back, with the content. The resume keeps the pinned buffer
    // the content was backed up in, for the next pause.
    EXPECT_EQ(o.out, "held 4194304 paused 0 0 resumed 0 same freed 0 pinned 4194304\n");
    const auto p = readJson(trace).at("processes").at(0);
    const auto& cuda0 = p.at("devices").at("cuda:0");
    EXPECT_EQ(cuda0.at("peak_bytes"), 3000000);
    EXPECT_EQ(cuda0.at("allocated_bytes"), 3000000);
    EXPECT_EQ(cuda0.at("current_bytes"), 0);
    ASSERT_EQ(p.at("control").size(), 2u);
    EXPECT_EQ(p.at("control").at(0).at("device"), "cuda:0");
    EXPECT_EQ(p.at("control").at(0).at("bytes"), 4194304);
    EXPECT_EQ(p.at("control").at(0).at("backup"), "host");
    EXPECT_EQ(p.at("regions").at(0).at("tag"), "kv");
}

// torch_memory_saver's TMS_INIT_ENABLE: CUDA memory allocated outside any region
// is the "default" region's, backed up as its variables say: the host (pinned
// memory the size of the allocation's granules) or the disk, streamed through two
// buffers of TMS_DISK_BACKUP_CHUNK_MB MiB.
TEST(Regions, TorchMemorySaversInitEnableMakesCudaMemoryPausable) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runCudaRegionUser({"-o", trace}, {"implicit"},
                                  {"TMS_INIT_ENABLE=1", "TMS_INIT_ENABLE_CPU_BACKUP=true"});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "held 4194304 paused 0 0 resumed 0 same freed 0 pinned 4194304\n");
    auto p = readJson(trace).at("processes").at(0);
    ASSERT_EQ(p.at("control").size(), 2u);
    EXPECT_EQ(p.at("control").at(0).at("backup"), "host");
    EXPECT_EQ(p.at("regions").at(0).at("tag"), "default");

    o = runCudaRegionUser(
        {"-o", trace, "--backup-dir", tempDir()}, {"implicit"},
        {"TMS_INIT_ENABLE=yes", "TMS_INIT_ENABLE_DISK_BACKUP=1", "TMS_DISK_BACKUP_CHUNK_MB=1"});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "held 4194304 paused 0 0 resumed 0 same freed 0 pinned 2097152\n");
    p = readJson(trace).at("processes").at(0);
    EXPECT_EQ(p.at("control").at(0).at("backup"), "disk");

    // Without it, the allocation is the program's own: nothing to pause.
    o = runCudaRegionUser({"-o", trace}, {"implicit"}, {"TMS_INIT_ENABLE=maybe"});
    EXPECT_EQ(o.err,
              "memtool: TMS_INIT_ENABLE=maybe is not a value torch_memory_saver takes (1, true, "
              "yes or 0, false, no): TMS_INIT_ENABLE is left off\n");
    EXPECT_EQ(readJson(trace).at("processes").at(0).at("control").size(), 0u) << o.out;
}

// Region memory freed by cudaFreeAsync while its stream is captured into a CUDA
// graph is the graph's to free when it runs: memtool keeps it (releasing would
// synchronize, which a capture forbids, and the graph may still use it), and an
// allocation made during capture is the graph's, not the region's.
TEST(Regions, CudaGraphCaptureKeepsRegionMemoryAndSynchronizesNothing) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runCudaRegionUser({"-o", trace}, {"capture"});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "capture held 4194304 graph's 0 4194304 after 4194304\n");
    EXPECT_NE(o.err.find("memtool: cudaMallocAsync inside CUDA graph capture allocates the "
                         "graph's memory: it is not pausable"),
              std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("memtool: pausable memory freed by cudaFreeAsync inside CUDA graph "
                         "capture stays allocated"),
              std::string::npos)
        << o.err;
    const auto p = readJson(trace).at("processes").at(0);
    EXPECT_EQ(p.at("warnings").size(), 2u) << p.at("warnings").dump();
    // Recorded as the device holds it: the region's 3,000,000 bytes still live,
    // the graph's 1,000 allocated and freed.
    const auto& cuda0 = p.at("devices").at("cuda:0");
    EXPECT_EQ(cuda0.at("allocated_bytes"), 3001000);
    EXPECT_EQ(cuda0.at("current_bytes"), 3000000);
}

// A reference another library takes to region memory (NCCL registering a buffer:
// cuMemRetainAllocationHandle, which the CUDA injection reports) is said once,
// naming the region; a reference to memory of no region says nothing.
TEST(Regions, AReferenceFromOutsideToRegionMemoryIsSaidOnce) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runCudaRegionUser({"-o", trace}, {"referenced"});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    ASSERT_EQ(o.out.rfind("referenced 0x", 0), 0u) << o.out;
    // The first reference inside the allocation is the one named.
    const std::string said =
        "memtool: region 'kv' memory at " + o.out.substr(11, o.out.size() - 12);
    const size_t at = o.err.find(said);
    ASSERT_NE(at, std::string::npos) << o.err;
    EXPECT_EQ(o.err.find(said, at + 1), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("set NCCL_GRAPH_REGISTER=0"), std::string::npos) << o.err;
    const auto warnings = readJson(trace).at("processes").at(0).at("warnings");
    ASSERT_EQ(warnings.size(), 1u) << warnings.dump();
    EXPECT_NE(warnings.at(0).get<std::string>().find("region 'kv' memory"), std::string::npos);
}

TEST(Regions, HostPoolZeroGivesPinnedMemoryBackOnResume) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    Outcome o = runCudaRegionUser({"--host-pool", "0", "-o", tempDir() + "/t.json"}, {});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "held 4194304 paused 0 0 resumed 0 same freed 0 pinned 0\n");
    // A size it cannot read is refused before anything runs.
    Outcome bad = run({MEMTOOL_BIN, "run", "--host-pool", "lots", "--", "true"});
    EXPECT_EQ(bad.exitCode, 2) << bad.err;
    EXPECT_NE(bad.err.find("'lots' is not a size"), std::string::npos) << bad.err;
}

// --host-budget: a host backup that would take the pinned memory past it goes to
// disk instead (the control event says "disk"), the content kept; a percent is
// of the host's memory; a value it cannot read is refused before anything runs.
TEST(Regions, AHostBudgetSendsAHostBackupPastItToDisk) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    const std::string trace = tempDir() + "/t.json";
    Outcome o = runCudaRegionUser({"--host-budget", "2MiB", "-o", trace}, {});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    // Pinned at the end: only the two 64 MiB staging buffers disk copies stream
    // through (made once, kept, and not a backup: the budget leaves them out).
    EXPECT_EQ(o.out, "held 4194304 paused 0 0 resumed 0 same freed 0 pinned 134217728\n");
    auto control = readJson(trace).at("processes").at(0).at("control");
    ASSERT_EQ(control.size(), 2u);
    EXPECT_EQ(control.at(0).at("backup"), "disk");
    EXPECT_EQ(control.at(0).at("bytes"), 4194304);
    // Half the host's memory holds 4 MiB: the host backup is made.
    o = runCudaRegionUser({"--host-budget", "50%", "-o", trace}, {});
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_EQ(o.out, "held 4194304 paused 0 0 resumed 0 same freed 0 pinned 4194304\n");
    EXPECT_EQ(readJson(trace).at("processes").at(0).at("control").at(0).at("backup"), "host");
    for (const char* bad : {"lots", "0%", "101%", "%"}) {
        Outcome refused = run({MEMTOOL_BIN, "run", "--host-budget", bad, "--", "true"});
        EXPECT_EQ(refused.exitCode, 2) << bad << refused.err;
        EXPECT_NE(refused.err.find(std::string("'") + bad +
                                   "' is not a size (e.g. 8GiB, 500MB) "
                                   "or a percent of host memory (e.g. 50%)"),
                  std::string::npos)
            << refused.err;
    }
}

// Verified restores: a disk backup the script spoils while paused (one byte,
// through its /proc/self/fd link) makes resume() raise VerifyError naming the
// allocation at the tensor's data_ptr, said on stderr and in the trace too; a
// region not verified comes back spoiled in silence, unless memtool run --verify
// verifies every tag.
TEST(Regions, AVerifiedRegionsSpoiledBackupFailsItsResumeLoudly) {
    const std::string dir = tempDir(), trace = dir + "/t.json";
    const std::string checked =
        "checked VerifyError: verify: region 'checked' on cpu came back different from what was "
        "paused: 1 of 1 allocations, the first at ADDRESS (4001792 bytes; ... False at data_ptr "
        "True\n"
        "checked changed 1 value True\n";
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--backup-dir", dir, "--", PYTHON_BIN,
                     script("verify_restore.py"), dir},
                    "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, checked + "unchecked resumed True equal False\n");
    EXPECT_NE(o.err.find("memtool: verify: region 'checked' on cpu came back different"),
              std::string::npos)
        << o.err;
    const auto p = readJson(trace).at("processes").at(0);
    size_t said = 0;
    for (const auto& w : p.at("warnings"))
        said += w.get<std::string>().rfind("verify: region 'checked'", 0) == 0;
    EXPECT_EQ(said, 1u) << p.at("warnings").dump();

    o = run({MEMTOOL_BIN, "run", "-q", "--verify", "-o", trace, "--backup-dir", dir, "--",
             PYTHON_BIN, script("verify_restore.py"), dir},
            "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, checked + std::regex_replace(checked, std::regex("checked"), "unchecked"));
}
