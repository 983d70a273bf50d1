// The one text form of a frame: trace.json's site and stack strings.
#include <gtest/gtest.h>

#include "core/Frame.h"
#include "core/FrameTable.h"
#include "tests/TestFrames.h"

using namespace memtool;
using memtool::testing::nativeFrame;
using memtool::testing::pythonFrame;

TEST(Frame, Text) {
    EXPECT_EQ(core::formatFrame(pythonFrame("Model.step", "/home/me/train.py", 11)),
              "Model.step (/home/me/train.py:11)");
    EXPECT_EQ(core::formatFrame(pythonFrame("<module>", "<string>", 1)), "<module> (<string>:1)");
    EXPECT_EQ(core::formatFrame(nativeFrame("at::empty(long)", "/usr/lib/libtorch_cpu.so.2.1")),
              "at::empty(long) (libtorch_cpu.so.2.1)");
    EXPECT_EQ(core::formatFrame(nativeFrame("main", "/src/app", "/src/main.cpp", 7)),
              "main (/src/main.cpp:7)");
    EXPECT_EQ(core::formatFrame(nativeFrame("", "/src/app", "/src/main.cpp", 9)),
              "?? (/src/main.cpp:9)");
    EXPECT_EQ(core::formatFrame(nativeFrame("", "/usr/lib/libtorch_python.so", "", 0, 0x48a99c)),
              "?? (libtorch_python.so+0x48a99c)");
    EXPECT_EQ(core::formatFrame(nativeFrame("", "", "", 0, 0)), "?? (?+0x0)");
    EXPECT_EQ(core::formatFrame(nativeFrame("f", "")), "f (?)");
}

TEST(Frame, TableStoresEachFrameOnce) {
    core::FrameTable table;
    EXPECT_EQ(table.intern(pythonFrame("f", "/a.py", 1)), 0u);
    EXPECT_EQ(table.intern(pythonFrame("f", "/a.py", 2)), 1u);
    EXPECT_EQ(table.intern(pythonFrame("f", "/a.py", 1)), 0u);
    EXPECT_EQ(table.intern(nativeFrame("f", "/a.so")), 2u);
    EXPECT_EQ(table.frames().size(), 3u);
    // Started from a table read from a file: ids stay positions, duplicates included.
    core::FrameTable read({pythonFrame("f", "/a.py", 1), pythonFrame("f", "/a.py", 1)});
    EXPECT_EQ(read.intern(pythonFrame("f", "/a.py", 1)), 0u);
    EXPECT_EQ(read.intern(pythonFrame("g", "/a.py", 1)), 2u);
}
