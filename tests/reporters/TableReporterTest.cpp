// The hotspot table's site lines come from frames: the site, the nearest named
// frame it called, its callers; an allocation without a stack reads "(no stack)".
#include <gtest/gtest.h>

#include <sstream>

#include "reporters/TableReporter.h"
#include "tests/TestFrames.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;

TEST(TableReporter, SiteLinesComeFromFrames) {
    core::ProcessTrace p;
    p.pid = 9;
    p.command = {"python3", "t.py"};
    p.exitCode = 0;
    p.complete = true;
    p.devices["cpu"].peakBytes = 3072;
    p.devices["cpu"].allocatedBytes = 3072;
    p.devices["cpu"].allocCount = 2;
    p.frames = {nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
                nativeFrame("", "/usr/lib/libtorch_python.so", "", 0, 0x1a),
                pythonFrame("step", "/src/t.py", 3, true),
                pythonFrame("<module>", "/src/t.py", 9, true)};
    core::Hotspot h;
    h.device = "cpu";
    h.frames = {0, 1, 2, 3};
    h.siteFrame = 2;
    h.site = "step (/src/t.py:3)";
    h.allocatedBytes = h.peakBytes = 2048;
    h.count = 1;
    core::Hotspot none;
    none.device = "cpu";
    none.site = core::kNoStackSite;
    none.allocatedBytes = none.peakBytes = 1024;
    none.count = 1;
    p.hotspots = {h, none};
    core::Trace t;
    t.processes.push_back(p);
    std::ostringstream out;
    reporters::renderTable(t, reporters::ReportOptions{}, out);
    const std::string text = out.str();
    const std::string table = text.substr(text.find("\nTop "));
    // The unnamed frame between the site and c10 is skipped for "via".
    EXPECT_EQ(table,
              "\nTop 2 hotspots on cpu by peak\n"
              "  #         Peak    Allocated    Count       Leaked  Site\n"
              "  1     2.00 KiB     2.00 KiB        1          0 B  step (t.py:3)\n"
              "                                                   via c10::alloc_cpu (libc10.so)\n"
              "                                                   from <module> (t.py:9)\n"
              "  2     1.00 KiB     1.00 KiB        1          0 B  (no stack)\n"
              "Peak: what each site held at cpu's peak (they add up to it) · Leaked: still held at "
              "the end of the run\n");
}
