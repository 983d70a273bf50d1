#pragma once
// A device's call stacks as one tree, outermost frame at the root: what flame
// graphs draw and folded stacks list. Built from a process's hotspots under one
// metric; frames that read alike (core::formatFrame) are one node, so the tree is
// the one a reader of the folded text would build.

#include <cstdint>
#include <string>
#include <vector>

#include "reporters/Metric.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

struct StackNode {
    // One of the frames it stands for (those that read alike are one node); null at
    // the root and for "(no stack)". Points into the ProcessTrace's frames.
    const core::Frame* frame = nullptr;
    std::string text;                 // core::formatFrame of the frame; "" at the root
    std::string label;                // shortFrame: what a chart has room for
    uint64_t bytes = 0;               // inclusive: this frame and everything it called
    std::vector<StackNode> children;  // largest first, then by text

    // What the frame itself held, its callees' bytes left out.
    uint64_t selfBytes() const;
};

// Which frames a tree has. In both, a run of native frames no symbol names, one
// calling the next in the same library, is one node "?? (libtorch_cpu.so)": their
// addresses tell a reader nothing, and split one path into many.
enum class StackView {
    WithNative,  // every frame
    PythonOnly,  // Python frames alone; a stack with none is one "(no Python frame)" node
};

inline constexpr const char* kNoPythonFrame = "(no Python frame)";

// The root's bytes are the sum over the device's hotspots; stacks that held
// nothing under the metric are left out. A hotspot without a stack is one
// "(no stack)" child of the root.
StackNode stackTree(const core::ProcessTrace& p, const std::string& device, Metric metric,
                    StackView view = StackView::WithNative);

}  // namespace memtool::reporters
