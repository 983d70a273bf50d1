#pragma once
// How one `memtool run` records CUDA memory: through the driver's injection slot
// (CUPTI), through runtime API hooks when that slot is taken or CUPTI was not
// built, or not at all; and which torch bridge the collector may load.

#include <string>

namespace memtool::cli {

struct CudaPlan {
    std::string injection;  // CUDA_INJECTION64_PATH to set, or empty
    bool runtimeHooks = false;
    std::string torchBridge;  // the bridge library beside the collector, or empty
    std::string warning;      // for the launched process's trace
};

// `mode`: "auto", "cupti", "runtime-hooks" or "off" (memtool run --cuda). Throws
// core::Error (2) when "cupti" cannot be had. Prints the warning unless `quiet`.
CudaPlan planCuda(const std::string& mode, const std::string& collectorPath, bool quiet);

}  // namespace memtool::cli
