// `memtool report --format html` opened in a real browser: headless Chromium
// (Debian's `chromium`, installed by scripts/setup.sh) loads the page with a probe
// script appended (tests/e2e/html/probe.js), which reads the charts and tables,
// sorts a table, zooms a flame graph and hovers; `--dump-dom` brings back what it
// found. The page must load without a script error or a refused request.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;
using nlohmann::json;

namespace {

size_t occurrences(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// memtool report TRACE --format html [extra], run in `dir` (where the trace's
// relative source paths lead); the page's text.
std::string renderHtml(const std::string& dir, const std::string& trace, const std::string& out,
                       const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{MEMTOOL_BIN, "report", trace, "--format", "html", "-o", out};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Outcome o = run(argv, "", {}, nullptr, dir);
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "");
    return readFile(out);
}

// Nothing in the page can reach the network: the policy forbids it, and nothing asks.
void expectSelfContained(const std::string& page) {
    EXPECT_NE(page.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
                        "'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'\">"),
              std::string::npos);
    for (const char* fetches : {"<link", " src=", "url(", "@import", "fetch(", "XMLHttpRequest"})
        EXPECT_EQ(page.find(fetches), std::string::npos) << fetches;
    // Links go to the page's own sections (the process overview's), never elsewhere.
    EXPECT_EQ(occurrences(page, " href="), occurrences(page, " href=\"#process-"));
    // The only URL is the SVG namespace, a name rather than a request.
    EXPECT_EQ(occurrences(page, "http:") + occurrences(page, "https:"),
              occurrences(page, "http://www.w3.org/2000/svg"));
}

// The page with the probe appended, loaded in headless Chromium: what the probe found.
json probe(const std::string& page, const std::string& dir, const std::string& windowSize) {
    const std::string chromium = CHROMIUM_BIN;
    if (chromium.empty() || access(chromium.c_str(), X_OK) != 0) {
        ADD_FAILURE() << "no chromium at '" << chromium
                      << "': scripts/setup.sh installs Debian's chromium (or set E2E_CHROMIUM_BIN)";
        return json();
    }
    const std::string probed = dir + "/probed.html";
    const size_t end = page.rfind("</body>");
    std::ofstream(probed) << page.substr(0, end) << "<script>\n"
                          << readFile(HTML_PROBE) << "</script>\n"
                          << page.substr(end);
    std::vector<std::string> argv{"timeout",
                                  "120",
                                  chromium,
                                  "--headless",
                                  "--no-sandbox",
                                  "--disable-gpu",
                                  "--user-data-dir=" + dir + "/chromium"};
    if (!windowSize.empty()) argv.push_back("--window-size=" + windowSize);
    argv.insert(argv.end(), {"--dump-dom", "file://" + probed});
    Outcome o = run(argv);
    EXPECT_EQ(o.exitCode, 0) << o.err;
    const std::string open = "<script type=\"application/json\" id=\"probe-result\">";
    const size_t from = o.out.find(open);
    if (from == std::string::npos) {
        ADD_FAILURE() << "the probe wrote nothing (did a script fail to parse?)\n" << o.out;
        return json();
    }
    const size_t to = o.out.find("</script>", from);
    return json::parse(o.out.substr(from + open.size(), to - from - open.size()));
}

// The page is self-contained and loads in the browser without a script error or a
// refused request; what the probe found, null when it found nothing.
json openInBrowser(const std::string& page, const std::string& dir,
                   const std::string& windowSize = "") {
    expectSelfContained(page);
    json r = probe(page, dir, windowSize);
    if (r.is_null()) return r;
    EXPECT_EQ(r.at("rendered"), "ok");
    EXPECT_EQ(r.at("errors"), "");
    return r;
}

json findByDevice(const json& list, const std::string& device, const std::string& metric = "") {
    for (const json& e : list)
        if (e.at("device") == device && (metric.empty() || e.at("metric") == metric)) return e;
    return json();
}

}  // namespace

