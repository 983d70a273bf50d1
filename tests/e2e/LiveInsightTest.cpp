// Live insight: `memtool ctl PID tensors` and `snapshot` asked of a running
// program, memtool.report_tensors() and memtool.snapshot() from inside it, and an
// out-of-memory error captured with what held the memory then (Debian's torch, CPU).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;
using nlohmann::json;

namespace {

constexpr uint64_t kWeight = 1024 * 1024 * 4, kBias = 1024 * 4, kInput = 512 * 1024 * 4;
// Two Linear(16, 16) sharing a weight: one weight, two biases. LSTM(10, 20, 2):
// per layer 4 * 20 gates of weights over the input (10, then 20) and the hidden
// state (20), and two biases of 80.
constexpr uint64_t kShared = 16 * 16 * 4 + 2 * 16 * 4;
constexpr uint64_t kLstm = (80 * 10 + 80 * 20 + 80 * 20 + 80 * 20) * 4 + 4 * 80 * 4;

json insightCtlJson(const std::string& pid, std::vector<std::string> words, int* exitCode) {
    words.insert(words.begin(), {"--format", "json", pid});
    Outcome o = ctl(words, controlEnv());
    *exitCode = o.exitCode;
    return json::parse(o.out.empty() ? "null" : o.out, nullptr, false);
}

// name -> bytes counted for it, of one device of a tensors report.
std::map<std::string, uint64_t> tensorBytes(const json& device) {
    std::map<std::string, uint64_t> out;
    for (const auto& t : device.at("tensors")) out[t.at("name")] = t.at("bytes");
    return out;
}

}  // namespace

