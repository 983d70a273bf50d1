// memtool check and memtool diff on traces with known numbers.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;
using nlohmann::json;

namespace {

json device(uint64_t peak, uint64_t allocated, uint64_t leaked) {
    return {{"peak_bytes", peak},
            {"current_bytes", leaked},
            {"allocated_bytes", allocated},
            {"freed_bytes", allocated - leaked},
            {"alloc_count", 1},
            {"free_count", 1}};
}

json hotspot(const std::string& site, uint64_t peak, uint64_t allocated) {
    return {
        {"device", "cpu"}, {"site", site},       {"stack", {site}},  {"allocated_bytes", allocated},
        {"count", 1},      {"peak_bytes", peak}, {"leaked_bytes", 0}};
}

std::string writeTrace(uint64_t cpuPeak, bool complete = true, json hotspots = json::array(),
                       const std::string& cwd = "/src") {
    json proc = {{"pid", 1},
                 {"command", {"python3", "train.py"}},
                 {"cwd", cwd},
                 {"exit_code", 0},
                 {"complete", complete},
                 {"duration_s", 1.0},
                 {"devices",
                  {{"cpu", device(cpuPeak, 2 * cpuPeak, 100)}, {"cuda:0", device(1000, 2000, 0)}}},
                 {"hotspots", hotspots},
                 {"lines", json::array()}};
    if (!complete) proc["incomplete_reason"] = "the process was killed by signal 9";
    std::string path = tempDir() + "/trace.json";
    std::ofstream(path) << json{{"schema", "memtool.trace/1"}, {"processes", {proc}}}.dump();
    return path;
}

Outcome check(const std::vector<std::string>& args) {
    std::vector<std::string> argv{MEMTOOL_BIN, "check"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

}  // namespace

TEST(Check, UnderAndOverALimit) {
    std::string t = writeTrace(5000000);
    Outcome under = check({t, "--max-peak", "cpu=5000000"});
    EXPECT_EQ(under.exitCode, 0) << under.out << under.err;
    EXPECT_EQ(under.out,
              "PASS  cpu peak 4.77 MiB (5000000 bytes) is within 4.77 MiB (5000000 bytes)\n"
              "memtool check: 1 check, 0 failed\n");
    Outcome over = check({t, "--max-peak", "cpu=4999999"});
    EXPECT_EQ(over.exitCode, 1);
    EXPECT_EQ(over.out,
              "FAIL  cpu peak 4.77 MiB (5000000 bytes) exceeds 4.77 MiB (4999999 bytes) by 1 B (1 "
              "bytes)\n"
              "memtool check: 1 check, 1 failed\n");
}

TEST(Check, EverySizeSyntax) {
    std::string t = writeTrace(5000000);
    for (const char* limit :
         {"cpu=123456", "cpu=512MiB", "cpu=2GB", "cpu=1.5GiB", "cpu=4.5MiB", "cpu=5MB"}) {
        Outcome o = check({t, "--max-peak", limit});
        // 5,000,000 bytes passes every limit but 123456 and 4.5MiB (4,718,592).
        bool shouldPass = std::string(limit) != "cpu=123456" && std::string(limit) != "cpu=4.5MiB";
        EXPECT_EQ(o.exitCode, shouldPass ? 0 : 1) << limit << "\n" << o.out;
    }
    Outcome exactSi = check({t, "--max-peak", "cpu=5MB"});
    EXPECT_NE(exactSi.out.find("within 4.77 MiB (5000000 bytes)"), std::string::npos)
        << exactSi.out;
}

TEST(Check, BadTokensAreUsageErrors) {
    std::string t = writeTrace(5000000);
    Outcome size = check({t, "--max-peak", "cpu=12XB"});
    EXPECT_EQ(size.exitCode, 2);
    EXPECT_EQ(size.err,
              "memtool: bad size '12XB' (use bytes or a unit: 123456, 512MiB, 2GB, 1.5GiB)\n");
    Outcome dev = check({t, "--max-peak", "gpu=1GB"});
    EXPECT_EQ(dev.exitCode, 2);
    EXPECT_EQ(dev.err,
              "memtool: bad device 'gpu' (use cpu, pinned, cuda, cuda:N, cuda:N.active or "
              "cuda:N.reserved)\n");
    Outcome inc = check({t, "--baseline", t, "--max-increase", "ten%"});
    EXPECT_EQ(inc.exitCode, 2);
    EXPECT_EQ(inc.err, "memtool: bad increase 'ten%' (use a percentage like 5% or a size)\n");
    Outcome lonely = check({t, "--baseline", t});
    EXPECT_EQ(lonely.exitCode, 2);
    // No limit and no baseline: the trace is checked for completeness and for
    // out-of-memory alone.
    Outcome nothing = check({t});
    EXPECT_EQ(nothing.exitCode, 0) << nothing.err;
    EXPECT_EQ(nothing.out,
              "PASS  the trace is complete\nPASS  no process ran out of memory\n"
              "memtool check: 2 checks, 0 failed\n");
    Outcome pools = check({t, "--max-peak", "cuda:0.reserved=1GB"});
    EXPECT_EQ(pools.exitCode, 2);
    EXPECT_NE(pools.err.find("no reserved figures for cuda:0"), std::string::npos) << pools.err;
}

TEST(Check, MissingOrInvalidBaseline) {
    std::string t = writeTrace(5000000);
    Outcome missing = check({t, "--baseline", "/nonexistent/base.json", "--max-increase", "5%"});
    EXPECT_EQ(missing.exitCode, 2);
    EXPECT_EQ(missing.err,
              "memtool: cannot open /nonexistent/base.json: No such file or directory\n");
    std::string bad = tempDir() + "/base.json";
    std::ofstream(bad) << "[1, 2";
    Outcome invalid = check({t, "--baseline", bad, "--max-increase", "5%"});
    EXPECT_EQ(invalid.exitCode, 2);
    EXPECT_EQ(invalid.err, "memtool: " + bad + ": not valid JSON\n");
}

TEST(Check, IncompleteTraceFailsUnlessAllowed) {
    std::string t = writeTrace(100, false);
    Outcome strict = check({t, "--max-peak", "cpu=1GB"});
    EXPECT_EQ(strict.exitCode, 1);
    EXPECT_NE(strict.out.find("FAIL  the trace is incomplete: the process was killed by signal 9"),
              std::string::npos);
    Outcome allowed = check({t, "--max-peak", "cpu=1GB", "--allow-incomplete"});
    EXPECT_EQ(allowed.exitCode, 0) << allowed.out;
}

TEST(Check, BaselineGrowth) {
    std::string base = writeTrace(5000000);
    Outcome same = check({base, "--baseline", base, "--max-increase", "0%"});
    EXPECT_EQ(same.exitCode, 0) << same.out;
    std::string grown = writeTrace(5000001);
    Outcome oneByte = check({grown, "--baseline", base, "--max-increase", "0%"});
    EXPECT_EQ(oneByte.exitCode, 1);
    EXPECT_NE(
        oneByte.out.find(
            "FAIL  cpu peak 4.77 MiB (5000001 bytes), baseline 4.77 MiB (5000000 bytes): +1 B "
            "(+0.00%) exceeds the allowed 4.77 MiB (5000000 bytes) by 1 B (1 bytes)"),
        std::string::npos)
        << oneByte.out;
    // 5% of 5,000,000 is 250,000 bytes; by size likewise.
    std::string plus5 = writeTrace(5250000), plus5and1 = writeTrace(5250001);
    EXPECT_EQ(check({plus5, "--baseline", base, "--max-increase", "5%"}).exitCode, 0);
    EXPECT_EQ(check({plus5and1, "--baseline", base, "--max-increase", "5%"}).exitCode, 1);
    EXPECT_EQ(check({plus5, "--baseline", base, "--max-increase", "250000"}).exitCode, 0);
    EXPECT_EQ(check({plus5and1, "--baseline", base, "--max-increase", "250000"}).exitCode, 1);
    // --metric picks the figure: allocated is 2 x peak here.
    EXPECT_EQ(check({grown, "--metric", "allocated", "--max-peak", "cpu=10000002"}).exitCode, 0);
    EXPECT_EQ(check({grown, "--metric", "allocated", "--max-peak", "cpu=10000001"}).exitCode, 1);
    EXPECT_EQ(check({grown, "--metric", "leaked", "--max-peak", "cpu=100"}).exitCode, 0);
}

TEST(Check, CudaSelectorsAndJson) {
    std::string t = writeTrace(5000000);
    EXPECT_EQ(check({t, "--max-peak", "cuda=999"}).exitCode, 1);
    EXPECT_EQ(check({t, "--max-peak", "cuda:0=1000"}).exitCode, 0);
    EXPECT_EQ(check({t, "--max-peak", "cuda:1=1"}).exitCode, 0);  // never allocated: 0 bytes
    Outcome j = check({t, "--max-peak", "cpu=4MB", "--max-peak", "cuda=1KB", "--format", "json"});
    EXPECT_EQ(j.exitCode, 1);
    json r = json::parse(j.out);
    EXPECT_FALSE(r.at("passed").get<bool>());
    ASSERT_EQ(r.at("checks").size(), 2u);
    EXPECT_EQ(r.at("checks")[0].at("excess_bytes"), 1000000);
    EXPECT_EQ(r.at("checks")[1].at("device"), "cuda:0");
    EXPECT_TRUE(r.at("checks")[1].at("passed").get<bool>());
}

TEST(Check, JunitIsValidXml) {
    std::string t = writeTrace(5000000);
    std::string xml = tempDir() + "/report.xml";
    Outcome o = check(
        {t, "--max-peak", "cpu=4MB", "--max-peak", "cuda:0=1KB", "--format", "junit", "-o", xml});
    EXPECT_EQ(o.exitCode, 1);
    // A real XML parser reads it back: two test cases, one failure carrying the numbers.
    Outcome parsed = run({PYTHON_BIN, "-c",
                          "import sys, xml.etree.ElementTree as ET\n"
                          "root = ET.parse(sys.argv[1]).getroot()\n"
                          "suite = root.find('testsuite')\n"
                          "cases = suite.findall('testcase')\n"
                          "fails = [c.find('failure').get('message') for c in cases if "
                          "c.find('failure') is not None]\n"
                          "print(root.tag, suite.get('tests'), suite.get('failures'), len(cases))\n"
                          "print(fails[0])\n",
                          xml});
    ASSERT_EQ(parsed.exitCode, 0) << parsed.err;
    EXPECT_EQ(parsed.out,
              "testsuites 2 1 2\n"
              "cpu peak 4.77 MiB (5000000 bytes) exceeds 3.81 MiB (4000000 bytes) by 976.56 KiB "
              "(1000000 bytes)\n");
}

TEST(Diff, DevicesAndGrownSites) {
    std::string base = writeTrace(5000000, true,
                                  {hotspot("load (/src/train.py:10)", 3000000, 3000000),
                                   hotspot("step (/src/train.py:20)", 2000000, 4000000),
                                   hotspot("at::native::foo(long) (foo.cpp:7)", 0, 100)},
                                  "/src");
    // Another checkout, another path; foo.cpp's line moved.
    std::string next = writeTrace(6000000, true,
                                  {hotspot("load (/ci/build/train.py:10)", 3000000, 3000000),
                                   hotspot("step (/ci/build/train.py:20)", 2500000, 5000000),
                                   hotspot("augment (/ci/build/train.py:33)", 500000, 500000),
                                   hotspot("at::native::foo(long) (foo.cpp:9)", 0, 100)},
                                  "/ci/build");
    Outcome o = run({MEMTOOL_BIN, "diff", base, next, "--format", "json"});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    json d = json::parse(o.out);
    const json& cpu = d.at("devices")[0];
    EXPECT_EQ(cpu.at("device"), "cpu");
    EXPECT_EQ(cpu.at("peak_delta_bytes"), 1000000);
    EXPECT_EQ(cpu.at("allocated_delta_bytes"), 2000000);
    EXPECT_EQ(cpu.at("leaked_delta_bytes"), 0);
    const json& sites = d.at("sites");
    ASSERT_EQ(sites.size(), 2u) << sites.dump(1);
    EXPECT_EQ(sites[0].at("site"), "step (train.py:20)");
    EXPECT_EQ(sites[0].at("peak_delta_bytes"), 500000);
    EXPECT_FALSE(sites[0].at("new").get<bool>());
    EXPECT_EQ(sites[1].at("site"), "augment (train.py:33)");
    EXPECT_TRUE(sites[1].at("new").get<bool>());

    Outcome text = run({MEMTOOL_BIN, "diff", base, next});
    EXPECT_NE(text.out.find("+976.56 KiB   +20.00%"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("augment (train.py:33)  [new]"), std::string::npos) << text.out;
}
