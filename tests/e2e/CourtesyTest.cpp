// Courtesy: a running program yields all of its memory and takes it back, under
// `memtool run --pausable all`, driven by `memtool ctl PID yield/restore` from
// outside or by memtool.yield_memory()/restore() from inside (Debian's torch, CPU).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// The answer of `memtool ctl --format json PID WORDS...`: {pid, status, body}.
nlohmann::json ctlJson(const std::string& pid, std::vector<std::string> words, int* exitCode) {
    words.insert(words.begin(), {"--format", "json", pid});
    Outcome o = ctl(words, controlEnv());
    *exitCode = o.exitCode;
    return nlohmann::json::parse(o.out.empty() ? "null" : o.out, nullptr, false);
}

// Asks `memtool ctl PID status` until `done` holds for its answer's body, at most
// 3,000 times (a few seconds of asking); false if it never did.
bool askStatusUntil(const std::string& pid,
                    const std::function<bool(const nlohmann::json&)>& done) {
    for (int asked = 0; asked < 3000; ++asked) {
        int code = -1;
        const nlohmann::json status = ctlJson(pid, {"status"}, &code);
        if (code != 0) return false;
        if (done(status.at("body"))) return true;
    }
    return false;
}

uint64_t regionBytes(const nlohmann::json& body) {
    uint64_t bytes = 0;
    for (const auto& r : body.at("regions")) bytes += r.at("bytes").get<uint64_t>();
    return bytes;
}

}  // namespace