// pytorch_memlab's MemReporter example (a Linear(1024, 1024) and its input), asked
// from outside before and after backward, and from inside with the model named.
TEST(LiveInsight, TensorsNamesWhatPythonSeesAndFindsWhatItCannot) {
    const std::string dir = tempDir();
    const std::string trace = dir + "/t.json", inside = dir + "/inside.json",
                      outside = dir + "/outside.json", fifo = dir + "/ready";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const std::string py = script("live_tensors.py");
    json before, after;
    std::string beforeText, snapshotErr, secondReady;
    int beforeCode = -1, afterCode = -1, textCode = -1, snapshotCode = -1;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, py, dir, inside}, "",
                    controlEnv(), [&](pid_t, const std::string& first) {
                        std::istringstream words(first);
                        std::string ready, n, pid;
                        words >> ready >> n >> pid;
                        ASSERT_EQ(ready + n, "ready1") << first;
                        before = insightCtlJson(pid, {"tensors"}, &beforeCode);
                        Outcome text = ctl({pid, "tensors", "--verbose"}, controlEnv());
                        textCode = text.exitCode;
                        beforeText = text.out;
                        Outcome snap = ctl({pid, "snapshot", "-o", outside}, controlEnv());
                        snapshotCode = snap.exitCode;
                        snapshotErr = snap.err;
                        std::ofstream(dir + "/1") << "go\n";
                        std::getline(std::ifstream(fifo), secondReady);  // point 2
                        after = insightCtlJson(pid, {"tensors", "--device", "cpu"}, &afterCode);
                        std::ofstream(dir + "/2") << "go\n";
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;

    // 1. Before backward. Visible: the parameters (the shared weight once, the
    // LSTM's eight), inp and out. Not visible: the graph's two temporaries,
    // inp + 2 and inp * (inp + 2), made at line 43 and held by autograd alone.
    // They add up exactly.
    ASSERT_EQ(beforeCode, 0) << before.dump();
    ASSERT_EQ(before.at("status"), "ok");
    const json& cpu = before.at("body").at("devices").at(0);
    EXPECT_EQ(cpu.at("device"), "cpu");
    std::map<std::string, uint64_t> expected = {{"linear.weight", kWeight},
                                                {"linear.bias", kBias},
                                                {"shared.0.weight", 16 * 16 * 4},
                                                {"shared.0.bias", 64},
                                                {"shared.1.weight", 0},
                                                {"shared.1.bias", 64},
                                                {"lstm.weight_ih_l0", 80 * 10 * 4},
                                                {"lstm.weight_hh_l0", 80 * 20 * 4},
                                                {"lstm.bias_ih_l0", 320},
                                                {"lstm.bias_hh_l0", 320},
                                                {"lstm.weight_ih_l1", 80 * 20 * 4},
                                                {"lstm.weight_hh_l1", 80 * 20 * 4},
                                                {"lstm.bias_ih_l1", 320},
                                                {"lstm.bias_hh_l1", 320},
                                                {"inp", kInput},
                                                {"out", 4}};
    EXPECT_EQ(tensorBytes(cpu), expected);
    int sharedSeen = 0;
    for (const auto& t : cpu.at("tensors")) {
        if (t.at("name") != "shared.1.weight") continue;
        ++sharedSeen;
        EXPECT_EQ(t.at("owner"), "shared.0.weight");
    }
    EXPECT_EQ(sharedSeen, 1);
    const uint64_t params = kWeight + kBias + kShared + kLstm;
    EXPECT_EQ(cpu.at("visible_bytes"), params + kInput + 4);
    EXPECT_EQ(cpu.at("invisible_bytes"), 2 * kInput);
    EXPECT_EQ(cpu.at("invisible_storages"), 2);
    ASSERT_EQ(cpu.at("invisible").size(), 1u);
    EXPECT_EQ(cpu.at("invisible").at(0).at("site"), "<module> (" + py + ":43)");
    EXPECT_EQ(cpu.at("live_bytes"), params + 3 * kInput + 4);
    EXPECT_EQ(cpu.at("matched_bytes").get<uint64_t>() + cpu.at("invisible_bytes").get<uint64_t>(),
              cpu.at("live_bytes").get<uint64_t>());
    EXPECT_TRUE(cpu.at("exact").get<bool>());

    // The same as text, memlab's layout; --verbose lists the temporaries one by
    // one with their stacks (the add and the mul).
    ASSERT_EQ(textCode, 0) << beforeText;
    EXPECT_EQ(lineStarting(beforeText, "linear.weight"),
              "linear.weight                                                (1024, 1024)       "
              "4,194,304");
    EXPECT_EQ(lineStarting(beforeText, "shared.1.weight"),
              "shared.1.weight(->shared.0.weight)                               (16, 16)       "
              "        0");
    EXPECT_EQ(lineStarting(beforeText, "Not visible"),
              "Not visible from Python: 4,194,304 B in 2 storages");
    EXPECT_EQ(lineStarting(beforeText, "Live on cpu"),
              "Live on cpu: 6,320,388 found from Python + 4,194,304 not visible = 10,514,692 B "
              "(exact)");
    const std::string row = "        2,097,152 B       1 storage   <module> (" + py + ":43)\n";
    const size_t firstRow = beforeText.find(row);
    ASSERT_NE(firstRow, std::string::npos) << beforeText;
    EXPECT_NE(beforeText.find(row, firstRow + 1), std::string::npos) << beforeText;
    EXPECT_NE(beforeText.find("at::_ops::add_Tensor::call"), std::string::npos) << beforeText;
    EXPECT_NE(beforeText.find("at::_ops::mul_Tensor::call"), std::string::npos) << beforeText;

    // The snapshot then: what is live is what the tensors report found live.
    ASSERT_EQ(snapshotCode, 0) << snapshotErr;
    const json snap = readJson(outside).at("processes").at(0);
    EXPECT_TRUE(snap.at("snapshot").get<bool>());
    EXPECT_EQ(snap.at("devices").at("cpu").at("current_bytes"), params + 3 * kInput + 4);

    // 2. After backward and `del out`: the graph is gone, the gradients are named.
    EXPECT_EQ(secondReady.rfind("ready 2 ", 0), 0u) << secondReady;
    ASSERT_EQ(afterCode, 0) << after.dump();
    const json& cpu2 = after.at("body").at("devices").at(0);
    expected["linear.weight.grad"] = kWeight;
    expected["linear.bias.grad"] = kBias;
    expected["inp.grad"] = kInput;
    expected.erase("out");
    EXPECT_EQ(tensorBytes(cpu2), expected);
    EXPECT_EQ(cpu2.at("invisible_bytes"), 0);
    EXPECT_EQ(cpu2.at("live_bytes"), params + kWeight + kBias + 2 * kInput);

    // From inside, memtool.report_tensors(linear): the model's four tensors first,
    // memlab's names without prefix; then every other row, as pytorch_memlab lists
    // them (the model used to leave them by line under "Not the model's").
    EXPECT_NE(
        o.out.find("weight                                                       (1024, 1024)  "
                   "     4,194,304\n"
                   "weight.grad                                                  (1024, 1024)  "
                   "     4,194,304\n"
                   "bias                                                               (1024)  "
                   "         4,096\n"
                   "bias.grad                                                          (1024)  "
                   "         4,096\n"
                   "shared.0.weight                                                  (16, 16)  "
                   "         1,024\n"),
        std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("inp                                                           (512, 1024)"
                         "       2,097,152\n"
                         "inp.grad                                                      (512, 1024)"
                         "       2,097,152\n"
                         "-----"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("Total Tensors: 3,154,240   Used Memory: 12,615,936 B (visible from "
                         "Python, 18 tensors)\n"
                         "Not visible from Python: 0 B in 0 storages\n"
                         "Live on cpu: 12,615,936 found from Python + 0 not visible = 12,615,936 B "
                         "(exact)\n"),
              std::string::npos)
        << o.out;
    // memtool.snapshot() wrote what was live then; the run's own trace says the same
    // peak as the snapshot saw up to it.
    const json in = readJson(inside).at("processes").at(0);
    EXPECT_EQ(in.at("devices").at("cpu").at("current_bytes"),
              params + kWeight + kBias + 2 * kInput);
    EXPECT_EQ(in.at("exit_code"), nullptr);
    const json whole = readJson(trace).at("processes").at(0);
    EXPECT_EQ(whole.at("devices").at("cpu").at("peak_bytes"),
              in.at("devices").at("cpu").at("peak_bytes"));
    EXPECT_FALSE(whole.contains("snapshot"));
}

// ctl's own mistakes are usage errors; a snapshot needs a running process.
// A tensor whose memory this process did not allocate through torch (numpy's,
// torch.from_numpy) is named apart from the live bytes; in a fork child, so are
// the tensors it inherited from its parent, and the report says which may be which.
TEST(LiveInsight, TensorsNotAllocatedHereAreNamedApart) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("tensors_outside.py")});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const size_t child = o.out.find("Tensors of process", 1);
    ASSERT_NE(child, std::string::npos) << o.out;
    const std::string parentText = o.out.substr(0, child), childText = o.out.substr(child);
    EXPECT_NE(parentText.find("Visible but not from torch's allocator (not in the live bytes): "
                              "1,000,000 B\n"
                              "        1,000,000 B  n\n"
                              "Live on cpu: 4,000,000 found from Python + 0 not visible = "
                              "4,000,000 B (exact)\n"),
              std::string::npos)
        << parentText;
    EXPECT_NE(childText.find("Visible but not allocated in this process (its parent's from before "
                             "the fork, or not torch's; not in the live bytes): 5,000,000 B\n"
                             "        4,000,000 B  a\n"
                             "        1,000,000 B  n\n"
                             "Live on cpu: 2,000,000 found from Python + 0 not visible = "
                             "2,000,000 B (exact)\n"),
              std::string::npos)
        << childText;
}

