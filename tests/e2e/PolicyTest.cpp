// Memory policies run by memtool run (cli/policy): a process rule that pauses a
// region to disk and resumes it while a training loop runs; a scripted device
// (the fake NVML) whose curve gives an exact sequence of actions; a real cgroup's
// limit read as the host's capacity; policies set from outside (memtool ctl) and
// from inside (memtool.set_policy), and refused whole with a one-line error.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string writePolicy(const std::string& dir, const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
}

// "rule N DEVICE DO ok|failed": the trace's policy actions, one line each.
std::vector<std::string> actionLines(const nlohmann::json& trace) {
    std::vector<std::string> out;
    if (!trace.contains("policy_actions")) return out;
    for (const auto& a : trace["policy_actions"])
        out.push_back(
            "rule " + std::to_string(a["rule"].get<int>()) + " " + a["device"].get<std::string>() +
            " " + a["do"].get<std::string>() +
            (a["ok"].get<bool>() ? " ok" : " failed: " + a["message"].get<std::string>()));
    return out;
}

}  // namespace

// The issue's CPU test: a training loop with a 64 MiB kv region under
// "process above 200MiB: pause kv to disk" and "below 100MiB: resume kv". A
// 160 MiB scratch buffer takes the process over; the policy pauses kv (its RSS
// drops by kv's bytes), the scratch goes, the policy resumes kv with its content,
// and the losses equal a bare run's.
TEST(Policies, AProcessRulePausesARegionToDiskAndResumesItAsItWas) {
    const std::string dir = tempDir();
    const std::string bare = dir + "/bare.txt", losses = dir + "/losses.txt";
    Outcome b = run({PYTHON_BIN, script("policy_kv.py"), "300", bare, "bare"});
    ASSERT_EQ(b.exitCode, 0) << b.err;
    const std::string policy = writePolicy(dir, "kv.json", R"({"interval_ms": 20, "rules": [
      {"device": "cpu", "metric": "process", "above": "200MiB", "do": "pause kv to disk"},
      {"device": "cpu", "metric": "process", "below": "100MiB", "do": "resume kv"}]})");
    Profiled p = profile({PYTHON_BIN, script("policy_kv.py"), "300", losses, "policy"},
                         {"--policy", policy});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(readFile(losses), readFile(bare));
    EXPECT_EQ(lineStarting(p.outcome.out, "resumed"), "resumed True");
    // RSS fell by kv's 64 MiB, give or take the pages the loop itself touched.
    const std::string paused = lineStarting(p.outcome.out, "paused ");
    ASSERT_FALSE(paused.empty()) << p.outcome.out;
    const int64_t drop = std::stoll(paused.substr(7));
    EXPECT_LE(std::llabs(drop - static_cast<int64_t>(64 * kMiB)), static_cast<int64_t>(4 * kMiB))
        << drop;
    EXPECT_EQ(actionLines(p.trace), (std::vector<std::string>{"rule 1 cpu pause kv to disk ok",
                                                              "rule 2 cpu resume kv ok"}));
    const auto& actions = p.trace["policy_actions"];
    EXPECT_EQ(actions[0]["bytes"], 64 * kMiB);
    EXPECT_EQ(actions[0]["threshold_bytes"], 200 * kMiB);
    EXPECT_GT(actions[0]["reading_bytes"].get<uint64_t>(), 200 * kMiB);
    EXPECT_EQ(actions[1]["bytes"], 64 * kMiB);
    EXPECT_LT(actions[1]["reading_bytes"].get<uint64_t>(), 100 * kMiB);
    // The pause and resume themselves, as the process recorded them.
    std::vector<std::string> control;
    for (const auto& e : p.process()["control"])
        control.push_back(e["action"].get<std::string>() + " " + e["origin"].get<std::string>() +
                          " " + e["backup"].get<std::string>() + " " +
                          std::to_string(e["bytes"].get<uint64_t>()));
    EXPECT_EQ(control, (std::vector<std::string>{"pause policy disk 67108864",
                                                 "resume policy disk 67108864"}));
    // The readings it acted on are in the trace, on the process's clock.
    const auto& polls = p.trace.at("polls");
    EXPECT_EQ(polls["interval_ms"], 20);
    EXPECT_GT(polls["rounds"].get<uint64_t>(), 0u);
    const auto& series = polls["series"];
    for (const char* name : {"cpu.used", "cpu.total", "backup_dir.free"})
        EXPECT_TRUE(series.contains(name)) << name;
    EXPECT_TRUE(series.contains("rss:" + std::to_string(p.process()["pid"].get<int>())));
    EXPECT_TRUE(p.process().contains("start_unix_s"));
}

