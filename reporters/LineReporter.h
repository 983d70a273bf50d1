#pragma once
// `memtool report --lines`: pytorch_memlab's line-profiler table. One block per
// function, every source line from its `def` to its last allocating line, with
// peak and allocated bytes beside the code; lines that allocated nothing are blank.

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/Units.h"
#include "trace/SourceFiles.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

struct LineReportOptions {
    std::string file;          // only files whose path ends with this (empty: all)
    std::string function;      // only this function (empty: all)
    bool allFiles = false;     // also library files (stdlib, site-packages); implied by `file`
    bool readAnyFile = false;  // read sources anywhere (SourceFiles.h says where not)
    core::ByteUnits bytes = core::ByteUnits::Iec;  // how sizes are written
    // The code of `file` for a process whose cwd was `traceCwd`. Empty: SourceFiles.
    std::function<SourceText(const std::string& file, const std::string& traceCwd)> readSource;
};

void renderLines(const core::Trace& trace, const LineReportOptions& options, std::ostream& out);

// The code the line table shows for `file` of process `p`: what the trace recorded
// of it (RecordedSources.h), else the file as options.readSource or SourceFiles
// reads it now.
SourceText lineSource(const LineReportOptions& options, const core::ProcessTrace& p,
                      const std::string& file);

// The rows the line table shows for one process (--file, --function and the
// library-file rule applied), by device, file, function and line.
std::vector<const core::LineStat*> selectLineRows(const core::ProcessTrace& p,
                                                  const LineReportOptions& options);

// Why no row was selected, as one sentence: no line statistics at all (and why),
// a filter that matched nothing, or rows left out as library files.
std::string noLinesReason(const core::Trace& trace, const LineReportOptions& options);

}  // namespace memtool::reporters