// The test: a seeded MLP whose parameters and Adam state are several
// hundred MiB, yielded to disk mid-run and restored; it goes on as if nothing
// happened.
TEST(Courtesy, CtlYieldsATrainingRunToDiskAndItGoesOnUnchanged) {
    const std::string dir = tempDir();
    const std::string bareLosses = dir + "/bare.txt", losses = dir + "/losses.txt";
    const std::string flag = dir + "/go", trace = dir + "/t.json";
    Outcome bare = run({PYTHON_BIN, script("courtesy_train.py"), "4", bareLosses, "-"});
    ASSERT_EQ(bare.exitCode, 0) << bare.err;

    uint64_t params = 0, rssBefore = 0, rssYielded = 0, rssRestored = 0;
    nlohmann::json yielded, yieldedAgain, restored, restoredAgain, restoreFirst;
    int yieldCode = -1, yieldAgainCode = -1, restoreCode = -1, restoreAgainCode = -1,
        restoreFirstCode = -1;
    std::string yieldText, restoreText;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", trace, "--", PYTHON_BIN,
                     script("courtesy_train.py"), "4", losses, flag},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        std::istringstream words(first);
                        std::string ready;
                        pid_t target = 0;
                        words >> ready >> target >> params;
                        ASSERT_EQ(ready, "ready") << first;
                        const std::string pid = std::to_string(target);
                        restoreFirst = ctlJson(pid, {"restore"}, &restoreFirstCode);
                        rssBefore = rssOf(target);
                        Outcome y = ctl({pid, "yield", "--to", "disk"}, controlEnv());
                        yieldCode = y.exitCode;
                        yieldText = y.out + y.err;
                        rssYielded = rssOf(target);
                        yieldedAgain = ctlJson(pid, {"yield"}, &yieldAgainCode);
                        restored = ctlJson(pid, {"restore"}, &restoreCode);
                        rssRestored = rssOf(target);
                        restoredAgain = ctlJson(pid, {"restore"}, &restoreAgainCode);
                        std::ofstream(flag)
                            << "go\n";  // the program was waiting for this at step 2
                    });
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out.substr(o.out.find(' ', 6)), " 100712448\ndone\n") << o.out;
    // Six 2048x2048 Linear layers with biases, float32.
    EXPECT_EQ(params, 6u * (2048 * 2048 + 2048) * 4);

    // Restore before any yield, and yield twice, restore twice: said plainly.
    EXPECT_EQ(restoreFirstCode, 0);
    EXPECT_EQ(restoreFirst.at("body").at("message"),
              "the program has not yielded; nothing to restore");
    EXPECT_EQ(yieldAgainCode, 0);
    EXPECT_FALSE(yieldedAgain.at("body").at("changed").get<bool>());
    EXPECT_EQ(yieldedAgain.at("body").at("message"),
              "the program has yielded already; nothing done (restore gives its memory back)");
    EXPECT_EQ(restoreAgainCode, 0);
    EXPECT_EQ(restoredAgain.at("body").at("message"),
              "the program has not yielded; nothing to restore");
    // With the fields of every answer, zero where nothing moved: one shape to read.
    for (const nlohmann::json* answer : {&restoreFirst, &restoredAgain}) {
        EXPECT_EQ(answer->at("body").at("bytes"), 0) << *answer;
        EXPECT_EQ(answer->at("body").at("freed_bytes"), 0) << *answer;
        EXPECT_FALSE(answer->at("body").at("parked").get<bool>()) << *answer;
    }
    EXPECT_EQ(yieldedAgain.at("body").at("bytes"), 0);
    EXPECT_EQ(yieldedAgain.at("body").at("cached_bytes"), 0);
    EXPECT_TRUE(yieldedAgain.at("body").at("parked").get<bool>());

    // The yield: parameters, gradients and Adam's two moments at least; the
    // process's resident memory fell by no less than what memtool says it took.
    ASSERT_EQ(yieldCode, 0) << yieldText;
    EXPECT_EQ(yieldText.rfind("yield: ", 0), 0u) << yieldText;
    EXPECT_NE(yieldText.find("  cpu "), std::string::npos) << yieldText;
    EXPECT_NE(yieldText.find("content backed up: CPU memory to disk"), std::string::npos)
        << yieldText;
    const std::string bytesText = yieldText.substr(yieldText.find('(') + 1);
    const uint64_t yieldedBytes = std::stoull(bytesText);
    EXPECT_GE(yieldedBytes, 4 * params);
    // Where it went: all of what had content, to disk (the rest of the figure is
    // free blocks kept for reuse, let go with no backup).
    const size_t backups = yieldText.find("\n  backups: ");
    ASSERT_NE(backups, std::string::npos) << yieldText;
    const uint64_t toDisk = std::stoull(yieldText.substr(yieldText.find('(', backups) + 1));
    EXPECT_GE(toDisk, 4 * params);
    EXPECT_LE(toDisk, yieldedBytes);
    EXPECT_EQ(yieldText.find(" bytes) to disk\n", backups), yieldText.find(" bytes)", backups))
        << yieldText;
    // Within 1 MiB: the process touches a few pages meanwhile (the collector
    // answering, the script polling for its flag; under ASan's allocator the
    // fall was once 8 KiB short of 442 MB).
    EXPECT_GE(rssBefore - rssYielded + (uint64_t{1} << 20), yieldedBytes);

    // The restore brings back every paused allocation (not the free blocks memtool
    // kept for reuse: they were let go at the yield).
    ASSERT_EQ(restoreCode, 0) << restored.dump();
    const auto& body = restored.at("body");
    EXPECT_TRUE(body.at("changed").get<bool>());
    EXPECT_GE(body.at("bytes").get<uint64_t>(), 4 * params);
    EXPECT_LE(body.at("bytes").get<uint64_t>(), yieldedBytes);
    ASSERT_EQ(body.at("devices").size(), 1u);
    EXPECT_EQ(body.at("devices").at(0).at("device"), "cpu");
    // The process's RSS moves by pages of its own meanwhile too: on loaded CI runs the
    // rise fell 1,073,152 B (the torch 1.13 twin) and 8,966,144 B short of the
    // ~404 MB restored, cause not established; alone it never has. With 16 MiB of
    // slack, a restore that claimed more than one weight (16 MiB) it did not bring
    // back still fails.
    EXPECT_GE(rssRestored - rssYielded + (uint64_t{16} << 20), body.at("bytes").get<uint64_t>());

    // Step for step, the same losses as without memtool.
    EXPECT_EQ(readFile(losses), readFile(bareLosses));
    const std::string lossText = readFile(losses);
    EXPECT_EQ(std::count(lossText.begin(), lossText.end(), '\n'), 4);

    // The trace has the yield and the restore, from ctl, on the cpu.
    const auto p = readJson(trace).at("processes").at(0);
    EXPECT_TRUE(p.at("complete").get<bool>());
    ASSERT_EQ(p.at("control").size(), 2u) << p.at("control").dump();
    EXPECT_EQ(p.at("control").at(0).at("action"), "yield");
    EXPECT_EQ(p.at("control").at(0).at("origin"), "ctl");
    EXPECT_EQ(p.at("control").at(0).at("backup"), "disk");
    EXPECT_EQ(p.at("control").at(1).at("action"), "restore");
    EXPECT_EQ(p.at("control").at(1).at("bytes"), body.at("bytes"));
    EXPECT_EQ(p.at("regions").at(0).at("tag"), "default");
}

