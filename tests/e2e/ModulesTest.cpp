// memtool run --modules: what each nn.Module instance's forward allocates, and
// the backward of the autograd nodes that forward made, named by the instance.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;
using nlohmann::json;

namespace {

// group -> (allocated bytes, allocations) of report --format json --group-by module.
std::map<std::string, std::pair<int64_t, int64_t>> moduleRows(const json& trace) {
    const std::string path = tempDir() + "/modules.json";
    std::ofstream(path) << trace.dump();
    Outcome out = run(
        {MEMTOOL_BIN, "report", path, "--format", "json", "--group-by", "module", "--top", "50"});
    EXPECT_EQ(out.exitCode, 0) << out.err;
    std::map<std::string, std::pair<int64_t, int64_t>> rows;
    const json report = json::parse(out.out);
    for (const json& row : report.at("processes").at(0).at("top_hotspots").at("cpu"))
        rows[row.at("group").get<std::string>()] = {row.at("allocated_bytes").get<int64_t>(),
                                                    row.at("count").get<int64_t>()};
    return rows;
}

}  // namespace

// Two blocks of Linear and ReLU, then a Linear, on a 200 x 1000 batch of floats.
// Forward: each module's output (0.fc 400,000 B, 1.fc 200,000 B, 2 8,000 B). Backward,
// on torch 2.x: the gradients of each Linear's weight and bias (2,000,000 + 2,000 B,
// 500,000 + 1,000 B, 10,000 + 40 B), of each input that needs one (1.fc's 400,000
// B, 2's 200,000 B; 0.fc's input is the batch, which needs none), ReLU's
// threshold_backward (400,000 and 200,000 B), and 2's addmm backward making the
// expanded gradient of the sum contiguous twice (2 x 8,000 B). What no module made
// stays apart: the parameters, the batch, the loss and its gradient (4 B each).
TEST(Modules, EachInstanceIsNamedInItsForwardAndItsBackward) {
    Profiled p = profile({PYTHON_BIN, script("module_scopes.py")}, {"--modules"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "loss 200 10\n");
    const auto rows = moduleRows(p.trace);
    using Row = std::pair<int64_t, int64_t>;
    if (torchMajorVersion() >= 2) {
        EXPECT_EQ(rows, (std::map<std::string, Row>{{"(no module's forward)", {3313048, 9}},
                                                    {"0.fc (Linear)", {2402000, 3}},
                                                    {"0.act (ReLU)", {800000, 2}},
                                                    {"1.fc (Linear)", {1101000, 4}},
                                                    {"1.act (ReLU)", {400000, 2}},
                                                    {"2 (Linear)", {234040, 6}}}));
    } else {
        // torch 1.13 has no hooks on autograd's nodes: the forwards alone are named.
        EXPECT_EQ(rows.at("0.fc (Linear)"), Row(400000, 1));
        EXPECT_EQ(rows.at("0.act (ReLU)"), Row(400000, 1));
        EXPECT_EQ(rows.at("1.fc (Linear)"), Row(200000, 1));
        EXPECT_EQ(rows.at("1.act (ReLU)"), Row(200000, 1));
        EXPECT_EQ(rows.at("2 (Linear)"), Row(8000, 1));
        EXPECT_EQ(rows.size(), 6u);
    }
    // The frame that names an instance is the innermost Python frame, never a site
    // or a line of the line table.
    const json& proc = p.process();
    bool backward = false;
    for (const json& f : proc.at("frames")) {
        if (f.at("file") != "<memtool:module>") continue;
        EXPECT_EQ(f.at("kind"), "python");
        EXPECT_EQ(f.at("user"), false);
        backward = backward || (f.at("function") == "0.fc (Linear)" && f.at("line") == 2);
    }
    EXPECT_EQ(backward, torchMajorVersion() >= 2);
    for (const json& l : proc.at("lines")) EXPECT_NE(l.at("file"), "<memtool:module>");
    const std::string trace = tempDir() + "/t.json";
    std::ofstream(trace) << p.trace.dump();
    Outcome folded = run({MEMTOOL_BIN, "report", trace, "--format", "collapsed", "--python-only"});
    // Folded stacks weigh what was live at the peak: 2's output, the backward's gradients.
    EXPECT_NE(folded.out.find(";2 (Linear) (forward) 8000\n"), std::string::npos) << folded.out;
    EXPECT_EQ(folded.out.find(";0.fc (Linear) (backward) 2002000\n") != std::string::npos,
              torchMajorVersion() >= 2)
        << folded.out;
}

// Without --modules the same program's backward has no module's forward on its stacks.
TEST(Modules, WithoutTheFlagTheBackwardHasNoModule) {
    Profiled p = profile({PYTHON_BIN, script("module_scopes.py")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    const auto rows = moduleRows(p.trace);
    using Row = std::pair<int64_t, int64_t>;
    EXPECT_EQ(rows.at("Linear.forward (linear.py)"), Row(608000, 3));
    EXPECT_EQ(rows.at("ReLU.forward (activation.py)"), Row(600000, 2));
    for (const json& f : p.process().at("frames")) EXPECT_NE(f.at("file"), "<memtool:module>");
}

TEST(Modules, TheFlagNeedsPythonStacks) {
    Outcome out = run({MEMTOOL_BIN, "run", "--modules", "--no-python", "--", "true"});
    EXPECT_EQ(out.exitCode, 2);
    EXPECT_EQ(out.err, "memtool: --no-python excludes --modules\n");
}

// torchvision's resnet18, two steps: the backward is named by module to the last
// byte. What no module made: the model's construction (its parameters and buffers,
// as the program counts them), the batch, the optimizer's step (its momentum
// buffers, made in the first step, and in the second the scalars that the
// in-place mul_ and add_ of each parameter's buffer wrap as tensors, 8 + 4 B on
// torch 2.14) and the 4-byte gradient of the loss that each
// backward starts from. The classifier, Linear(512, 1000) on a batch of 2: its
// output in the forward (8,000 B a step); in the backward the gradients of its
// weight (2,048,000 B), bias (4,000 B) and input (4,096 B).
TEST(Modules, AResnetsBackwardIsNamedByModule) {
    if (torchMajorVersion() < 2) GTEST_SKIP() << "torch 1.13 names forwards only";
    SKIP_WITHOUT("torchvision");
    Profiled p = profile({PYTHON_BIN, script("module_scopes_resnet.py")}, {"--modules"});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    uint64_t model = 0, momentum = 0, batch = 0, parameters = 0;
    ASSERT_EQ(std::sscanf(p.outcome.out.c_str(), "model %lu momentum %lu batch %lu parameters %lu",
                          &model, &momentum, &batch, &parameters),
              4)
        << p.outcome.out;
    const json& proc = p.process();
    const json& frames = proc.at("frames");
    std::map<std::string, uint64_t> unnamed;  // by line of the script
    std::map<std::pair<std::string, int>, std::pair<uint64_t, uint64_t>> named;
    for (const json& h : proc.at("hotspots")) {
        const json* scope = nullptr;
        for (const json& id : h.at("frames"))
            if (frames.at(id.get<size_t>()).at("file") == "<memtool:module>") {
                scope = &frames.at(id.get<size_t>());
                break;
            }
        const uint64_t bytes = h.at("allocated_bytes").get<uint64_t>();
        if (!scope) {
            const std::string site = h.at("site").get<std::string>();
            unnamed[site.substr(site.rfind(':') + 1)] += bytes;
            continue;
        }
        auto& [b, n] =
            named[{scope->at("function").get<std::string>(), scope->at("line").get<int>()}];
        b += bytes;
        n += h.at("count").get<uint64_t>();
    }
    ASSERT_EQ(unnamed.size(), 5u);
    EXPECT_EQ(unnamed.at("9)"), model);
    EXPECT_EQ(unnamed.at("11)") + unnamed.at("12)"), batch);
    EXPECT_EQ(unnamed.at("17)"), 8u);  // the backward: the loss's gradient alone
    EXPECT_EQ(unnamed.at("18)"), momentum + 12 * parameters);
    using Figures = std::pair<uint64_t, uint64_t>;
    EXPECT_EQ(named.at({"fc (Linear)", 1}), Figures(16000, 2));
    EXPECT_EQ(named.at({"fc (Linear)", 2}), Figures(4112192, 6));
}