TEST(HtmlReport, EveryPartOfTheTimelineFixtureShowsInABrowser) {
    const std::string dir = tempDir();
    const std::string page = renderHtml(GOLDEN_DIR, "traces/timeline.json", dir + "/report.html");
    const json r = openInBrowser(page, dir);
    ASSERT_FALSE(r.is_null());

    // A timeline per device, its pools on the device's chart, the peak marked, and the
    // region's pause, the failed and the good resume, and the OOM on cuda:0.
    ASSERT_EQ(r.at("timelines").size(), 2u);
    const json cpu = findByDevice(r.at("timelines"), "cpu");
    EXPECT_EQ(cpu.at("peak"), "peak 4.00 MiB at 0.050 s");
    EXPECT_EQ(cpu.at("series"), json::parse(R"json([["cpu", 2]])json"));
    EXPECT_EQ(cpu.at("marks"), json::array());
    const json cuda = findByDevice(r.at("timelines"), "cuda:0");
    EXPECT_EQ(cuda.at("peak"), "peak 52.00 MiB at 0.400 s");
    EXPECT_EQ(
        cuda.at("series"),
        json::parse(R"json([["cuda:0", 4], ["cuda:0.active", 5], ["cuda:0.reserved", 2]])json"));
    EXPECT_EQ(cuda.at("marks"), json::parse(R"json(["pause", "resume", "resume", "oom"])json"));
    EXPECT_EQ(cuda.at("legend"),
              "cuda:0, peak 52.00 MiBcuda:0.active, peak 40.00 MiBcuda:0.reserved, peak 52.00 "
              "MiBpauseresumeoom");

    // Two flame graphs per device: held at the peak, allocated over the run.
    ASSERT_EQ(r.at("flames").size(), 4u);
    const json cpuPeak = findByDevice(r.at("flames"), "cpu", "peak");
    EXPECT_EQ(cpuPeak.at("root"), json::parse(R"json(["all cpu (4.00 MiB)", 4194304])json"));
    EXPECT_EQ(cpuPeak.at("names"), json::parse(R"json(["all cpu (4.00 MiB)", "main (main.cpp:11)",
                              "c10::alloc_cpu (libc10.so.2.1)"])json"));
    const json cudaPeak = findByDevice(r.at("flames"), "cuda:0", "peak");
    EXPECT_EQ(cudaPeak.at("root"), json::parse(R"json(["all cuda:0 (52.00 MiB)", 54525952])json"));
    EXPECT_EQ(cudaPeak.at("frames"), 11);                         // the root and two stacks of five
    EXPECT_EQ(cudaPeak.at("names").at(1), "main (main.cpp:14)");  // 32 MiB, the wider, first
    EXPECT_EQ(findByDevice(r.at("flames"), "cuda:0", "allocated").at("root").at(1), 54525952);
    // The out-of-memory table comes right after the devices, before the charts.
    EXPECT_LT(page.find("<h2>Out of memory</h2>"), page.find("<h2>Timeline"));
    // "Python frames only": this C++ program's one cpu stack has none; unchecked,
    // the frames are back.
    EXPECT_EQ(r.at("pythonOnly"),
              json::parse(R"json(["all cpu (4.00 MiB)", "(no Python frame)"])json"));
    EXPECT_EQ(r.at("withNative"), cpuPeak.at("names"));

    // The tables, with the trace's figures.
    const json& tables = r.at("tables");
    EXPECT_EQ(
        tables.at("devices").at(1),
        json::parse(R"json(["cuda:0 (cupti)", "52.00 MiB", "0.400 s", "52.00 MiB", "52.00 MiB",
                              "0 B", "2", "0"])json"));
    EXPECT_EQ(tables.at("devices").at(2).at(0), "active");
    // As the text table has them: each site's device stack and its pool stacks
    // (which differ only below what a row shows) are one row, 2 rows in all.
    ASSERT_EQ(tables.at("hotspots:cuda:0").size(), 2u);
    EXPECT_EQ(
        tables.at("hotspots:cuda:0").at(0),
        json::parse(R"json(["1", "Model::forward (model.cpp:14)", "32.00 MiB", "32.00 MiB", "1",
                              "32.00 MiB", "24.00 MiB", "32.00 MiB"])json"));
    ASSERT_EQ(tables.at("lines").size(), 5u);
    EXPECT_EQ(tables.at("lines").at(4),
              json::parse(R"json(["cuda:0", "model.cpp", "14", "Model::forward()", "52.00 MiB",
                              "32.00 MiB", "32.00 MiB", "1",
                              "torch::Tensor activations = torch::empty({24 * kMiB}, kOnGpu);"])json"));
    EXPECT_EQ(tables.at("regions"),
              json::parse(R"json([["weights", "cuda:0", "host", "20.00 MiB", "0 B"]])json"));
    ASSERT_EQ(tables.at("control").size(), 3u);
    EXPECT_EQ(tables.at("control").at(1).at(8), "FAILED: out of memory");
    EXPECT_EQ(tables.at("oom"),
              json::parse(R"json([["0.720 s", "cuda:0", "8.00 GiB", "", "", ""]])json"));

    // What a reader does: sort by a column (largest first, then the other way round),
    // zoom into a frame and out again, hover a frame and the timeline.
    EXPECT_EQ(r.at("sortedOnce"),
              json::parse(R"json(["descending", ["32.00 MiB", "20.00 MiB"]])json"));
    EXPECT_EQ(r.at("sortedTwice"),
              json::parse(R"json(["ascending", ["20.00 MiB", "32.00 MiB"]])json"));
    EXPECT_EQ(r.at("zoom"), json::parse(R"json({"name": "c10::alloc_cpu (libc10.so.2.1)",
                                            "width": 959.5, "ancestors": 2})json"));
    EXPECT_EQ(r.at("zoomedOut"), 0);
    EXPECT_EQ(r.at("hoverTip"),
              "c10::alloc_cpu(unsigned long) (libc10.so.2.1)4.00 MiB (100% of all)");
    EXPECT_NE(r.at("timelineTip").get<std::string>().find("cpu: 4.00 MiB"), std::string::npos)
        << r.at("timelineTip");
}

