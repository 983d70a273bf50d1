#pragma once
#include <string>

namespace memtool::cli {

// Path of the preload collector: $MEMTOOL_COLLECTOR, else next to this executable
// (<bin>/../lib/libmemtool_collector.so in the build tree,
//  <prefix>/lib/memtool/libmemtool_collector.so when installed).
// Throws core::Error (exit 125) naming the places it looked.
std::string locateCollector();

}  // namespace memtool::cli
