#include "collectors/engine/EngineOptions.h"

#include <cstdlib>
#include <cstring>

namespace memtool::collectors {

namespace {
bool keyIs(const char* item, size_t keyLen, const char* key) {
    return keyLen == std::strlen(key) && std::strncmp(item, key, keyLen) == 0;
}
}  // namespace

EngineOptions EngineOptions::parse(const char* text) {
    EngineOptions o;
    for (const char* item = text; item && *item;) {
        const char* comma = std::strchr(item, ',');
        const char* eq = std::strchr(item, '=');
        if (eq && (!comma || eq < comma)) {
            const size_t keyLen = static_cast<size_t>(eq - item);
            const int value = std::atoi(eq + 1);
            if (keyIs(item, keyLen, "native")) o.nativeStacks = value != 0;
            if (keyIs(item, keyLen, "python")) o.pythonStacks = value != 0;
            if (keyIs(item, keyLen, "cudahooks")) o.cudaRuntimeHooks = value != 0;
            if (keyIs(item, keyLen, "pausable")) o.pausableAll = value != 0;
            if (keyIs(item, keyLen, "control")) o.controlAtStart = value != 0;
            if (keyIs(item, keyLen, "modules")) o.moduleScopes = value != 0;
            if (keyIs(item, keyLen, "verify")) o.verify = value != 0;
            if (keyIs(item, keyLen, "run") && value > 0) o.runPid = value;
            if (keyIs(item, keyLen, "fold") && value >= 0 && value <= 2) o.fold = value;
            if (keyIs(item, keyLen, "hostpool"))
                o.hostPoolBytes = std::strtoull(eq + 1, nullptr, 10);
            if (keyIs(item, keyLen, "hostbudget"))
                o.hostBudgetBytes = std::strtoull(eq + 1, nullptr, 10);
            if (keyIs(item, keyLen, "depth") && value > 0)
                o.maxNativeDepth = value < kMaxNativeDepth ? value : kMaxNativeDepth;
        }
        item = comma ? comma + 1 : nullptr;
    }
    return o;
}

}  // namespace memtool::collectors
