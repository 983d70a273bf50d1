#pragma once
// What `memtool run` asks of the collector, through MEMTOOL_OPTIONS
// ("native=1,python=1,depth=128,cudahooks=0"). Unknown keys are ignored, so an
// older collector runs under a newer CLI.

#include <cstdint>

#include "collectors/engine/ThreadState.h"

namespace memtool::collectors {

struct EngineOptions {
    bool nativeStacks = true;
    bool pythonStacks = true;
    int maxNativeDepth = 128;             // at most kMaxNativeDepth
    bool cudaRuntimeHooks = false;        // record CUDA memory through runtime hooks from the start
    bool pausableAll = false;             // every allocation belongs to a region (--pausable all)
    uint64_t hostPoolBytes = UINT64_MAX;  // pinned memory kept after a resume (--host-pool)
    uint64_t hostBudgetBytes = UINT64_MAX;  // pinned memory host backups may hold (--host-budget)
    int fold = 1;                           // Window records: 0 never, 1 fast runs, 2 always
    bool controlAtStart = false;            // the control thread from the start (--live)
    bool moduleScopes = false;              // nn.Module scopes on the stacks (--modules)
    bool verify = false;                    // pauses checksummed, resumes checked (--verify)
    int runPid = 0;                         // memtool run's pid: the program is its child

    // Parses the MEMTOOL_OPTIONS text over the defaults; null leaves them.
    static EngineOptions parse(const char* text);
};

}  // namespace memtool::collectors
