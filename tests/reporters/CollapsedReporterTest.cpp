// Folded stacks and the stack tree behind them (and behind the HTML flame graphs):
// outermost frame first, stacks that share a prefix share nodes, and under every
// metric the lines of a device add up to the device's figure.
#include <gtest/gtest.h>

#include <sstream>

#include "reporters/Check.h"
#include "reporters/CollapsedReporter.h"
#include "reporters/StackTree.h"
#include "tests/TestFrames.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;

namespace {

core::Hotspot hotspot(const std::string& device, std::vector<uint32_t> frames, uint64_t peak,
                      uint64_t allocated, uint64_t leaked) {
    core::Hotspot h;
    h.device = device;
    h.frames = std::move(frames);
    h.peakBytes = peak;
    h.allocatedBytes = allocated;
    h.leakedBytes = leaked;
    h.count = 1;
    return h;
}

// main -> step -> {alloc here, load -> alloc}; a stack without frames; one on cuda:0.
// cpu: peak 700 (400 + 300), allocated 1750, leaked 50.
core::Trace trace() {
    core::ProcessTrace p;
    p.pid = 10;
    p.frames = {
        nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
        pythonFrame("step", "/src/t.py", 7, true), pythonFrame("<module>", "/src/t.py", 20, true),
        pythonFrame("load", "/src/data.py", 3, true), nativeFrame("operator;", "/usr/lib/libx.so")};
    p.hotspots = {hotspot("cpu", {0, 1, 2}, 400, 1000, 0),
                  hotspot("cpu", {0, 3, 1, 2}, 300, 500, 50), hotspot("cpu", {}, 0, 250, 0),
                  hotspot("cuda:0", {4, 2}, 64, 64, 64)};
    p.devices["cpu"].peakBytes = 700;
    p.devices["cpu"].allocatedBytes = 1750;
    p.devices["cpu"].currentBytes = 50;
    p.devices["cpu"].leakedBytes = 50;
    p.devices["cuda:0"].peakBytes = 64;
    core::Trace t;
    t.processes.push_back(p);
    core::ProcessTrace child;
    child.pid = 11;
    child.frames = {pythonFrame("work", "/src/w.py", 2, true)};
    child.hotspots = {hotspot("cpu", {0}, 8, 8, 8)};
    child.devices["cpu"].peakBytes = 8;
    t.processes.push_back(child);
    return t;
}

std::string collapsed(reporters::Metric metric) {
    std::ostringstream out;
    reporters::renderCollapsed(trace(), metric, out);
    return out.str();
}

}  // namespace

TEST(StackTree, SharedCallersAreOneNodeAndTheLargestComesFirst) {
    const core::Trace t = trace();
    const reporters::StackNode root =
        reporters::stackTree(t.processes[0], "cpu", reporters::Metric::Allocated);
    EXPECT_EQ(root.bytes, 1750u);
    ASSERT_EQ(root.children.size(), 2u);
    const reporters::StackNode& module = root.children[0];
    EXPECT_EQ(module.text, "<module> (/src/t.py:20)");
    EXPECT_EQ(module.label, "<module> (t.py:20)");
    EXPECT_EQ(module.bytes, 1500u);
    EXPECT_EQ(module.selfBytes(), 0u);
    EXPECT_EQ(root.children[1].text, "(no stack)");
    EXPECT_EQ(root.children[1].bytes, 250u);
    const reporters::StackNode& step = module.children.at(0);
    EXPECT_EQ(step.bytes, 1500u);
    ASSERT_EQ(step.children.size(), 2u);
    EXPECT_EQ(step.children[0].text, "c10::alloc_cpu(unsigned long) (libc10.so)");  // 1000
    EXPECT_EQ(step.children[0].label, "c10::alloc_cpu (libc10.so)");
    EXPECT_EQ(step.children[1].text, "load (/src/data.py:3)");  // 500
    EXPECT_EQ(step.children[1].children.at(0).bytes, 500u);
}

TEST(StackTree, StacksThatHeldNothingAreLeftOut) {
    const core::Trace t = trace();
    const reporters::StackNode root =
        reporters::stackTree(t.processes[0], "cpu", reporters::Metric::Leaked);
    EXPECT_EQ(root.bytes, 50u);
    ASSERT_EQ(root.children.size(), 1u);
    EXPECT_EQ(root.children[0].children.at(0).children.at(0).text, "load (/src/data.py:3)");
    EXPECT_TRUE(
        reporters::stackTree(t.processes[0], "pinned", reporters::Metric::Peak).children.empty());
}

