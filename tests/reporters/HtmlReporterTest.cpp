// The HTML report's text comes from the trace, and a trace is input: every name,
// path and line of code lands in the page escaped, and the charts' JSON cannot end
// its <script> element early. (What the page shows is checked in a browser:
// tests/e2e/HtmlReportTest.cpp.)
#include <gtest/gtest.h>

#include <sstream>

#include "reporters/HtmlReporter.h"
#include "tests/TestFrames.h"

using namespace memtool;
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
