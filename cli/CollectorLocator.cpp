#include "cli/CollectorLocator.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/Error.h"

namespace memtool::cli {

std::string locateCollector() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("MEMTOOL_COLLECTOR"); env && *env) {
        if (access(env, R_OK) == 0) return fs::absolute(env).string();
        throw core::Error(core::kExitRunFailed, std::string("MEMTOOL_COLLECTOR names ") + env +
                                                    ", which cannot be read");
    }
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    fs::path bin = exe.parent_path();
    const fs::path candidates[] = {
        bin / "../lib/libmemtool_collector.so",
        bin / "../lib/memtool/libmemtool_collector.so",
    };
    std::string looked;
    for (const auto& c : candidates) {
        if (access(c.c_str(), R_OK) == 0) return fs::weakly_canonical(c).string();
        looked += (looked.empty() ? "" : ", ") + c.lexically_normal().string();
    }
    throw core::Error(core::kExitRunFailed, "collector library not found (looked in " + looked + ")");
}

std::string locateCudaInjection(const std::string& collectorPath) {
    namespace fs = std::filesystem;
    fs::path candidate = fs::path(collectorPath).parent_path() / "libmemtool_cupti.so";
    return access(candidate.c_str(), R_OK) == 0 ? candidate.string() : std::string();
}

std::string locateTorchBridge(const std::string& collectorPath) {
    namespace fs = std::filesystem;
    fs::path candidate = fs::path(collectorPath).parent_path() / "libmemtool_torch_bridge.so";
    return access(candidate.c_str(), R_OK) == 0 ? candidate.string() : std::string();
}

}  // namespace memtool::cli
