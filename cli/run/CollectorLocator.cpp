#include "cli/run/CollectorLocator.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/Error.h"

namespace memtool::cli {

std::string locateCollector() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("MEMTOOL_COLLECTOR"); env && *env) {
        if (access(env, R_OK) == 0) return fs::absolute(env).string();
        throw core::Error(core::kExitRunFailed,
                          std::string("MEMTOOL_COLLECTOR names ") + env + ", which cannot be read");
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
    throw core::Error(core::kExitRunFailed,
                      "collector library not found (looked in " + looked + ")");
}

namespace {
// A library built beside the collector, or empty when this build has none.
std::string besideCollector(const std::string& collectorPath, const char* name) {
    std::filesystem::path candidate = std::filesystem::path(collectorPath).parent_path() / name;
    return access(candidate.c_str(), R_OK) == 0 ? candidate.string() : std::string();
}
}  // namespace

std::string locateCudaInjection(const std::string& collectorPath) {
    return besideCollector(collectorPath, "libmemtool_cupti.so");
}

std::string locatePythonPackage(const std::string& collectorPath) {
    const std::string dir = besideCollector(collectorPath, "python/memtool/__init__.py");
    return dir.empty() ? dir : std::filesystem::path(dir).parent_path().parent_path().string();
}

std::string locateTorchBridge(const std::string& collectorPath) {
    return besideCollector(collectorPath, "libmemtool_torch_bridge.so");
}

}  // namespace memtool::cli
