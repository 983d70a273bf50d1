// `memtool ctl --all|--rank N|--run ID COMMAND` on a job: a launcher of two ranks
// (ranks_launcher.py, torchrun's shape without its rendezvous) under `memtool run
// --pausable all`, every rank yielded and restored by one command, one rank asked
// alone (issue 55 item 5).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// `memtool ctl --format json WORDS...` parsed (null when it printed no JSON).
nlohmann::json jobJson(std::vector<std::string> words, Outcome* o) {
    words.insert(words.begin(), {"--format", "json"});
    *o = ctl(words, controlEnv());
    return nlohmann::json::parse(o->out.empty() ? "null" : o->out, nullptr, false);
}

// Asks `ctl list` until the run lists every one of `pids` (it does once it has
// read each one's handshake), at most 200 times; the listing, or null if it never
// listed them all.
nlohmann::json listedWith(const std::vector<std::string>& pids) {
    for (int asked = 0; asked < 200; ++asked) {
        Outcome o;
        const nlohmann::json list = jobJson({"list"}, &o);
        if (o.exitCode != 0 || !list.is_object()) return nullptr;
        std::set<std::string> listed;
        for (const auto& p : list.at("processes")) listed.insert(std::to_string(p.value("pid", 0)));
        if (std::all_of(pids.begin(), pids.end(), [&](auto& p) { return listed.count(p); }))
            return list;
    }
    return nullptr;
}

// Each process of a selection's JSON answer as "pid rank exit status".
std::set<std::string> answered(const nlohmann::json& answer) {
    std::set<std::string> rows;
    if (!answer.is_object()) return rows;
    for (const auto& p : answer.at("processes"))
        rows.insert(std::to_string(p.at("pid").get<int64_t>()) + " " + p.at("rank").dump() + " " +
                    p.at("exit").dump() + " " + p.at("status").get<std::string>());
    return rows;
}

// Whether every line of `text` begins with `prefix` (and there is one).
bool everyLineBegins(const std::string& text, const std::string& prefix) {
    std::istringstream lines(text);
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
        if (line.rfind(prefix, 0) != 0) return false;
        ++n;
    }
    return n > 0;
}

// What the test asked the job while its ranks waited for their flag.
struct JobAnswers {
    std::string rank0, rank1, launcher;
    Outcome yield, restore, status, statusJson, snapshots, oneFile, noRank;
    nlohmann::json yielded, restored, rank1Status;
};

void askJob(const std::string& dir, const std::string& first, JobAnswers& a) {
    std::istringstream words(first);
    std::string ready;
    words >> ready >> a.rank0 >> a.rank1;
    ASSERT_EQ(ready, "ready") << first;
    const nlohmann::json list = listedWith({a.rank0, a.rank1});
    ASSERT_TRUE(list.is_object()) << "the run never listed both ranks";
    for (const auto& p : list.at("processes"))
        if (p.value("starting", false)) a.launcher = std::to_string(p.at("pid").get<int64_t>());
    a.yielded = jobJson({"--all", "yield"}, &a.yield);
    a.restored = jobJson({"--all", "restore"}, &a.restore);
    a.status = ctl({"--rank", "1", "status"}, controlEnv());
    a.rank1Status = jobJson({"--rank", "1", "status"}, &a.statusJson);
    a.snapshots = ctl({"--all", "snapshot", "-o", dir + "/snap-%p.json"}, controlEnv());
    a.oneFile = ctl({"--all", "snapshot", "-o", dir + "/one.json"}, controlEnv());
    a.noRank = ctl({"--rank", "5", "status"}, controlEnv());
}

}  // namespace