// A tuple that holds exactly the unnamed tensors (the LSTM's h_n and c_n in
// pytorch_memlab's README) was skipped as the walk's own argument tuple: they were
// "not visible", 120,000 B of them, 3 runs of 3.
TEST(LiveInsight, TensorsHeldOnlyByATupleAreVisible) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run(
        {MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, script("tensors_in_tuple.py")});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_NE(o.out.find("Live on cpu: 120,000 found from Python + 0 not visible = 120,000 B "
                         "(exact)\n"),
              std::string::npos)
        << o.out;
}

// A sparse tensor has no storage of its own: its indices and values were "not
// visible" (1,049,600 B in pytorch_memlab's sparse test). Its parts are rows, named
// after it, as pytorch_memlab lists them.
TEST(LiveInsight, ASparseTensorsPartsAreItsRows) {
    const Outcome o = profile({PYTHON_BIN, script("sparse_tensors.py")}).outcome;
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "coo._indices 1048576\n"
              "coo._values 262144\n"
              "csr.crow_indices 8200\n"
              "csr.col_indices 32768\n"
              "csr.values 16384\n"
              "visible 1368072 not visible 0\n");
}

// MemLord's counters, from memtool's exact figures: per device and per site,
// asked from inside the program; outside memtool run a clear error.
TEST(LiveInsight, TheProgramAsksItsOwnCountersAndTopSites) {
    const Outcome o = profile({PYTHON_BIN, script("counters.py")}, {}, "", controlEnv()).outcome;
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out,
              "Bytes(bytes=5000000, text='4.77 MiB') Bytes(bytes=2000000, text='1.91 MiB') "
              "Bytes(bytes=3000000, text='2.86 MiB')\n"
              "Bytes(bytes=5000000, text='4.77 MiB') 0\n"
              "('cpu', 'make (counters.py:10)', 3000000, 0, 3000000)\n"
              "('cpu', '<module> (counters.py:14)', 2000000, 2000000, 0)\n"
              "['<module> (counters.py:14)']\n"
              "[3000000]\n"
              "refused: device is None, 'cpu', 'cuda', 'cuda:N' (or a torch.device), not 'gpu'\n"
              "refused: by is 'allocated', 'freed' or 'live', not 'peak'\n"
              "refused: n is a number of sites of 1 or more, not 0\n");
    Outcome bare = run({PYTHON_BIN, "-c", "import memtool; memtool.allocated()"}, "", packageEnv());
    EXPECT_EQ(bare.exitCode, 1);
    EXPECT_NE(
        bare.err.find("RuntimeError: memtool.allocated needs `memtool run` (or memtool.track)"),
        std::string::npos)
        << bare.err;
}