namespace {

// The program run under `policy` with the fake NVML playing `levels` (two
// devices of 1,000 bytes each), each level held 10 rounds; it ends 5 rounds
// after the curve.
Profiled underCurve(const std::vector<std::pair<int, int>>& levels, const std::string& policy,
                    const std::vector<std::string>& flags = {}) {
    const std::string dir = tempDir();
    std::ofstream curve(dir + "/curve.txt");
    curve << "1000 1000\n";
    for (const auto& [d0, d1] : levels)
        for (int i = 0; i < 10; ++i) curve << d0 << " " << d1 << "\n";
    curve.close();
    std::vector<std::string> all{"--policy", writePolicy(dir, "p.json", policy)};
    all.insert(all.end(), flags.begin(), flags.end());
    return profile(
        {PYTHON_BIN, script("policy_curve.py"), "rounds", std::to_string(10 * levels.size() + 5)},
        all, "",
        {"MEMTOOL_NVML_LIBRARY=" + std::string(FAKE_NVML), "FAKE_NVML_CURVE=" + dir + "/curve.txt",
         "FAKE_NVML_ROUNDS=" + dir + "/rounds", "FAKE_NVML_START=" + dir + "/start"});
}

}  // namespace

// A scripted device of two CUDA indexes (the fake NVML) under three rules: the
// curve gives exactly these actions in this order. ("cuda" is each index on its
// own: cuda:1 below 40% would resume kv as well.)
TEST(Policies, AScriptedDeviceCurveGivesExactlyItsActions) {
    Profiled p = underCurve({{500, 500}, {950, 500}, {300, 600}, {300, 450}},
                            R"({"interval_ms": 20, "rules": [
      {"device": "cuda", "above": "90%", "do": "pause kv to disk"},
      {"device": "cuda", "below": "40%", "do": "resume kv"},
      {"device": "cuda:1", "above": "50%", "do": "gc", "cooldown_s": 3600}]})");
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(lineStarting(p.outcome.out, "kv"), "kv ['resident'] True");
    EXPECT_EQ(actionLines(p.trace),
              (std::vector<std::string>{"rule 1 cuda:0 pause kv to disk ok",
                                        "rule 2 cuda:0 resume kv ok", "rule 3 cuda:1 gc ok"}));
    const auto& a = p.trace["policy_actions"];
    EXPECT_EQ(a[0]["reading_bytes"], 950);
    EXPECT_EQ(a[0]["threshold_bytes"], 900);
    EXPECT_EQ(a[0]["used_percent"], 95.0);
    EXPECT_EQ(a[1]["reading_bytes"], 300);
    EXPECT_EQ(a[1]["threshold_bytes"], 400);
    EXPECT_EQ(a[2]["reading_bytes"], 600);
    EXPECT_EQ(a[2]["threshold_bytes"], 500);
    const auto& polls = p.trace["polls"];
    EXPECT_EQ(polls["cuda_source"], "nvml");
    // The device's series holds the curve's levels.
    std::set<uint64_t> used0;
    for (const auto& point : polls["series"]["cuda:0.used"]["points"])
        used0.insert(point[1].get<uint64_t>());
    EXPECT_EQ(used0, (std::set<uint64_t>{300, 500, 950}));
    EXPECT_EQ(polls["series"]["cuda:1.total"]["points"][0][1], 1000);
}

