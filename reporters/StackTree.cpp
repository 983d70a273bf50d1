#include "reporters/StackTree.h"

#include <algorithm>
#include <map>

#include "trace/HotspotSelection.h"

namespace memtool::reporters {

namespace {

// Children by text while the tree grows; sorted by bytes once it is whole.
struct Growing {
    const core::Frame* frame = nullptr;
    std::string label;
    uint64_t bytes = 0;
    std::map<std::string, Growing> children;
};

StackNode finish(const std::string& text, Growing&& g) {
    StackNode n;
    n.frame = g.frame;
    n.text = text;
    n.label = std::move(g.label);
    n.bytes = g.bytes;
    for (auto& [childText, child] : g.children)
        n.children.push_back(finish(childText, std::move(child)));
    std::stable_sort(n.children.begin(), n.children.end(),
                     [](const StackNode& a, const StackNode& b) { return a.bytes > b.bytes; });
    return n;
}

}  // namespace

uint64_t StackNode::selfBytes() const {
    uint64_t called = 0;
    for (const StackNode& c : children) called += c.bytes;
    return bytes - called;
}

StackNode stackTree(const core::ProcessTrace& p, const std::string& device, Metric metric,
                    StackView view) {
    std::vector<std::string> texts, labels;  // by frame id
    for (const core::Frame& f : p.frames) {
        // Unnamed frames read as their library alone, so a run of them is one node.
        const std::string text =
            f.isUnnamed() ? "?? (" + core::baseName(f.module.empty() ? "?" : f.module) + ")"
                          : core::formatFrame(f);
        texts.push_back(text);
        labels.push_back(f.isUnnamed() ? text : shortFrame(f));
    }
    Growing root;
    for (const core::Hotspot& h : p.hotspots) {
        const uint64_t bytes = h.device == device ? metricBytes(h, metric) : 0;
        if (bytes == 0) continue;
        root.bytes += bytes;
        Growing* at = &root;
        auto step = [&](const std::string& text, const std::string& label,
                        const core::Frame* frame) {
            at = &at->children[text];
            at->frame = frame;
            at->label = label;
            at->bytes += bytes;
        };
        if (h.frames.empty()) step(core::kNoStackSite, core::kNoStackSite, nullptr);
        const std::string* last = nullptr;  // the text of the frame stepped to last
        bool anyPython = false;
        for (auto id = h.frames.rbegin(); id != h.frames.rend(); ++id) {
            const core::Frame& f = p.frames.at(*id);
            if (view == StackView::PythonOnly && !f.isPython()) continue;
            anyPython |= f.isPython();
            if (f.isUnnamed() && last && *last == texts.at(*id)) continue;  // the run goes on
            step(texts.at(*id), labels.at(*id), &f);
            last = &texts.at(*id);
        }
        if (view == StackView::PythonOnly && !anyPython && !h.frames.empty())
            step(kNoPythonFrame, kNoPythonFrame, nullptr);
    }
    return finish("", std::move(root));
}

}  // namespace memtool::reporters
