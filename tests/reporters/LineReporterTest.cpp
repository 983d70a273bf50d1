// The line table: from the def line to the last allocating line, blank lines only
// where there is code, whatever the line numbers say.
#include <gtest/gtest.h>

#include <limits>
#include <sstream>

#include "reporters/LineReporter.h"

using namespace memtool;

namespace {

core::LineStat row(const std::string& function, uint64_t line, uint64_t bytes) {
    core::LineStat l;
    l.file = "/src/t.py";
    l.line = line;
    l.function = function;
    l.device = "cpu";
    l.peakBytes = l.allocatedBytes = l.selfAllocatedBytes = bytes;
    l.count = 1;
    return l;
}

std::string render(std::vector<core::LineStat> lines, std::vector<std::string> code) {
    core::ProcessTrace p;
    p.pid = 3;
    p.lines = std::move(lines);
    core::Trace t;
    t.processes.push_back(p);
    reporters::LineReportOptions o;
    o.readSource = [&](const std::string& file, const std::string&) {
        reporters::SourceText s;
        for (const std::string& text : code) s.lines.emplace(s.lines.size() + 1, text);
        s.found = true;
        return s;
    };
    std::ostringstream out;
    reporters::renderLines(t, o, out);
    // The legend closes every line report (golden outputs show it); the tests here
    // are about the blocks above it.
    const std::string legend =
        "\nPeak: the device's total, at most, while the line ran (what it called included) · "
        "Allocated: while it was on the stack · Self alloc: by the line itself\n";
    std::string text = out.str();
    EXPECT_TRUE(text.size() >= legend.size() &&
                text.compare(text.size() - legend.size(), legend.size(), legend) == 0)
        << text;
    return text.substr(0, text.size() - std::min(text.size(), legend.size()));
}

}  // namespace

TEST(LineReporter, ShowsTheFunctionFromItsDef) {
    EXPECT_EQ(render({row("Model.step", 4, 10)}, {"class Model:", "    async  def step (self):",
                                                  "        x = 1", "        y = alloc()"}),
              "\n## Model.step — /src/t.py [cpu] (pid 3)\n"
              "  Line          Peak     Allocated    Self alloc    Count  Code\n"
              "     2                                                         async  def step "
              "(self):\n"
              "     3                                                             x = 1\n"
              "     4          10 B          10 B          10 B        1          y = alloc()\n");
}

TEST(LineReporter, LineNumbersNearTwoToTheSixtyFourDoNotLoop) {
    const uint64_t max = std::numeric_limits<uint64_t>::max();
    EXPECT_EQ(
        render({row("f", 1, 1), row("f", max - 1, 2), row("f", max, 3)}, {"def f():", "    pass"}),
        "\n## f — /src/t.py [cpu] (pid 3)\n"
        "  Line          Peak     Allocated    Self alloc    Count  Code\n"
        "     1           1 B           1 B           1 B        1  def f():\n"
        "     2                                                         pass\n"
        "18446744073709551614           2 B           2 B           2 B        1  \n"
        "18446744073709551615           3 B           3 B           3 B        1  \n");
}

TEST(LineReporter, FunctionNamesAQualifiedNameOrItsLastParts) {
    core::ProcessTrace p;
    p.pid = 3;
    p.lines = {row("ResNet.forward", 2, 10), row("Net.forward", 5, 20), row("forward", 8, 40)};
    auto peaks = [&](const std::string& name) {
        reporters::LineReportOptions o;
        o.function = name;
        uint64_t sum = 0;
        for (const core::LineStat* l : reporters::selectLineRows(p, o)) sum += l->peakBytes;
        return sum;
    };
    EXPECT_EQ(peaks("forward"), 70u);
    EXPECT_EQ(peaks("ResNet.forward"), 10u);
    EXPECT_EQ(peaks("Net.forward"), 20u);  // not ResNet.forward: parts, not a suffix
    EXPECT_EQ(peaks("ward"), 0u);
    EXPECT_EQ(peaks(".forward"), 0u);
}

TEST(LineReporter, AFunctionNameIsNoPattern) {
    // Characters a regular expression would take for operators, and a name that
    // is not the def's: the block starts at the row.
    EXPECT_EQ(render({row("f(*+", 2, 1)}, {"def f(*+(x):", "    pass"}),
              "\n## f(*+ — /src/t.py [cpu] (pid 3)\n"
              "  Line          Peak     Allocated    Self alloc    Count  Code\n"
              "     1                                                     def f(*+(x):\n"
              "     2           1 B           1 B           1 B        1      pass\n");
    EXPECT_EQ(render({row("g", 2, 1)}, {"def f.*(x):", "    pass"}),
              "\n## g — /src/t.py [cpu] (pid 3)\n"
              "  Line          Peak     Allocated    Self alloc    Count  Code\n"
              "     2           1 B           1 B           1 B        1      pass\n");
}