// 2,281,701,376 B is 2.125 GiB: the tables (printf) write 2.12 GiB, and the flame
// graph's root, written by the page's script, said 2.13 GiB.
TEST(HtmlReport, ASizeOnATieReadsTheSameInTheTablesAndTheFlameGraph) {
    const std::string dir = tempDir();
    const uint64_t bytes = 2281701376;
    const json hotspot = {{"device", "cpu"},
                          {"site", "f (/src/a.py:1)"},
                          {"stack", {"f (/src/a.py:1)"}},
                          {"allocated_bytes", bytes},
                          {"count", 1},
                          {"peak_bytes", bytes},
                          {"leaked_bytes", 0}};
    const json process = {{"pid", 7},
                          {"command", {"python3", "a.py"}},
                          {"complete", true},
                          {"duration_s", 1.0},
                          {"devices",
                           {{"cpu",
                             {{"peak_bytes", bytes},
                              {"current_bytes", 0},
                              {"allocated_bytes", bytes},
                              {"freed_bytes", bytes},
                              {"alloc_count", 1},
                              {"free_count", 1}}}}},
                          {"hotspots", json::array({hotspot})}};
    std::ofstream(dir + "/t.json")
        << json{{"schema", "memtool.trace/1"}, {"processes", json::array({process})}}.dump();
    const std::string page = renderHtml(dir, dir + "/t.json", dir + "/report.html");
    EXPECT_NE(page.find("2.12 GiB"), std::string::npos);
    EXPECT_EQ(page.find("2.13 GiB"), std::string::npos);
    const json r = openInBrowser(page, dir);
    ASSERT_FALSE(r.is_null());
    EXPECT_EQ(findByDevice(r.at("flames"), "cpu", "peak").at("root"),
              json::array({"all cpu (2.12 GiB)", bytes}));
}

