#include "core/Frame.h"

#include <cinttypes>
#include <cstdio>

namespace memtool::core {

std::string baseName(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string frameName(const Frame& f) { return f.isUnnamed() ? "??" : f.function; }

std::string frameLocation(const Frame& f) {
    if (isModuleScope(f)) return f.line == kModuleScopeBackward ? "backward" : "forward";
    // Python frames always name their file (even "<string>"), native frames only
    // where debug info gave one.
    if (f.isPython() || !f.file.empty()) return f.file + ":" + std::to_string(f.line);
    std::string module = f.module.empty() ? "?" : baseName(f.module);
    if (!f.isUnnamed()) return module;
    char offset[32];
    std::snprintf(offset, sizeof offset, "+0x%" PRIx64, f.offset);
    return module + offset;
}

std::string formatFrame(const Frame& f) { return frameName(f) + " (" + frameLocation(f) + ")"; }

}  // namespace memtool::core