// yield and restore (courtesy, --pausable all) from a policy: the program parks
// at a safe point with all of its memory on disk while the device is over 90%,
// and goes on, kv as it was, once it is under 40%.
TEST(Policies, AYieldAndItsRestoreFollowTheDevice) {
    Profiled p = underCurve({{500, 0}, {950, 0}, {600, 0}, {300, 0}}, R"({"interval_ms": 20,
      "rules": [{"device": "cuda:0", "above": "90%", "do": "yield to disk"},
                {"device": "cuda:0", "below": "40%", "do": "restore"}]})",
                            {"--pausable", "all"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(actionLines(p.trace), (std::vector<std::string>{"rule 1 cuda:0 yield to disk ok",
                                                              "rule 2 cuda:0 restore ok"}));
    EXPECT_EQ(lineStarting(p.outcome.out, "kv"), "kv ['resident'] True");
    const auto& a = p.trace["policy_actions"];
    EXPECT_GE(a[0]["bytes"].get<uint64_t>(), 8u << 20);  // kv, and whatever else was pausable
    EXPECT_EQ(a[1]["bytes"], a[0]["bytes"]);
}

// max_disk: a pause whose backup would pass it is refused with the reason, and
// its rule backs off instead of asking again: for its cooldown doubled, at most
// 60 s, here (cooldown 3600 s) far past the curve's end however slowly the
// machine runs it (with no cooldown, 2 s: a loaded CI machine once took longer,
// and the rule asked again as the program ended).
TEST(Policies, ADiskLimitRefusesTheBackupAndTheRuleBacksOff) {
    Profiled p = underCurve({{500, 0}, {950, 0}, {950, 0}}, R"({"interval_ms": 20,
      "max_disk": "4MiB", "rules": [{"device": "cuda", "above": "90%", "do": "pause kv",
                                     "cooldown_s": 3600}]})");
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(actionLines(p.trace),
              (std::vector<std::string>{"rule 1 cuda:0 pause kv failed: max_disk 4.00 MiB: the "
                                        "policy's disk backups hold 0 B and this one would add "
                                        "8.00 MiB"}));
    EXPECT_EQ(lineStarting(p.outcome.out, "kv"), "kv ['resident'] True");
    EXPECT_TRUE(p.process()["control"].empty());
}

// "spill host backups to disk" on a CUDA region's host backup (the fake driver):
// the pinned memory goes, and the resume brings the content back from disk.
TEST(Policies, ASpillMovesAPausedRegionsHostBackupToDisk) {
    if (std::string(CUDA_REGION_USER_BIN).empty()) GTEST_SKIP() << "built without the CUDA parts";
    const std::string dir = tempDir();
    const std::string policy = writePolicy(dir, "p.json", R"({"interval_ms": 20, "rules": [
      {"device": "cpu", "above": 1, "do": "spill host backups to disk", "cooldown_s": 0}]})");
    Profiled p =
        profile({CUDA_REGION_USER_BIN, "spill"}, {"--cuda", "runtime-hooks", "--policy", policy},
                "", {"MEMTOOL_CUDA_DRIVER=" + std::string(FAKE_CUDA_DRIVER)});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err << p.outcome.out;
    EXPECT_EQ(lineStarting(p.outcome.out, "pinned while paused"),
              "pinned while paused 4194304");  // 3,000,000 B in 2 MiB granules
    EXPECT_NE(p.outcome.out.find(" resumed 0 same "), std::string::npos) << p.outcome.out;
    // Asked every round (no cool-down: a round before the pause finds nothing to
    // spill); one of them moved the region's 4 MiB.
    const auto& actions = p.trace["policy_actions"];
    int moved = 0;
    for (const auto& a : actions) {
        EXPECT_EQ(a["do"], "spill host backups to disk");
        // The last may have been asked as the program ended.
        if (!a["ok"].get<bool>()) {
            EXPECT_EQ(a["message"], "the process ended before it answered") << a.dump();
        }
        moved += a["bytes"] == 4194304;
    }
    EXPECT_EQ(moved, 1) << actions.dump();
}

