// `pytest --memtool` (python/memtool/_pytest.py) on a suite written for it with
// pytest-memray's markers, and the magics of a notebook executed headless
// (python/memtool/_ipython.py, through nbclient and an ipykernel).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {

// The suite, copied where pytest may write; returns its directory.
std::string suiteCopy() {
    const std::string dir = tempDir() + "/suite";
    std::filesystem::copy(script("pytest_suite"), dir, std::filesystem::copy_options::recursive);
    return dir;
}

// pytest on `files` in `dir` with memtool's plugin (pytest-memray's, installed
// beside it, off: both would patch the same allocator).
Outcome pytest(const std::string& dir, const std::vector<std::string>& args,
               const std::vector<std::string>& extraEnv = {}) {
    std::vector<std::string> argv{PYTHON_BIN, "-m", "pytest", "-q"};
    for (const char* plugin : {"no:cacheprovider", "no:memray", "memtool._pytest"})
        argv.insert(argv.end(), {"-p", plugin});
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = packageEnv();
    env.push_back("PYTHONDONTWRITEBYTECODE=1");
    env.insert(env.end(), extraEnv.begin(), extraEnv.end());
    return run(argv, "", env, nullptr, dir);
}

bool mentions(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

// The markers fail exactly the tests over their limits, saying the peak, the
// limit and the sites that held the most; JUnit XML gets each test's figures.
TEST(PytestPlugin, MarkersFailTestsOverTheirLimitsSayingWhereTheMemoryWas) {
    SKIP_WITHOUT("pytest");
    const std::string dir = suiteCopy();
    const Outcome o =
        pytest(dir, {"--memtool", "--junitxml=" + dir + "/junit.xml", "test_limits.py"});
    EXPECT_EQ(o.exitCode, 1) << o.out << o.err;  // tests failed
    EXPECT_TRUE(mentions(o.out, "2 failed, 4 passed")) << o.out;
    EXPECT_TRUE(
        mentions(o.out,
                 "memtool: Test peaked at 2.96 MiB (3,100,000 B) on cpu, reaching its limit of "
                 "2.00 MiB (2,097,152 B); the sites that held the most then:\n"
                 "    2.86 MiB at test_over_limit (" +
                     dir + "/test_limits.py:17)\n    97.66 KiB at test_over_limit (" + dir +
                     "/test_limits.py:18)\n"))
        << o.out;
    EXPECT_TRUE(
        mentions(o.out,
                 "memtool: Test was allowed to leak 1.00 MiB per site but 1 site leaked more:\n"
                 "    1.91 MiB on cpu at keep_forever (" +
                     dir + "/test_limits.py:29)\n"))
        << o.out;
    EXPECT_TRUE(mentions(o.out, "FAILED test_limits.py::test_over_limit"));
    EXPECT_TRUE(mentions(o.out, "FAILED test_limits.py::test_leaks"));
    EXPECT_FALSE(mentions(o.out, "FAILED test_limits.py::test_leak_filtered"));  // its filter_fn
    EXPECT_FALSE(mentions(o.out, "FAILED test_limits.py::test_under_limit"));
    const std::string junit = readFile(dir + "/junit.xml");
    EXPECT_TRUE(mentions(junit, "<property name=\"memtool.peak.cpu\" value=\"3100000\" />"))
        << junit;
    EXPECT_TRUE(mentions(junit, "<property name=\"memtool.leaked.cpu\" value=\"2000000\" />"));
    EXPECT_TRUE(mentions(junit, "<property name=\"memtool.count.cpu\" value=\"2\" />"));
}

// The table lists every test, largest first, a forked worker on rows of its own.
TEST(PytestPlugin, TheTableListsEveryTestAndEachWorkerOfOne) {
    SKIP_WITHOUT("pytest");
    const std::string dir = suiteCopy();
    const Outcome o = pytest(dir, {"--memtool", "--memtool-save", dir + "/saved.json",
                                   "test_workers.py", "test_limits.py::test_small"});
    EXPECT_EQ(o.exitCode, 0) << o.out << o.err;
    const size_t workers = o.out.find(
        "  976.57 KiB   976.57 KiB          0 B       5  cpu      "
        "test_workers.py::test_workers\n");
    const size_t small = o.out.find(
        "      1000 B       1000 B          0 B       1  cpu      "
        "test_limits.py::test_small\n");
    ASSERT_NE(workers, std::string::npos) << o.out;
    ASSERT_NE(small, std::string::npos) << o.out;
    EXPECT_LT(workers, small);
    size_t forked = 0;
    for (size_t at = o.out.find(", forked)"); at != std::string::npos;
         at = o.out.find(", forked)", at + 1))
        ++forked;
    EXPECT_EQ(forked, 4u) << o.out;  // two workers, a cpu and a shared row each
    const nlohmann::json saved = readJson(dir + "/saved.json");
    EXPECT_EQ(saved.at("schema"), "memtool.pytest/1");
    const auto& w = saved.at("tests").at("test_workers.py::test_workers");
    // The main process's 4 x 250,000-byte items and the 8 bytes the DataLoader's
    // iterator allocates, and each worker's byte; each worker's batch of 2 x 250,000
    // in shared memory.
    EXPECT_EQ(w.at("peak").at("cpu"), 1000008 + 2);
    EXPECT_EQ(w.at("peak").at("shared"), 1000000);
}

// A baseline from an earlier run: a test whose peak grew past the allowed
// increase fails, saying from what to what.
TEST(PytestPlugin, ABaselineFailsATestWhosePeakGrew) {
    SKIP_WITHOUT("pytest");
    const std::string dir = suiteCopy();
    const std::string saved = dir + "/base.json";
    const Outcome before =
        pytest(dir, {"--memtool", "--memtool-save", saved, "test_limits.py::test_grows"});
    ASSERT_EQ(before.exitCode, 0) << before.out << before.err;
    const Outcome within = pytest(dir,
                                  {"--memtool", "--memtool-baseline", saved,
                                   "--memtool-max-increase", "10%", "test_limits.py::test_grows"},
                                  {"GROW=11000"});
    EXPECT_EQ(within.exitCode, 0) << within.out;
    const Outcome grown = pytest(dir,
                                 {"--memtool", "--memtool-baseline", saved,
                                  "--memtool-max-increase", "5%", "test_limits.py::test_grows"},
                                 {"GROW=11000"});
    EXPECT_EQ(grown.exitCode, 1) << grown.out;
    EXPECT_TRUE(
        mentions(grown.out,
                 "memtool: Test's peak on cpu grew from 10,000 B to 11,000 B (+10.0%), past the "
                 "allowed 5%"))
        << grown.out;
    // --memtool-limit: every test without a limit of its own.
    const Outcome limited =
        pytest(dir, {"--memtool", "--memtool-limit", "9 KB", "test_limits.py::test_grows",
                     "test_limits.py::test_small"});
    EXPECT_EQ(limited.exitCode, 1) << limited.out;
    EXPECT_TRUE(mentions(limited.out, "1 failed, 1 passed")) << limited.out;
    EXPECT_TRUE(mentions(limited.out, "reaching its limit of 9.00 KiB (9,216 B)")) << limited.out;
}

// What the plugin cannot read is a usage error (exit 4) naming the test and the value.
TEST(PytestPlugin, BadSizesDevicesAndBaselinesAreUsageErrors) {
    SKIP_WITHOUT("pytest");
    const std::string dir = suiteCopy();
    const Outcome size = pytest(dir, {"--memtool", "test_bad_size.py"});
    EXPECT_EQ(size.exitCode, 4);
    EXPECT_TRUE(
        mentions(size.err + size.out,
                 "test_bad_size.py::test_bad: @pytest.mark.limit_memory: '24 MiB' is not a size"))
        << size.err << size.out;
    const Outcome device = pytest(dir, {"--memtool", "test_bad_device.py"});
    EXPECT_EQ(device.exitCode, 4);
    EXPECT_TRUE(mentions(device.err + device.out,
                         "test_bad_device.py::test_no_such_gpu: @pytest.mark.limit_memory: device "
                         "cuda:7 does not exist here"))
        << device.err << device.out;
    const Outcome baseline = pytest(dir, {"--memtool", "--memtool-baseline",
                                          dir + "/test_small_missing.json", "test_limits.py"});
    EXPECT_EQ(baseline.exitCode, 4);
    EXPECT_TRUE(mentions(baseline.err + baseline.out,
                         "--memtool-baseline " + dir + "/test_small_missing.json: cannot be read"))
        << baseline.err;
    const Outcome limit = pytest(dir, {"--memtool", "--memtool-limit", "lots", "test_limits.py"});
    EXPECT_EQ(limit.exitCode, 4);
    EXPECT_TRUE(mentions(limit.err + limit.out, "--memtool-limit: 'lots' is not a size"))
        << limit.err;
}

// Without --memtool the plugin does nothing: the markers are known, no test is tracked.
TEST(PytestPlugin, OffUnlessAsked) {
    SKIP_WITHOUT("pytest");
    const std::string dir = suiteCopy();
    const Outcome o = pytest(dir, {"test_limits.py"});
    EXPECT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_TRUE(mentions(o.out, "6 passed")) << o.out;
    EXPECT_FALSE(mentions(o.out, "memtool")) << o.out;
}

// A notebook executed headless: %%memtool's cell shows the report (the HTML page
// inline, the text beside it), %memtool one statement's, %memtool_tensors the
// kernel's tensors.
TEST(PytestPlugin, ANotebooksMagicsShowTheirReportsInTheCells) {
    SKIP_WITHOUT("nbclient", "nbformat", "ipykernel");
    const Outcome o = runNotebook(tempDir());
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    EXPECT_TRUE(mentions(o.out, "--- cell 2 display_data html\n")) << o.out;
    EXPECT_TRUE(mentions(o.out, "cpu                            3,500,000 B    ")) << o.out;
    EXPECT_TRUE(mentions(o.out,
                         "  1       3,000,000 B       3,000,000 B        1       3,000,000 B  "
                         "<module> (In3.py:1)"))
        << o.out;
    EXPECT_TRUE(mentions(o.out, "--- cell 3 stream\n")) << o.out;
    EXPECT_TRUE(
        mentions(o.out,
                 "     1            1,000 B            1,000 B            1,000 B        1  "
                 "z = torch.empty(1_000, dtype=torch.uint8)"))
        << o.out;
    EXPECT_TRUE(mentions(o.out, "--- cell 4 stream\nStorage on cpu\n  x ")) << o.out;
    EXPECT_TRUE(mentions(o.out, "  Python-visible: 3,001,000 B")) << o.out;
}
