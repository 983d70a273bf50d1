#include "reporters/CollapsedReporter.h"

#include <algorithm>
#include <map>

#include "reporters/StackTree.h"

namespace memtool::reporters {

namespace {

// ';' separates frames and a newline ends the line: a frame's own (a C++ operator, a
// path) would cut it, so they become ':' and ' ', as flamegraph.pl's stackcollapse
// scripts do.
std::string foldable(std::string text) {
    std::replace(text.begin(), text.end(), ';', ':');
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
}

void fold(const StackNode& node, const std::string& path, std::map<std::string, uint64_t>& lines) {
    const std::string here = path + ";" + foldable(node.text);
    if (node.selfBytes() > 0) lines[here] += node.selfBytes();
    for (const StackNode& c : node.children) fold(c, here, lines);
}

}  // namespace

void renderCollapsed(const core::Trace& trace, Metric metric, std::ostream& out, StackView view) {
    // Sorted, so that the same trace folds to the same text; frames that fold to the
    // same text are one line.
    std::map<std::string, uint64_t> lines;
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const core::ProcessTrace& p = trace.processes[i];
        const std::string process = i == 0 ? "" : "pid " + std::to_string(p.pid) + ";";
        for (const auto& [device, totals] : p.devices) {
            const StackNode root = stackTree(p, device, metric, view);
            for (const StackNode& c : root.children) fold(c, process + device, lines);
        }
    }
    for (const auto& [stack, bytes] : lines) out << stack << ' ' << bytes << '\n';
}

}  // namespace memtool::reporters
