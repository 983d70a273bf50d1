#pragma once
// `memtool report --format collapsed`: folded stacks, one line per stack,
// outermost frame first, `frame;frame;frame bytes`, the format flamegraph.pl,
// inferno and speedscope read. Each stack starts with its device (`cpu`,
// `cuda:0`); stacks of a process other than the launched one start with `pid N`.

#include <ostream>

#include "reporters/Metric.h"
#include "reporters/StackTree.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

// Under `metric`, the lines of each device add up to the device's figure:
// peak_bytes, allocated_bytes or, for leaked, current_bytes. `view`: every frame,
// or the Python ones alone (--python-only); runs of unnamed native frames are one
// frame naming their library in both (StackTree.h).
void renderCollapsed(const core::Trace& trace, Metric metric, std::ostream& out,
                     StackView view = StackView::WithNative);

}  // namespace memtool::reporters