TEST(HtmlReport, AProfiledProgramsReportShowsItsFigures) {
    const std::string dir = tempDir();
    // Run and report where the script is, so that the line table reads it (SourceFiles.h).
    Profiled p = profile({PYTHON_BIN, script("storages.py")}, {}, SCRIPTS_DIR);
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    std::ofstream(dir + "/trace.json") << p.trace.dump();
    const std::string page = renderHtml(SCRIPTS_DIR, dir + "/trace.json", dir + "/report.html");
    const json r = openInBrowser(page, dir);
    ASSERT_FALSE(r.is_null());

    char peak[64];
    std::snprintf(peak, sizeof peak, "peak 4.77 MiB at %.3f s",
                  p.process().at("devices").at("cpu").at("peak_time_s").get<double>());
    ASSERT_EQ(r.at("timelines").size(), 1u);
    EXPECT_EQ(r.at("timelines").at(0).at("peak"), peak);  // 5,000,000 bytes
    const json flame = findByDevice(r.at("flames"), "cpu", "peak");
    EXPECT_EQ(flame.at("root").at(1), 5000000);
    EXPECT_EQ(findByDevice(r.at("flames"), "cpu", "allocated").at("root").at(1), 6000000);
    const json& lines = r.at("tables").at("lines");
    bool line4 = false;
    for (const json& row : lines)
        if (row.at(1) == "storages.py" && row.at(2) == "4") {
            line4 = true;
            EXPECT_EQ(row.at(4), "2.86 MiB");  // 3,000,000 bytes live right after it
            EXPECT_EQ(row.at(8), "a = torch.empty(3_000_000, dtype=torch.uint8)  # line 4");
        }
    EXPECT_TRUE(line4) << lines.dump();
}