// A main thread that sits in a system call never reaches a safe point: yield
// says so after its wait, and nothing is taken; the program later goes on and
// ends as it would have.
// A thread that is inside an op (the GIL released) when the main thread is
// parked runs on into memory the yield takes. It waits for restore instead of
// ending the program with SIGSEGV (it did, 3 times out of 3, before), and what it
// wrote is neither lost nor half backed up: every sort comes out right.
TEST(Courtesy, AThreadInsideAnOpWaitsForRestoreAndItsResultIsRight) {
    const std::string dir = tempDir();
    const std::string flag = dir + "/go";
    nlohmann::json yielded, restored;
    int yieldCode = -1, restoreCode = -1;
    uint64_t waiting = 0;
    bool sorting = false;
    std::string statusText;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", dir + "/t.json", "--",
                     PYTHON_BIN, script("courtesy_threads.py"), flag},
                    "", controlEnv(), [&](pid_t, const std::string& first) {
                        std::istringstream words(first);
                        std::string ready, pid;
                        words >> ready >> pid;
                        ASSERT_EQ(ready, "ready") << first;
                        // The yield comes inside a sort: once its output (32 MiB of
                        // values, 64 MiB of indices) is allocated beside the two
                        // inputs. The restore comes once the sorting thread waits
                        // for it, having touched what the yield took.
                        sorting = askStatusUntil(pid, [](const nlohmann::json& body) {
                            return regionBytes(body) >= 160 * MiB;
                        });
                        yielded = ctlJson(pid, {"yield", "--to", "disk"}, &yieldCode);
                        askStatusUntil(pid, [&](const nlohmann::json& body) {
                            waiting = body.value("threads_waiting", uint64_t{0});
                            return waiting > 0;
                        });
                        statusText = ctl({pid, "status"}, controlEnv()).out;
                        restored = ctlJson(pid, {"restore"}, &restoreCode);
                        std::ofstream(flag) << "go\n";
                    });
    EXPECT_TRUE(sorting) << "the sort's output never showed in ctl status";
    EXPECT_EQ(yieldCode, 0) << yielded.dump();
    EXPECT_EQ(restoreCode, 0) << restored.dump();
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // The shuffled and expected tensors (32 MiB each) and the sort's output at
    // least went and came back.
    EXPECT_GE(yielded.at("body").at("bytes").get<uint64_t>(), 96 * MiB) << yielded.dump();
    // What the yield took came back, but for free blocks memtool kept for reuse
    // (the last sort's buffers, freed before the yield let them go) and what the
    // sorting thread freed after it (inside its op, the main thread parked).
    EXPECT_EQ(restored.at("body").at("bytes").get<uint64_t>() +
                  restored.at("body").at("freed_bytes").get<uint64_t>() +
                  yielded.at("body").at("cached_bytes").get<uint64_t>(),
              yielded.at("body").at("bytes").get<uint64_t>())
        << restored.dump() << yielded.dump();
    // The sorting thread, inside its sort when the main thread parked, touched
    // what was taken and waited: status said so before the restore let it go.
    EXPECT_GE(waiting, 1u) << "no thread waited for the restore";
    EXPECT_NE(statusText.find("touched yielded memory and wait"), std::string::npos) << statusText;
    const uint64_t waited = restored.at("body").at("threads_waited").get<uint64_t>();
    EXPECT_GE(waited, waiting) << restored.dump();
    std::istringstream out(o.out.substr(o.out.find('\n') + 1));
    std::string word, rest;
    uint64_t sorts = 0;
    out >> word >> sorts;
    std::getline(out, rest);
    EXPECT_EQ(word, "sorts") << o.out;
    EXPECT_GE(sorts, 1u);
    EXPECT_EQ(rest, " all right: True") << o.out << "threads waited: " << waited;
}

TEST(Courtesy, YieldOfAProgramBlockedInASystemCallTimesOut) {
    const std::string trace = tempDir() + "/t.json";
    Outcome y;
    nlohmann::json status;
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", trace, "--", PYTHON_BIN,
                     script("wait_for_term.py")},
                    "", controlEnv(), [&](pid_t memtool, const std::string& first) {
                        ASSERT_EQ(first, "ready");
                        // The target is memtool's only child.
                        std::ifstream children("/proc/" + std::to_string(memtool) + "/task/" +
                                               std::to_string(memtool) + "/children");
                        pid_t target = 0;
                        children >> target;
                        y = ctl({std::to_string(target), "yield", "--wait", "0.5"}, controlEnv());
                        int code = 0;
                        status = ctlJson(std::to_string(target), {"status"}, &code);
                        kill(target, SIGTERM);
                    });
    EXPECT_EQ(y.exitCode, 1);
    EXPECT_EQ(y.out, "");
    EXPECT_EQ(y.err,
              "memtool: yield failed: the program's main thread did not reach a safe point within "
              "0.5 s (it may be blocked in a system call: a sleep, I/O, a lock); nothing was "
              "yielded\n");
    // Nothing was paused.
    ASSERT_TRUE(status.at("body").at("regions").is_array()) << status.dump();
    for (const auto& region : status.at("body").at("regions"))
        EXPECT_EQ(region.at("state"), "resident") << status.dump();
    // The program's own ending, untouched: its handler ran and it exited 7.
    EXPECT_EQ(o.exitCode, 7) << o.err;
    EXPECT_EQ(o.out, "ready\ngot SIGTERM\n");
    EXPECT_TRUE(readJson(trace).at("processes").at(0).at("control").empty());
}