TEST(LiveInsight, CtlSnapshotAndTensorsUsage) {
    // 4194303: the highest pid but one a kernel hands out, which nothing here has.
    Outcome o = ctl({"4194303", "status", "-o", "x.json"}, controlEnv());
    EXPECT_EQ(o.exitCode, 2);
    EXPECT_EQ(o.err, "memtool: ctl: -o is for snapshot only\n");
    o = ctl({"4194303", "snapshot", "-o"}, controlEnv());
    EXPECT_EQ(o.exitCode, 2);
    EXPECT_EQ(o.err, "memtool: ctl: -o needs a value\n");
    o = ctl({"4194303", "snapshot"}, controlEnv());
    EXPECT_EQ(o.exitCode, 3);
    EXPECT_EQ(o.err, "memtool: there is no process 4194303\n");
}

// A program that runs out of memory: the trace names the request, its line, and
// what held the memory then, by site, adding up to what was live; the report says
// it first; check fails the run unless told it may.
TEST(LiveInsight, OutOfMemoryIsCapturedWithWhatHeldTheMemory) {
    const std::string dir = tempDir();
    const std::string trace = dir + "/t.json", py = script("oom.py");
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", PYTHON_BIN, py});
    EXPECT_EQ(o.exitCode, 1) << o.err;  // the program's own exit: torch raised
    EXPECT_NE(o.err.find("RuntimeError"), std::string::npos) << o.err;
    const json p = readJson(trace).at("processes").at(0);
    EXPECT_TRUE(p.at("complete").get<bool>());
    ASSERT_GE(p.at("oom").size(), 1u);
    EXPECT_EQ(p.at("oom_count"), p.at("oom").size());
    const json& e = p.at("oom").at(0);
    EXPECT_EQ(e.at("device"), "cpu");
    EXPECT_EQ(e.at("requested_bytes"), 64u << 20);
    EXPECT_EQ(e.at("source"), "allocator");
    EXPECT_EQ(e.at("file"), py);
    EXPECT_EQ(e.at("line"), 16);
    EXPECT_EQ(e.at("function"), "grow");
    EXPECT_EQ(e.at("site"), "grow (" + py + ":16)");
    EXPECT_EQ(e.at("held_on"), "cpu");
    // Every 64 MiB storage made before the failure is held; whatever else torch
    // holds is small. The rows add up to what was live.
    const uint64_t live = e.at("live_bytes");
    uint64_t bySite = 0, byLine = 0;
    for (const auto& s : e.at("by_site")) bySite += s.at("bytes").get<uint64_t>();
    for (const auto& l : e.at("by_line")) byLine += l.at("bytes").get<uint64_t>();
    EXPECT_EQ(bySite, live);
    EXPECT_EQ(byLine, live);
    const json& top = e.at("by_site").at(0);
    EXPECT_EQ(top.at("site"), "grow (" + py + ":16)");
    EXPECT_EQ(top.at("bytes").get<uint64_t>() % (64u << 20), 0u);
    EXPECT_GE(top.at("bytes").get<uint64_t>(), 10u * (64u << 20));  // 1 GiB of headroom, less
    EXPECT_EQ(e.at("by_line").at(0).at("line"), 16);

    Outcome report = run({MEMTOOL_BIN, "report", trace});
    ASSERT_EQ(report.exitCode, 0) << report.err;
    const std::string first = report.out.substr(0, report.out.find('\n'));
    EXPECT_EQ(
        first.rfind("Out of memory on cpu: 64.00 MiB requested at grow (oom.py:16) while ", 0), 0u)
        << report.out;
    EXPECT_NE(first.find(" were held; held by:"), std::string::npos) << first;

    Outcome check = run({MEMTOOL_BIN, "check", trace});
    EXPECT_EQ(check.exitCode, 1) << check.out << check.err;
    EXPECT_NE((check.out + check.err).find("out of memory"), std::string::npos)
        << check.out << check.err;
    Outcome allowed = run({MEMTOOL_BIN, "check", "--allow-oom", trace});
    EXPECT_EQ(allowed.exitCode, 0) << allowed.out << allowed.err;
}

