#pragma once
#include <string>

namespace memtool::cli {

// Path of the preload collector: $MEMTOOL_COLLECTOR, else next to this executable
// (<bin>/../lib/libmemtool_collector.so in the build tree,
//  <prefix>/lib/memtool/libmemtool_collector.so when installed).
// Throws core::Error (exit 125) naming the places it looked.
std::string locateCollector();

// Path of the CUDA injection library (libmemtool_cupti.so) beside the collector,
// or empty when this build has no CUDA support.
std::string locateCudaInjection(const std::string& collectorPath);

// The directory holding the `memtool` Python package beside the collector
// (<lib>/python), for PYTHONPATH; empty when this build has none.
std::string locatePythonPackage(const std::string& collectorPath);

// Path of the torch bridge (libmemtool_torch_bridge.so) beside the collector, or
// empty when this build found no CUDA build of torch.
std::string locateTorchBridge(const std::string& collectorPath);

}  // namespace memtool::cli
