// The HTML report's text comes from the trace, and a trace is input: every name,
// path and line of code lands in the page escaped, and the charts' JSON cannot end
// its <script> element early. (What the page shows is checked in a browser:
// tests/e2e/HtmlReportTest.cpp.)
#include <gtest/gtest.h>

#include <sstream>

#include "reporters/HtmlReporter.h"
#include "tests/TestFrames.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;

namespace {

size_t occurrences(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST(HtmlReporter, TraceTextIsEscapedEverywhere) {
    const std::string evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";
    core::ProcessTrace p;
    p.pid = 1;
    p.command = {"python3", evil};
    p.warnings = {evil};
    p.frames = {pythonFrame(evil, "/src/" + evil + ".py", 3, true)};
    core::Hotspot h;
    h.device = "cpu";
    h.frames = {0};
    h.siteFrame = 0;
    h.peakBytes = h.allocatedBytes = 10;
    p.hotspots = {h};
    p.devices["cpu"].peakBytes = 10;
    p.devices["cpu"].allocatedBytes = 10;
    p.timeline["cpu"] = core::TimelineSeries{1e-6, {{0.5, 10}}};
    core::LineStat line;
    line.file = "/src/t.py";
    line.line = 1;
    line.function = evil;
    line.device = "cpu";
    p.lines = {line};
    core::ControlEvent e;
    e.tag = evil;
    e.message = evil;
    e.ok = false;
    p.control = {e};
    core::Trace t;
    t.processes = {p};

    reporters::HtmlOptions options;
    options.source = evil;
    options.lines.readSource = [&](const std::string&, const std::string&) {
        reporters::SourceText s;
        s.lines = {{1, evil}};
        s.found = true;
        return s;
    };
    std::ostringstream out;
    reporters::renderHtml(t, options, out);
    const std::string page = out.str();
    // The page's own three scripts (error catcher, chart data, report), nothing more.
    EXPECT_EQ(occurrences(page, "<script"), 3u);
    EXPECT_EQ(occurrences(page, "</script>"), 3u);
    EXPECT_EQ(page.find("<img"), std::string::npos);
    EXPECT_NE(page.find("&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);
    EXPECT_NE(page.find("\\u003c/script>\\u003cscript>alert(1)"), std::string::npos);  // JSON
}

// What --top leaves out is summed in the table's foot, outside the rows a click
// sorts: the columns add up to the device's figures.
TEST(HtmlReporter, TheRowsTopLeavesOutAreSummedInTheFoot) {
    core::ProcessTrace p;
    p.pid = 1;
    p.frames = {pythonFrame("f", "/src/t.py", 3, true), pythonFrame("g", "/src/t.py", 7, true),
                pythonFrame("h", "/src/t.py", 9, true)};
    for (uint32_t i = 0; i < 3; ++i) {
        core::Hotspot h;
        h.device = "cpu";
        h.frames = {i};
        h.siteFrame = i;
        h.peakBytes = 3000 - 1000 * i;
        h.allocatedBytes = 5000 - 1000 * i;
        h.count = 1 + i;
        h.leakedBytes = 100 * i;
        p.hotspots.push_back(h);
    }
    p.devices["cpu"].peakBytes = 6000;
    core::Trace t;
    t.processes = {p};
    reporters::HtmlOptions options;
    options.hotspots.top = 1;
    std::ostringstream out;
    reporters::renderHtml(t, options, out);
    EXPECT_NE(out.str().find("</tbody>\n<tfoot><tr class=\"rest\"><td></td><td>(2 other hotspots)"
                             "</td><td class=\"num\" data-v=\"3000\">2.93 KiB</td>"
                             "<td class=\"num\" data-v=\"7000\">6.84 KiB</td>"
                             "<td class=\"num\" data-v=\"5\">5</td>"
                             "<td class=\"num\" data-v=\"300\">300 B</td></tr></tfoot></table>"),
              std::string::npos)
        << out.str();
    options.hotspots.top = 3;
    std::ostringstream all;
    reporters::renderHtml(t, options, all);
    EXPECT_EQ(all.str().find("<tfoot>"), std::string::npos);
}

// The page's header and empty-process sentence are the text report's: an exec'd
// process says so, and one that allocated nothing says why.
TEST(HtmlReporter, AProcessThatAllocatedNothingSaysHowItEndedAndWhy) {
    core::ProcessTrace p;
    p.pid = 5;
    p.command = {"python3", "-m", "launcher"};
    p.exec = true;
    p.complete = true;
    core::Trace t;
    t.processes.push_back(p);
    std::ostringstream out;
    reporters::renderHtml(t, reporters::HtmlOptions{}, out);
    const std::string page = out.str();
    EXPECT_NE(page.find("pid 5 · exec&apos;d another program · 0.000 s"), std::string::npos);
    EXPECT_NE(
        page.find("<p class=\"none\">No tracked allocations (memtool tracked the program&apos;s "
                  "allocator, and nothing was allocated through it).</p>"),
        std::string::npos);
}

// An out-of-memory row says where the request was made and who held what, as the
// text report's headline does; an older trace's event, with neither, has empty cells.
TEST(HtmlReporter, AnOutOfMemoryRowNamesItsSiteAndTheHolders) {
    core::ProcessTrace p;
    p.pid = 5;
    p.frames = {nativeFrame("at::empty(long)", "/usr/lib/libtorch_cpu.so"),
                pythonFrame("grow", "/w/oom.py", 16, true)};
    p.devices["cuda:0"].peakBytes = p.devices["cuda:0"].allocatedBytes = 3072;
    core::OomEvent e;
    e.timeS = 1.5;
    e.device = "cuda:0";
    e.requestedBytes = 64 << 20;
    e.source = "torch";
    e.frames = {0, 1};
    e.siteFrame = 1;
    e.heldOn = "cuda:0.active";
    e.liveBytes = 3072;
    e.bySite = {{"grow (/w/oom.py:16)", 2048, 1}, {"(1 other site)", 1024, std::nullopt}};
    core::OomEvent old;
    old.timeS = 2;
    old.device = "cuda:0";
    old.requestedBytes = 1024;
    p.oom = {e, old};
    core::Trace t;
    t.processes = {p};
    std::ostringstream out;
    reporters::renderHtml(t, reporters::HtmlOptions{}, out);
    const std::string page = out.str();
    EXPECT_NE(page.find("<tr><td class=\"num\" data-v=\"1.5\">1.500 s</td><td>cuda:0</td><td "
                        "class=\"num\" data-v=\"67108864\">64.00 MiB</td><td class=\"site\">grow "
                        "(oom.py:16)</td><td class=\"num\" data-v=\"3072\">3.00 KiB on "
                        "cuda:0.active</td><td class=\"site\"><div>2.00 KiB grow (oom.py:16)</div>"
                        "<div>1.00 KiB (1 other site)</div></td></tr>"),
              std::string::npos)
        << page;
    EXPECT_NE(page.find("<tr><td class=\"num\" data-v=\"2\">2.000 s</td><td>cuda:0</td><td "
                        "class=\"num\" data-v=\"1024\">1.00 KiB</td><td class=\"site\"></td><td>"
                        "</td><td class=\"site\"></td></tr>"),
              std::string::npos)
        << page;
}