TEST(Collapsed, OneLinePerStackOutermostFirst) {
    EXPECT_EQ(collapsed(reporters::Metric::Peak),
              "cpu;<module> (/src/t.py:20);step (/src/t.py:7);c10::alloc_cpu(unsigned long) "
              "(libc10.so) 400\n"
              "cpu;<module> (/src/t.py:20);step (/src/t.py:7);load (/src/data.py:3);"
              "c10::alloc_cpu(unsigned long) (libc10.so) 300\n"
              "cuda:0;<module> (/src/t.py:20);operator: (libx.so) 64\n"
              "pid 11;cpu;work (/src/w.py:2) 8\n");
}

TEST(Collapsed, EveryMetricAddsUpToTheDevicesFigure) {
    for (reporters::Metric metric :
         {reporters::Metric::Peak, reporters::Metric::Allocated, reporters::Metric::Leaked}) {
        std::istringstream lines(collapsed(metric));
        uint64_t cpu = 0;
        for (std::string line; std::getline(lines, line);)
            if (line.rfind("cpu;", 0) == 0) cpu += std::stoull(line.substr(line.rfind(' ') + 1));
        EXPECT_EQ(cpu, reporters::metricTotal(trace().processes[0].devices.at("cpu"), metric))
            << reporters::metricName(metric);
    }
    EXPECT_NE(collapsed(reporters::Metric::Allocated).find("cpu;(no stack) 250\n"),
              std::string::npos);
}

// resnet18's stacks were 28.4 frames deep, a quarter of them "?? (libtorch_cpu.so+0x...)":
// a run of unnamed frames in one library is one frame naming it, and --python-only
// keeps the Python frames alone (a stack without any is "(no Python frame)").
namespace {
core::Trace nativeHeavy() {
    core::ProcessTrace p;
    p.pid = 12;
    p.frames = {nativeFrame("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
                nativeFrame("", "/usr/lib/libtorch_cpu.so", "", 0, 0x10),
                nativeFrame("", "/usr/lib/libtorch_cpu.so", "", 0, 0x20),
                nativeFrame("", "/usr/lib/libtorch_cpu.so", "", 0, 0x30),
                nativeFrame("", "/usr/lib/libtorch_python.so", "", 0, 0x40),
                pythonFrame("forward", "/src/m.py", 5, true),
                pythonFrame("<module>", "/src/m.py", 9, true),
                nativeFrame("worker", "/usr/lib/libgomp.so")};
    // Innermost first: alloc <- three unnamed in libtorch_cpu <- one in libtorch_python
    // <- forward <- <module>; the same with other offsets (one path now); a thread
    // with no Python frame.
    p.hotspots = {hotspot("cpu", {0, 1, 2, 3, 4, 5, 6}, 100, 100, 0),
                  hotspot("cpu", {0, 3, 1, 4, 5, 6}, 50, 50, 0), hotspot("cpu", {0, 7}, 25, 25, 0)};
    p.devices["cpu"].peakBytes = 175;
    core::Trace t;
    t.processes.push_back(p);
    return t;
}
}  // namespace

TEST(Collapsed, RunsOfUnnamedFramesAreOneFrameOfTheirLibraryAndPythonOnlyKeepsPython) {
    std::ostringstream native, python;
    reporters::renderCollapsed(nativeHeavy(), reporters::Metric::Peak, native);
    EXPECT_EQ(native.str(),
              "cpu;<module> (/src/m.py:9);forward (/src/m.py:5);?? (libtorch_python.so);?? "
              "(libtorch_cpu.so);c10::alloc_cpu(unsigned long) (libc10.so) 150\n"
              "cpu;worker (libgomp.so);c10::alloc_cpu(unsigned long) (libc10.so) 25\n");
    reporters::renderCollapsed(nativeHeavy(), reporters::Metric::Peak, python,
                               reporters::StackView::PythonOnly);
    EXPECT_EQ(python.str(),
              "cpu;(no Python frame) 25\n"
              "cpu;<module> (/src/m.py:9);forward (/src/m.py:5) 150\n");
}