// A main thread blocked in a system call reaches no safe point: tensors gives up
// after --wait with a clear message, and the program goes on untouched.
TEST(LiveInsight, TensorsGivesUpWhenTheMainThreadDoesNotCome) {
    const std::string dir = tempDir(), fifo = dir + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    Outcome answer;
    std::vector<Outcome> refused;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--", PYTHON_BIN,
                     script("blocked_main.py"), fifo},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        const std::string pid = first.substr(first.find(' ') + 1);
                        // Bad values are refused at once, by ctl before it sends
                        // anything (a usage error), not after waiting for the main
                        // thread ("inf" was taken as no wait at all, a device that
                        // names none listed nothing after 30 s).
                        const std::pair<const char*, const char*> bad[] = {{"--wait", "inf"},
                                                                           {"--wait", "5s"},
                                                                           {"--device", "bogus"},
                                                                           {"--device", "cuda0"},
                                                                           {"--device", "cuda:"}};
                        for (const auto& [option, value] : bad)
                            refused.push_back(ctl({pid, "tensors", option, value}, controlEnv()));
                        answer = ctl({pid, "tensors", "--wait", "0.2"}, controlEnv());
                        std::ofstream(fifo) << "go\n";  // lets it go on
                    });
    ASSERT_EQ(refused.size(), 5u);
    const char* const said[] = {"--wait takes seconds (above 0, at most 10000000), not 'inf'",
                                "--wait takes seconds (above 0, at most 10000000), not '5s'",
                                "--device takes cpu, cuda:N or npu:N, not 'bogus'",
                                "--device takes cpu, cuda:N or npu:N, not 'cuda0'",
                                "--device takes cpu, cuda:N or npu:N, not 'cuda:'"};
    for (size_t i = 0; i < refused.size(); ++i) {
        EXPECT_EQ(refused[i].exitCode, 2);
        EXPECT_EQ(refused[i].err, std::string("memtool: ctl: tensors ") + said[i] + "\n");
    }
    EXPECT_EQ(answer.exitCode, 1);
    EXPECT_EQ(answer.out, "");
    EXPECT_EQ(answer.err,
              "memtool: tensors failed: the program's main thread did not reach a safe point "
              "within 0.2 s (it may be blocked in a system call: a sleep, I/O, a lock)\n");
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "done\n");
}