// A real cgroup with a limit the test sets (where the machine lets it make one):
// the host's capacity is the limit, and a rule in percent of it acts.
TEST(Policies, TheHostIsTheCgroupsLimitWhereThereIsOne) {
    std::ifstream mine("/proc/self/cgroup");
    std::string line, base, file;
    for (; std::getline(mine, line);) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (line.substr(a + 1, b - a - 1) == "memory") {
            base = "/sys/fs/cgroup/memory" + line.substr(b + 1);
            file = "memory.limit_in_bytes";
        } else if (line.rfind("0::", 0) == 0 && base.empty()) {
            base = "/sys/fs/cgroup" + line.substr(3);
            file = "memory.max";
        }
    }
    const std::string group = base + "/memtool-policy-" + std::to_string(getpid());
    if (base.empty() || mkdir(group.c_str(), 0755) != 0)
        GTEST_SKIP() << "no memory cgroup can be made here (" << group << ")";
    const uint64_t limit = 2048 * kMiB;
    std::ofstream(group + "/" + file) << limit;
    const std::string dir = tempDir();
    const std::string policy = writePolicy(dir, "p.json", R"({"interval_ms": 20, "rules": [
      {"device": "cpu", "above": "0.5%", "do": "gc", "cooldown_s": 3600}]})");
    // memtool and the program in the group: the shell moves itself in first.
    Outcome o = run({"/bin/sh", "-c", "echo $$ > " + group + "/cgroup.procs && exec \"$@\"", "sh",
                     MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--policy", policy, "--",
                     PYTHON_BIN, script("policy_curve.py"), "rounds", "0"});
    rmdir(group.c_str());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const nlohmann::json trace = readJson(dir + "/t.json");
    const auto& polls = trace["polls"];
    EXPECT_EQ(polls["host_source"],
              "cgroup " + std::string(file == "memory.max" ? "v2 " : "v1 ") + group);
    for (const auto& point : polls["series"]["cpu.total"]["points"]) EXPECT_EQ(point[1], limit);
    // Whatever the run uses of the group is over 0.5% of it (10.24 MiB): one gc.
    EXPECT_EQ(actionLines(trace), (std::vector<std::string>{"rule 1 cpu gc ok"}));
    EXPECT_EQ(trace["policy_actions"][0]["threshold_bytes"], limit / 200);
}

// From outside: `memtool ctl PID policy FILE|show|off`; a bad one refused whole,
// exit 2, one line.
TEST(Policies, CtlSetsShowsAndEndsAProcesssPolicy) {
    const std::string dir = tempDir();
    const std::string good = writePolicy(dir, "good.json", R"({"rules": [
      {"device": "cpu", "metric": "process", "above": "1GiB", "do": "pause kv to disk"},
      {"device": "cpu", "metric": "process", "below": "512MiB", "do": "resume kv"}]})");
    const std::string unknownTag = writePolicy(dir, "tag.json", R"({"rules": [
      {"device": "cpu", "above": "1GiB", "do": "pause nothere"}]})");
    const std::string flapping = writePolicy(dir, "flap.json", R"({"rules": [
      {"device": "cpu", "above": "50%", "do": "yield"},
      {"device": "cpu", "below": "60%", "do": "restore"}]})");
    Outcome shown, set, off, tag, flap, afterOff;
    std::string pid;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", dir + "/t.json", "--", PYTHON_BIN,
                     script("policy_curve.py"), "stdin"},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        pid = first.substr(6);
                        set = ctl({pid, "policy", good}, controlEnv());
                        shown = ctl({pid, "policy", "show"}, controlEnv());
                        tag = ctl({pid, "policy", unknownTag}, controlEnv());
                        flap = ctl({pid, "policy", flapping}, controlEnv());
                        off = ctl({pid, "policy", "off"}, controlEnv());
                        afterOff = ctl({pid, "policy", "show"}, controlEnv());
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(set.exitCode, 0) << set.err;
    const std::string rules =
        "rule 1: cpu process above 1.00 GiB: pause kv to disk\n"
        "rule 2: cpu process below 512.00 MiB: resume kv\n";
    EXPECT_EQ(set.out, rules);
    EXPECT_EQ(shown.out, rules);
    EXPECT_EQ(tag.exitCode, 2);
    EXPECT_EQ(tag.err, "memtool: policy: rule 1: the process has no region tagged 'nothere'\n");
    // Refused here, before memtool run is asked.
    EXPECT_EQ(flap.exitCode, 2);
    EXPECT_EQ(flap.err,
              "memtool: policy: rule 2 (restore below 60%) must read below rule 1's threshold "
              "(yield above 50%): they would flap\n");
    EXPECT_EQ(off.exitCode, 0);
    EXPECT_EQ(afterOff.out, "process " + pid + ": no policy\n");
}

