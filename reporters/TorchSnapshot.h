#pragma once
// memtool report --format torch-snapshot: a process's event log as PyTorch's
// memory snapshot (torch.cuda.memory._snapshot()'s layout, pickled), which
// pytorch.org/memory_viz and `python -m torch.cuda._memory_viz` read:
//   segments       the blocks live when the log ended, in segments (the caching
//                  allocator's reserved blocks where the torch bridge saw them;
//                  else one segment per block), each block with its frames
//   device_traces  per device index, every event in order: alloc,
//                  free_requested + free_completed, segment_alloc / segment_free
//                  (the allocator's reserved blocks, or the driver's where there is
//                  no bridge), oom; frames as {filename, line, name}, innermost first
// Device indices: cuda:N at N, then host memory ("cpu", then "pinned" and
// "shared" where they have events) after the highest CUDA one, as the key
// memtool_devices names them. docs/events.md.

#include <string>

#include "trace/EventLog.h"

namespace memtool::reporters {

// The snapshot of `p`'s events (the pickle's bytes).
std::string renderTorchSnapshot(const core::ProcessEvents& p);

}  // namespace memtool::reporters