// A page of several processes had no overview: it opens with a row per process now,
// linked to its section, with how it ended and its peaks.
TEST(HtmlReport, APageOfSeveralProcessesOpensWithOneRowEach) {
    const std::string dir = tempDir();
    Profiled p = profile({PYTHON_BIN, script("fork_once.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    ASSERT_EQ(p.trace.at("processes").size(), 2u);
    std::ofstream(dir + "/trace.json") << p.trace.dump();
    const std::string page = renderHtml(dir, dir + "/trace.json", dir + "/report.html");
    const json r = openInBrowser(page, dir);
    ASSERT_FALSE(r.is_null());
    const json& rows = r.at("tables").at("processes");
    ASSERT_EQ(rows.size(), 2u) << rows.dump();
    const std::string parent = std::to_string(p.trace.at("processes").at(0).at("pid").get<int>());
    const std::string child = std::to_string(p.trace.at("processes").at(1).at("pid").get<int>());
    // Process, rank, host, command, ended, peaks (and when, on one clock), OOMs.
    EXPECT_EQ(rows.at(0).at(0), "pid " + parent + " (launched)");
    EXPECT_EQ(rows.at(0).at(1), "-");
    EXPECT_EQ(rows.at(0).at(4), "exit code 0");
    const std::string parentPeak = rows.at(0).at(5);
    EXPECT_EQ(parentPeak.rfind("cpu 2.86 MiB at ", 0), 0u) << parentPeak;  // 3,000,000 bytes
    EXPECT_EQ(rows.at(1).at(0), "pid " + child + " (fork)");
    EXPECT_EQ(rows.at(1).at(4), "exit code 0");
    const std::string childPeak = rows.at(1).at(5);
    EXPECT_EQ(childPeak.rfind("cpu 4.77 MiB at ", 0), 0u) << childPeak;  // 5,000,000 of its own
    EXPECT_EQ(rows.at(1).at(6), "0");
    EXPECT_NE(page.find("<a href=\"#process-1\">pid " + child + "</a>"), std::string::npos);
    EXPECT_NE(page.find("<section class=\"process\" id=\"process-1\">"), std::string::npos);
}

// A job's ranks (tests/golden/traces/ranks.json: 4,000,000 and 7,000,000 B held at
// once): the page names the rank holding most, the spread and the host's combined
// peak, and draws both ranks' timelines on one chart.
TEST(HtmlReport, EveryRankOnOneChartWithTheRanksFigures) {
    const std::string dir = tempDir();
    const std::string page = renderHtml(GOLDEN_DIR, "traces/ranks.json", dir + "/report.html");
    const json r = openInBrowser(page, dir);
    ASSERT_FALSE(r.is_null());
    EXPECT_EQ(r.at("ranks"),
              json({"cpu: rank 1 holds most, 6.68 MiB on cpu; least rank 0, 3.81 MiB; spread "
                    "1.75×",
                    "node1 cpu: 2 processes held 10.49 MiB at once, 2.669 s in (their peaks sum "
                    "to 10.49 MiB)"}));
    ASSERT_EQ(r.at("ranksTimelines").size(), 1u);
    const json& cpu = r.at("ranksTimelines")[0];
    EXPECT_EQ(cpu.at("device"), "cpu");
    // Each rank's two points (its allocation, its free); the launcher allocated nothing.
    EXPECT_EQ(cpu.at("series"),
              json::parse(R"json([["rank 0 · pid 9505", 2], ["rank 1 · pid 9506", 2]])json"));
    const json& rows = r.at("tables").at("processes");
    ASSERT_EQ(rows.size(), 3u) << rows.dump();
    EXPECT_EQ(rows.at(0).at(0), "pid 9504 (launched)");
    EXPECT_EQ(rows.at(2).at(1), "1");
    EXPECT_EQ(rows.at(2).at(2), "node1");
    EXPECT_EQ(rows.at(2).at(5), "cpu 6.68 MiB at 2.669 s");
    // A trace per host read together stands in rank order: rank 0 first, not launched.
    const std::string two = renderHtml(GOLDEN_DIR, "traces/ranks-node1.json", dir + "/two.html",
                                       {"traces/ranks-node2.json"});
    EXPECT_NE(two.find("<a href=\"#process-0\">pid 9505</a></td><td>0</td><td>node1</td>"),
              std::string::npos);
    EXPECT_EQ(two.find("(launched)"), std::string::npos);
}

// The report a notebook cell shows (%%memtool, tests/e2e/scripts/notebook_run.py):
// its page, as the cell's frame holds it, opens in a browser with the cell's figures.
TEST(HtmlReport, ANotebookCellsReportShowsItsFiguresInABrowser) {
    SKIP_WITHOUT("nbclient", "nbformat", "ipykernel");
    const std::string dir = tempDir();
    const Outcome o = runNotebook(dir);
    ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
    const json r = openInBrowser(readFile(dir + "/executed.ipynb.cell.html"), dir);
    ASSERT_FALSE(r.is_null());
    // x (3,000,000 B) and y (500,000 B) live at once; y freed inside the cell.
    EXPECT_EQ(findByDevice(r.at("flames"), "cpu", "peak").at("root").at(1), 3500000);
    EXPECT_EQ(findByDevice(r.at("flames"), "cpu", "allocated").at("root").at(1), 3500000);
    ASSERT_EQ(r.at("timelines").size(), 1u);
}

// A source line longer than the page is wide wraps inside its cell: at 1400 px the
// line table made the page scroll sideways.
TEST(HtmlReport, ALongSourceLineDoesNotWidenThePage) {
    const std::string here = tempDir();
    const std::string code = "x = [" + std::string(400, '1') + "]";
    std::ofstream(here + "/a.py") << code << "\n";
    std::ofstream(here + "/trace.json")
        << R"json({"schema": "memtool.trace/1", "processes": [{"pid": 1, "command": ["x"],
        "cwd": ")json"
        << here
        << R"json(", "complete": true, "duration_s": 1.0, "devices": {"cpu": {"peak_bytes": 10,
        "current_bytes": 0, "allocated_bytes": 10, "freed_bytes": 10, "alloc_count": 1,
        "free_count": 1}}, "hotspots": [], "lines": [{"file": ")json"
        << here << R"json(/a.py", "line": 1, "function": "f", "device": "cpu", "peak_bytes": 10,
        "allocated_bytes": 10, "self_allocated_bytes": 10, "count": 1}]}]})json";
    const std::string page = renderHtml(here, here + "/trace.json", here + "/report.html");
    ASSERT_NE(page.find("<td class=\"code\">" + code + "</td>"), std::string::npos);
    const json r = openInBrowser(page, here, "1400,900");
    ASSERT_FALSE(r.is_null());
    EXPECT_EQ(r.at("windowWidth"), 1400);
    EXPECT_LE(r.at("pageWidth").get<int>(), 1400) << r.at("pageWidth");
}