// The job yields and restores as one, each rank answering for itself, and trains
// on as if nothing happened: the losses of a run without memtool, to the last bit.
TEST(CtlJob, AllRanksYieldAndRestoreAtOnceAndTrainOnUnchanged) {
    const std::string dir = tempDir(), bare = tempDir(), flag = dir + "/go";
    Outcome bareRun = run({PYTHON_BIN, script("ranks_launcher.py"), "2", "4", bare, "-"});
    ASSERT_EQ(bareRun.exitCode, 0) << bareRun.err;
    ASSERT_EQ(bareRun.out, "done 0 0\n");

    JobAnswers a;
    pid_t memtool = 0;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", dir + "/t.json", "--",
                     PYTHON_BIN, script("ranks_launcher.py"), "2", "4", dir, flag},
                    "", controlEnv(), [&](pid_t pid, const std::string& first) {
                        memtool = pid;
                        askJob(dir, first, a);
                        std::ofstream(flag) << "go\n";  // the ranks wait for it at step 2
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    ASSERT_EQ(o.out, "ready " + a.rank0 + " " + a.rank1 + "\ndone 0 0\n");

    // One answer each, every one ok; the launcher (no torch: its stream never
    // connected, nothing of it to yield) left out and named.
    ASSERT_FALSE(a.launcher.empty());
    const std::set<std::string> ok = {a.rank0 + " 0 0 ok", a.rank1 + " 1 0 ok"};
    EXPECT_EQ(a.yield.exitCode, 0) << a.yield.err;
    EXPECT_EQ(answered(a.yielded), ok) << a.yield.out;
    EXPECT_EQ(a.yielded.at("left_out"), nlohmann::json::array({std::stoi(a.launcher)}));
    EXPECT_EQ(a.yield.err, "memtool: left out " + a.launcher +
                               ": not connected to its run yet (nothing memtool serves)\n");
    for (const auto& p : a.yielded.at("processes")) {
        EXPECT_EQ(p.at("run"), memtool);
        EXPECT_EQ(p.at("body").at("action"), "yield");
        EXPECT_TRUE(p.at("body").at("changed").get<bool>()) << p;
    }
    EXPECT_EQ(a.restore.exitCode, 0) << a.restore.err;
    EXPECT_EQ(answered(a.restored), ok) << a.restore.out;
    for (const auto& p : a.restored.at("processes")) {
        EXPECT_EQ(p.at("body").at("action"), "restore");
        EXPECT_TRUE(p.at("body").at("changed").get<bool>()) << p;
    }

    // Step for step, each rank's losses as without memtool.
    for (const char* rank : {"0", "1"}) {
        const std::string losses = readFile(dir + "/losses" + rank + ".txt");
        EXPECT_EQ(losses, readFile(bare + "/losses" + rank + ".txt")) << "rank " << rank;
        EXPECT_EQ(std::count(losses.begin(), losses.end(), '\n'), 4) << losses;
    }
    // Seeded by rank: a rank given the other's memory back would show.
    EXPECT_NE(readFile(dir + "/losses0.txt"), readFile(dir + "/losses1.txt"));
}

// --rank 1 is rank 1's process alone, every line of its answer headed by its pid
// and rank; a snapshot of several writes one file each, never one for all.
TEST(CtlJob, ARankAnswersAloneAndSnapshotsGoToAFileEach) {
    const std::string dir = tempDir(), flag = dir + "/go";
    JobAnswers a;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", dir + "/t.json", "--",
                     PYTHON_BIN, script("ranks_launcher.py"), "2", "3", dir, flag},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        askJob(dir, first, a);
                        std::ofstream(flag) << "go\n";
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;

    EXPECT_EQ(a.status.exitCode, 0) << a.status.err;
    EXPECT_TRUE(everyLineBegins(a.status.out, "[pid " + a.rank1 + " rank 1] ")) << a.status.out;
    EXPECT_EQ(a.status.err, "");
    EXPECT_EQ(a.statusJson.exitCode, 0);
    EXPECT_EQ(answered(a.rank1Status), std::set<std::string>{a.rank1 + " 1 0 ok"})
        << a.statusJson.out;
    EXPECT_EQ(a.rank1Status.at("left_out"), nlohmann::json::array());

    EXPECT_EQ(a.snapshots.exitCode, 0) << a.snapshots.err;
    for (const std::string& pid : {a.rank0, a.rank1}) {
        const std::string file = dir + "/snap-" + pid + ".json";
        EXPECT_EQ(readJson(file).at("processes").at(0).at("pid"), std::stoi(pid));
        EXPECT_NE(a.snapshots.err.find("[pid " + pid + " rank "), std::string::npos);
    }
    EXPECT_EQ(a.oneFile.exitCode, 2);
    EXPECT_EQ(a.oneFile.err, "memtool: ctl: snapshot with --all: -o " + dir +
                                 "/one.json names one file for processes " + a.rank0 + " and " +
                                 a.rank1 + "; put %p (each one's pid) in it\n");
    EXPECT_FALSE(std::ifstream(dir + "/one.json").good());
    EXPECT_EQ(a.noRank.exitCode, 3);
    EXPECT_EQ(a.noRank.err,
              "memtool: no process of yours under memtool is selected by --rank 5 (see `memtool "
              "ctl list`)\n");
}

// What is wrong with a selection is a usage error, one line, whatever runs.
TEST(CtlJob, TwoSelectionsOrARankThatIsNoNumberAreUsageErrors) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--rank", "one", "status"},
         "memtool: ctl: --rank takes a rank (a whole number, 0 or more), not 'one'\n"},
        {{"--all", "--run", "4200", "yield"},
         "memtool: ctl: --all and --run 4200 cannot go together: give one of --all, --rank N, "
         "--run ID\n"},
        {{"--all", "42", "status"},
         "memtool: ctl: process 42 and --all cannot go together: give a process id or a "
         "selection (--all, --rank N, --run ID)\n"},
        {{"--all"},
         "memtool: ctl: what should the processes of --all do? (status, pause, resume, yield, "
         "restore, tensors, snapshot, policy)\n"},
        {{"--rank", "1", "yield", "--to", "tape"},
         "memtool: ctl: yield --to takes host or disk, not 'tape'\n"},
        {{"--all", "status", "-o", "s.json"}, "memtool: ctl: -o is for snapshot only\n"},
    };
    for (const auto& [words, err] : cases) {
        const Outcome o = ctl(words, controlEnv());
        EXPECT_EQ(o.exitCode, 2) << words[0] << " " << words[1];
        EXPECT_EQ(o.err, err);
        EXPECT_EQ(o.out, "");
    }
}