// From inside: memtool.set_policy takes MemLord's strategy dict as it is, refuses
// a bad policy with ValueError naming the rule (keeping the one it had), and
// None ends it.
TEST(Policies, TheProgramSetsItsOwnPolicyAndMemlordsStrategy) {
    Profiled p = profile({PYTHON_BIN, script("policy_curve.py"), "api"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const std::string& out = p.outcome.out;
    EXPECT_EQ(lineStarting(out, "lines"),
              "lines [\"rule 1: cuda max above 50% in band 0%-50%: gc\", \"rule 2: cuda freed "
              "above 1.00 GiB in band 50%-101%: gc\"]");
    EXPECT_EQ(lineStarting(out, "shown"),
              "shown {\"above\": \"50%\", \"band\": [0.0, 50.0], \"cooldown_s\": 1.0, \"device\": "
              "\"cuda\", \"do\": \"gc\", \"metric\": \"max\"}");
    EXPECT_NE(out.find("refused policy: rule 1: the process has no region tagged 'nothere'\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("refused policy: rule 1: above: 'lots' is not a size (200MiB, 85%, "
                       "1048576)\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(lineStarting(out, "kept"), "kept 2");
    EXPECT_EQ(lineStarting(out, "off"), "off None");
}

// memtool.offload(prefetch=True, optimizer=...): every layer's weights in a
// region of its own, on disk between its uses (forward, backward, the step); the
// losses equal a bare run's, every weight keeps the address the adopt gave it,
// and between steps all four layers' weights are paused (the biases, 1-D, stay).
// memtool.adopt() of a whole module: one storage moved, paused, resumed, the
// same output.
TEST(Offload, ATrainingLoopWithEveryLayerOffloadedLosesNothing) {
    const std::string dir = tempDir();
    const std::string bare = dir + "/bare.txt", losses = dir + "/losses.txt";
    Outcome b = run({PYTHON_BIN, script("offload_train.py"), "6", bare, "bare"});
    ASSERT_EQ(b.exitCode, 0) << b.err;
    Profiled p = profile({PYTHON_BIN, script("offload_train.py"), "6", losses, "offload"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(readFile(losses), readFile(bare));
    EXPECT_EQ(lineStarting(p.outcome.out, "paused"), "paused 4 4194304");  // 4 x 512 x 512 x 4 B
    EXPECT_EQ(lineStarting(p.outcome.out, "pointers"), "pointers kept True");
    EXPECT_EQ(lineStarting(p.outcome.out, "adopt"), "adopt 1 1 1048576 ['bias'] True");
    EXPECT_EQ(p.outcome.err.find("Full backward hook"), std::string::npos) << p.outcome.err;
    // Each step: every layer resumed and paused for its forward, its backward and
    // the optimizer's step (6 steps, 4 layers; the first pause at offload()).
    size_t pauses = 0, resumes = 0;
    for (const auto& e : p.process()["control"]) {
        if (e["tag"].get<std::string>().rfind("offload:Sequential.", 0) != 0) continue;
        pauses += e["action"] == "pause";
        resumes += e["action"] == "resume";
        EXPECT_TRUE(e["ok"].get<bool>()) << e.dump();
    }
    EXPECT_EQ(resumes, 6u * 4u * 3u + 4u);  // and remove(): all four back
    EXPECT_EQ(pauses, 4u + 6u * 4u * 3u);
}
