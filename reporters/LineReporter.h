#pragma once
// `memtool report --lines`: pytorch_memlab's line-profiler table. One block per
// function, every source line from its `def` to its last allocating line, with
// peak and allocated bytes beside the code; lines that allocated nothing are blank.

#include <functional>
#include <ostream>
#include <string>

#include "core/TraceModel.h"
#include "reporters/SourceFiles.h"

namespace memtool::reporters {

struct LineReportOptions {
    std::string file;       // only files whose path ends with this (empty: all)
    std::string function;   // only this function (empty: all)
    bool allFiles = false;  // also library files (stdlib, site-packages); implied by `file`.
                            // And read sources anywhere (SourceFiles.h says where not)
    // The code of `file` for a process whose cwd was `traceCwd`. Empty: SourceFiles.
    std::function<SourceText(const std::string& file, const std::string& traceCwd)> readSource;
};

void renderLines(const core::Trace& trace, const LineReportOptions& options, std::ostream& out);

}  // namespace memtool::reporters