// The line table's code column reads sources by the rule of `report --lines`
// (trace/SourceFiles.h): a trace naming a file outside both its cwd and the
// directory report runs in, or one without a directory of its own here that did
// not record the file, shows no code for it unless --read-any-file, and a device is
// never read (this page used to show any regular file the trace named).
TEST(HtmlReport, TheLineTableShowsOnlyTheProgramsOwnCodeUnlessReadAnyFile) {
    const std::string here = tempDir(), elsewhere = tempDir(), dir = tempDir();
    std::ofstream(here + "/a.py") << "x = 1\n";
    std::ofstream(elsewhere + "/secret.py") << "password = hunter2\n";
    auto row = [](const std::string& file) {
        return R"json({"file": ")json" + file +
               R"json(", "line": 1, "function": "f", "device": "cpu", "peak_bytes": 10,
               "allocated_bytes": 10, "self_allocated_bytes": 10, "count": 1})json";
    };
    // A crafted cwd of "/" would put every file inside it; it recorded a.py (its
    // hash is that of "x = 1\n", the file here), and the recorded code is shown.
    std::ofstream(dir + "/trace.json")
        << R"json({"schema": "memtool.trace/1", "processes": [{"pid": 1, "command": ["x"],
        "cwd": "/", "complete": true, "duration_s": 1.0, "devices": {"cpu": {"peak_bytes": 10,
        "current_bytes": 0, "allocated_bytes": 10, "freed_bytes": 10, "alloc_count": 1,
        "free_count": 1}}, "hotspots": [], "lines": [)json"
        << row(here + "/a.py") << "," << row(elsewhere + "/secret.py") << "," << row("/dev/zero")
        << R"json(], "sources": {")json" << here
        << R"json(/a.py": {"fnv1a64": "78a1ef167053da53", "lines": [[1, "x = 1"]]}}}]})json";
    auto lineTable = [](const std::string& page) {
        const size_t table = page.find("<table class=\"lines sortable\">");
        const size_t from = page.find("<tbody>\n", table), to = page.find("</tbody>", from);
        return table == std::string::npos ? std::string() : page.substr(from, to - from);
    };
    auto tr = [](const std::string& file, const std::string& code) {
        const std::string one = "<td class=\"num\" data-v=\"1\">1</td>";
        const std::string ten = "<td class=\"num\" data-v=\"10\">10 B</td>";
        return "<tr><td>cpu</td><td title=\"" + file + "\">" + file.substr(file.rfind('/') + 1) +
               "</td>" + one + "<td>f</td>" + ten + ten + ten + one + "<td class=\"code\">" + code +
               "</td></tr>\n";
    };

    const std::string page = renderHtml(here, dir + "/trace.json", dir + "/report.html");
    EXPECT_EQ(lineTable(page), "<tbody>\n" + tr(here + "/a.py", "x = 1") +
                                   tr(elsewhere + "/secret.py", "") + tr("/dev/zero", ""));
    const std::string library =
        renderHtml(here, dir + "/trace.json", dir + "/library.html", {"--all-files"});
    EXPECT_EQ(lineTable(library), lineTable(page));  // library rows only: nothing more read
    const std::string all =
        renderHtml(here, dir + "/trace.json", dir + "/all.html", {"--read-any-file"});
    EXPECT_EQ(lineTable(all), "<tbody>\n" + tr(here + "/a.py", "x = 1") +
                                  tr(elsewhere + "/secret.py", "password = hunter2") +
                                  tr("/dev/zero", ""));
}