TEST(Courtesy, ThePythonApiYieldsAndRestoresInProcess) {
    const std::string trace = tempDir() + "/t.json";
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", trace, "--", PYTHON_BIN,
                     script("courtesy_api.py")},
                    "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // The one 64 MiB storage is all the program's CPU memory at that point.
    EXPECT_EQ(o.out,
              "yield True True 67108864 1 True\n"
              "again the program has yielded already; nothing done\n"
              "restore True 67108864 1\n"
              "intact True\n"
              "restore again the program has not yielded; nothing to restore\n");
    const auto p = readJson(trace).at("processes").at(0);
    ASSERT_EQ(p.at("control").size(), 2u);
    EXPECT_EQ(p.at("control").at(0).at("action"), "yield");
    EXPECT_EQ(p.at("control").at(0).at("origin"), "api");
    EXPECT_EQ(p.at("control").at(0).at("bytes"), 64 * MiB);
}

TEST(Courtesy, WithoutPausableAllThereIsNothingToYield) {
    Outcome o = run({MEMTOOL_BIN, "run", "-q", "-o", tempDir() + "/t.json", "--", PYTHON_BIN,
                     script("courtesy_api.py")},
                    "", controlEnv());
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // Nothing released, so the line's last figure (the resident bytes given back
    // cover the answer's) says nothing here: with 0 bytes to cover it is only
    // whether the interpreter touched under 64 KiB of new pages meanwhile, and a
    // new pymalloc arena can take more (CI saw it fail so, once).
    EXPECT_EQ(o.out.substr(0, o.out.find("0 0 ") + 4), "yield True False 0 0 ");
    EXPECT_NE(o.out.find("again nothing to yield: no region holds resident memory (under `memtool "
                         "run --pausable all` every allocation is in one)\n"),
              std::string::npos)
        << o.out;
}

// A C++ program: refused unless it marks safe points through the C API; with
// them, it is parked at one and its memory yielded and restored. One asked before
// its stream connected and before its first mark (late: a second of start-up) was
// refused twice over: "does not run under memtool", then "marks no safe points".
TEST(Courtesy, ACppProgramIsYieldedOnlyAtTheSafePointsItMarks) {
    if (std::string(COURTESY_USER_BIN).empty()) GTEST_SKIP() << "built without LibTorch";
    for (const std::string mode : {"plain", "marks", "late"}) {
        Outcome y, r;
        uint64_t rssBefore = 0, rssYielded = 0;
        Outcome o = run({MEMTOOL_BIN, "run", "-q", "--pausable", "all", "-o", tempDir() + "/t.json",
                         "--", COURTESY_USER_BIN, mode},
                        "", controlEnv(), [&](pid_t, const std::string& first) {
                            std::istringstream words(first.substr(6));
                            std::string pid;
                            uint64_t address = 0;
                            words >> pid >> std::hex >> address;
                            if (address) rssBefore = mappingRssOf(std::stoi(pid), address);
                            y = mode == "plain" ? ctl({pid, "yield", "--wait", "0.5"}, controlEnv())
                                                : ctl({pid, "yield"}, controlEnv());
                            if (address) rssYielded = mappingRssOf(std::stoi(pid), address);
                            r = ctl({pid, "restore"}, controlEnv());
                            kill(std::stoi(pid), SIGUSR1);
                        });
        ASSERT_EQ(o.exitCode, 0) << mode << o.err;
        EXPECT_EQ(o.out.substr(o.out.find('\n') + 1), "intact 1\n") << mode;
        if (mode == "plain") {
            EXPECT_EQ(y.exitCode, 1);
            EXPECT_EQ(y.err,
                      "memtool: yield failed: this program runs no Python interpreter and marked "
                      "no safe point within 0.5 s (memtool_safe_point() in the collector's C "
                      "API); yield is refused\n");
            EXPECT_EQ(r.out, "restore: the program has not yielded; nothing to restore\n");
        } else {
            EXPECT_EQ(y.exitCode, 0) << mode << y.err;
            EXPECT_EQ(y.out.rfind("yield: 64.00 MiB (67108864 bytes) in ", 0), 0u) << y.out;
            if (mode == "marks") {
                EXPECT_GE(rssBefore - rssYielded, 64 * MiB);
            }
            EXPECT_EQ(r.exitCode, 0) << r.err;
            EXPECT_EQ(r.out.rfind("restore: 64.00 MiB (67108864 bytes) in ", 0), 0u) << r.out;
        }
    }
}