// A main thread that runs only Python (no op, no I/O: nothing hands the GIL over)
// is not blocked: tensors reaches it. Before, on 3.11 and 3.12, the pending call
// asked from the control thread waited for a GIL handover that never came, and
// tensors gave up as if the thread were blocked.
TEST(LiveInsight, TensorsReachesAMainThreadThatOnlyRunsPython) {
    json tensors;
    int code = -1;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--", PYTHON_BIN,
                     script("busy_main.py")},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        const std::string pid = first.substr(first.find(' ') + 1);
                        tensors = insightCtlJson(pid, {"tensors", "--wait", "60"}, &code);
                        kill(std::stoi(pid), SIGUSR1);  // lets it end
                    });
    ASSERT_EQ(code, 0);
    const json& cpu = tensors.at("body").at("devices").at(0);
    EXPECT_EQ(cpu.at("device"), "cpu");
    EXPECT_EQ(tensorBytes(cpu), (std::map<std::string, uint64_t>{{"weights", 1000000}}))
        << tensors.dump();
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "done\n");
}

namespace {

// The names of `pid`'s threads (/proc/PID/task/*/comm), sorted.
// The name the kernel gives a program's threads: its file name, cut to 15 bytes
// ("python3" for Debian's, "python" for a venv's).
std::string programName(const std::string& path) { return path.substr(path.rfind('/') + 1, 15); }

std::vector<std::string> threadNames(const std::string& pid) {
    std::vector<std::string> names;
    const std::string tasks = "/proc/" + pid + "/task";
    if (DIR* d = opendir(tasks.c_str())) {
        while (const dirent* e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            std::ifstream comm(tasks + "/" + e->d_name + "/comm");
            std::string name;
            std::getline(comm, name);
            names.push_back(name);
        }
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace

// The collector's control thread costs a single-threaded program glibc's locked
// paths (bench/history/runs.md, run 32), so it starts when a request comes: here the
// program's only thread is blocked in a system call, and the request is answered.
TEST(ControlThread, StartsWhenARequestComesToAProgramThatHasOneThread) {
    const std::string dir = tempDir(), fifo = dir + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::vector<std::string> before, after;
    Outcome status;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--", PYTHON_BIN,
                     script("quiet_main.py"), fifo},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        const std::string pid = first.substr(first.find(' ') + 1);
                        before = threadNames(pid);
                        status = ctl({pid, "status"}, controlEnv());
                        after = threadNames(pid);
                        std::ofstream(fifo) << "go\n";  // lets it go on
                    });
    const std::string python = programName(PYTHON_BIN);
    EXPECT_EQ(before, std::vector<std::string>{python});
    EXPECT_EQ(status.exitCode, 0) << status.err;
    EXPECT_EQ(status.out, "No pausable regions.\n");
    EXPECT_EQ(after, (std::vector<std::string>{"memtool-ctl", python}));
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "done\n");
    // Nothing the program did was lost to the signal that woke it.
    const json process = readJson(dir + "/t.json").at("processes").at(0);
    EXPECT_EQ(process.at("stream").at("verified"), true) << process.dump(1);
    EXPECT_TRUE(process.at("complete").get<bool>());
}

// A program that starts a thread of its own has the control thread from then on.
TEST(ControlThread, StartsWithTheProgramsFirstThread) {
    const std::string dir = tempDir(), fifo = dir + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::vector<std::string> names;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--", PYTHON_BIN,
                     script("quiet_main.py"), fifo, "thread"},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        names = threadNames(first.substr(first.find(' ') + 1));
                        std::ofstream(fifo) << "go\n";
                    });
    const std::string python = programName(PYTHON_BIN);
    EXPECT_EQ(names, (std::vector<std::string>{"memtool-ctl", python, python}));
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "done\n");
}