// A run under a policy: the device as memtool run polled it is drawn beside the
// process's own bytes, and each of the policy's actions is marked where it acted.
TEST(HtmlReport, APolicysReadingsAndActionsShowOnTheTimeline) {
    const std::string dir = tempDir();
    std::ofstream(dir + "/p.json") << R"({"interval_ms": 20, "rules": [
      {"device": "cpu", "metric": "process", "above": "200MiB", "do": "pause kv to disk"},
      {"device": "cpu", "metric": "process", "below": "100MiB", "do": "resume kv"}]})";
    Profiled p = profile({PYTHON_BIN, script("policy_kv.py"), "20", dir + "/losses.txt", "policy"},
                         {"--policy", dir + "/p.json"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    std::ofstream(dir + "/trace.json") << p.trace.dump();
    const json r = openInBrowser(renderHtml(dir, dir + "/trace.json", dir + "/report.html"), dir);
    ASSERT_FALSE(r.is_null());
    ASSERT_EQ(r.at("timelines").size(), 1u);
    const json& t = r.at("timelines").at(0);
    std::vector<std::string> series;
    for (const json& s : t.at("series")) series.push_back(s.at(0).get<std::string>());
    EXPECT_EQ(series, (std::vector<std::string>{"cpu", "cpu used (polled, whole device)"}));
    EXPECT_EQ(t.at("marks"), json({"policy", "pause", "policy", "resume"}));
}

TEST(HtmlReport, TheEventLogsMomentsShowWhatWasLiveThen) {
    const std::string dir = tempDir();
    const Outcome o = run({MEMTOOL_BIN, "run", "-q", "--events", "all", "-o", dir + "/t.json", "--",
                           PYTHON_BIN, script("events_known.py")});
    ASSERT_EQ(o.exitCode, 0) << o.err;
    const json r = openInBrowser(renderHtml(dir, dir + "/t.json", dir + "/report.html"), dir);
    ASSERT_FALSE(r.is_null());
    ASSERT_EQ(r.at("moments").size(), 1u);
    const json& m = r.at("moments").at(0);
    EXPECT_EQ(m.at("device"), "cpu");
    // First the moment of the peak: the blocks of lines 11 and 13, as the events left them.
    json mine = json::array();
    for (const json& f : m.at("first").at("frames"))
        if (f.at(0).get<std::string>().find("events_known.py") != std::string::npos)
            mine.push_back(f);
    EXPECT_EQ(mine, json::parse(R"x([["<module> (events_known.py:13)", 70000000],
                                     ["<module> (events_known.py:11)", 50000000]])x"))
        << m.dump();
    // A click at the timeline's start: the first moment, before anything was allocated.
    EXPECT_EQ(m.at("clicked").at("moment"), 0);
    EXPECT_EQ(m.at("clicked").at("bytes"), 0);
    EXPECT_EQ(m.at("clicked").at("none"), "Nothing was live on cpu then.");
    // And the table of the events before the peak, the last its allocation.
    const json& events = r.at("tables").at("events");
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().at(1), "alloc");
    EXPECT_EQ(events.back().at(4), "<module> (events_known.py:13)");
}
