#include "cli/run/CudaPlan.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/run/CollectorLocator.h"
#include "core/Error.h"

namespace memtool::cli {

CudaPlan planCuda(const std::string& mode, const std::string& collectorPath, bool quiet) {
    CudaPlan plan;
    if (mode == "off") return plan;
    const std::string injection = locateCudaInjection(collectorPath);
    const char* theirs = std::getenv("CUDA_INJECTION64_PATH");
    // Set to memtool's own (a memtool run inside another, a program's child whose
    // environment carried it): the slot is memtool's to use.
    std::error_code ignored;
    const bool slotTaken =
        theirs && *theirs &&
        (injection.empty() || !std::filesystem::equivalent(theirs, injection, ignored));
    if (mode == "cupti") {
        if (injection.empty())
            throw core::Error(core::kExitBadInput,
                              "--cuda cupti: this memtool was built without CUPTI");
        if (slotTaken)
            throw core::Error(core::kExitBadInput,
                              std::string("--cuda cupti: CUDA_INJECTION64_PATH is already set (") +
                                  theirs + "); use --cuda runtime-hooks");
        plan.injection = injection;
    } else if (mode == "runtime-hooks" || injection.empty() || slotTaken) {
        // The driver takes one injection library: the user's (nsys, ...) keeps it.
        if (mode == "auto" && slotTaken) {
            plan.warning =
                std::string("CUDA_INJECTION64_PATH was already set (") + theirs +
                "); CUDA memory was recorded through runtime API hooks (cudaMalloc & co.; direct "
                "driver calls are not seen)";
            if (!quiet) std::cerr << "memtool: " << plan.warning << '\n';
        }
        plan.runtimeHooks = true;
    } else {
        plan.injection = injection;
    }
    plan.torchBridge = locateTorchBridge(collectorPath);
    return plan;
}

}  // namespace memtool::cli
