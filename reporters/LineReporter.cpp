#include "reporters/LineReporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "core/FrameClassifier.h"
#include "core/Units.h"
#include "reporters/ByteText.h"
#include "trace/RecordedSources.h"

namespace memtool::reporters {

namespace {

using Rows = std::map<uint64_t, const core::LineStat*>;              // line -> its row
using BlockKey = std::tuple<std::string, std::string, std::string>;  // device, file, function

// --function NAME: the qualified name, or its last parts ("forward" and
// "ResNet.forward" both name ResNet.forward; "Net.forward" is not ResNet.forward).
bool namesFunction(const std::string& qualified, const std::string& name) {
    return qualified == name || (qualified.size() > name.size() && qualified.ends_with(name) &&
                                 qualified[qualified.size() - name.size() - 1] == '.');
}

// What --file and --function ask for.
bool matchesFilters(const core::LineStat& l, const LineReportOptions& options) {
    return (options.file.empty() || l.file.ends_with(options.file)) &&
           (options.function.empty() || namesFunction(l.function, options.function));
}

// Library files are left out unless --all-files, or --file names them.
bool libraryLeftOut(const core::LineStat& l, const LineReportOptions& options) {
    return options.file.empty() && !options.allFiles && core::isLibraryPythonFile(l.file);
}

// Blocks per device and file in source order: by the first line each function
// shows (its def when the source is read, so by that order too).
std::vector<std::pair<BlockKey, Rows>> selectBlocks(const core::ProcessTrace& p,
                                                    const LineReportOptions& options) {
    std::map<BlockKey, Rows> blocks;
    for (const auto& l : p.lines)
        if (matchesFilters(l, options) && !libraryLeftOut(l, options))
            blocks[{l.device, l.file, l.function}][l.line] = &l;
    std::vector<std::pair<BlockKey, Rows>> ordered(blocks.begin(), blocks.end());
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
        const auto& [deviceA, fileA, functionA] = a.first;
        const auto& [deviceB, fileB, functionB] = b.first;
        return std::tie(deviceA, fileA, a.second.begin()->first) <
               std::tie(deviceB, fileB, b.second.begin()->first);
    });
    return ordered;
}

// One function's table: the def line, then every line to its last allocating one.
// Lines that allocated nothing are shown only where there is code to show, so the
// work is bounded by the rows and the source, whatever the line numbers.
void renderBlock(const BlockKey& key, const Rows& rows, const SourceText& source, bool changedNote,
                 int64_t pid, const ByteText& b, std::ostream& out) {
    const auto& [device, file, function] = key;
    const std::map<uint64_t, std::string>& src = source.lines;
    // CUDA lines with the torch bridge attached also show PyTorch's active and
    // reserved peaks (memlab's active_bytes / reserved_bytes columns).
    bool pools = false;
    for (const auto& [n, s] : rows) pools |= !s->pools.empty();
    auto poolPeak = [&](const core::LineStat& s, const char* pool) {
        auto it = s.pools.find(pool);
        return b.column(it == s.pools.end() ? std::string() : b(it->second.peakBytes));
    };
    auto code = [&](uint64_t n) {
        auto it = src.find(n);
        return it == src.end() ? std::string() : it->second;
    };

    out << fmt::format("\n## {} — {} [{}] (pid {})\n", function, file, device, pid);
    out << fmt::format("{:>6}  {}  {}  {}  {:>7}", "Line", b.column("Peak"), b.column("Allocated"),
                       b.column("Self alloc"), "Count");
    if (pools) out << fmt::format("  {}  {}", b.column("Active peak"), b.column("Reserv. peak"));
    out << "  Code\n";
    if (!source.found)
        out << (source.why.empty() ? "        (source not found; line numbers only)\n"
                                   : fmt::format("        (source not read: {})\n", source.why));
    if (changedNote) out << fmt::format("        ({})\n", changedSourceNote(file));

    uint64_t next = src.empty() ? 0 : findDefinition(src, rows.begin()->first, function);
    for (const auto& [n, row] : rows) {
        for (auto blank = src.lower_bound(std::max<uint64_t>(next, 1));
             blank != src.end() && blank->first < n; ++blank) {
            out << fmt::format("{:>6}  {}  {}  {}  {:>7}", blank->first, b.column(""), b.column(""),
                               b.column(""), "");
            if (pools) out << fmt::format("  {}  {}", b.column(""), b.column(""));
            out << "  " << blank->second << '\n';
        }
        const core::LineStat& s = *row;
        out << fmt::format("{:>6}  {}  {}  {}  {:>7}", n, b.column(s.peakBytes),
                           b.column(s.allocatedBytes), b.column(s.selfAllocatedBytes), s.count);
        if (pools)
            out << fmt::format("  {}  {}", poolPeak(s, core::kPoolActive),
                               poolPeak(s, core::kPoolReserved));
        out << "  " << code(n) << '\n';
        next = n + 1;  // wraps only past the last line number, which no row follows
    }
}

}  // namespace

std::vector<const core::LineStat*> selectLineRows(const core::ProcessTrace& p,
                                                  const LineReportOptions& options) {
    std::vector<const core::LineStat*> rows;
    for (const auto& [key, block] : selectBlocks(p, options))
        for (const auto& [n, row] : block) rows.push_back(row);
    return rows;
}

std::string noLinesReason(const core::Trace& trace, const LineReportOptions& options) {
    size_t rows = 0, matching = 0, python = 0;
    std::string libraryFile;
    for (const core::ProcessTrace& p : trace.processes) {
        rows += p.lines.size();
        python += p.pythonStacks;
        for (const auto& l : p.lines) {
            if (!matchesFilters(l, options)) continue;
            ++matching;
            if (libraryLeftOut(l, options) && libraryFile.empty()) libraryFile = l.file;
        }
    }
    if (rows == 0)
        return python == 0 ? "No line statistics: the trace was recorded without Python stacks "
                             "(--no-python)."
                           : "No line statistics: no allocation had a Python line or a line of "
                             "native code with debug info on its stack.";
    std::string asked;
    if (!options.function.empty()) asked += " --function " + options.function;
    if (!options.file.empty()) asked += " --file " + options.file;
    if (matching > 0 && !libraryFile.empty() && asked.empty())
        return fmt::format(
            "Every line with allocations is in library files ({}, ...); --all-files shows them.",
            libraryFile);
    if (matching > 0 && !libraryFile.empty())
        return fmt::format(
            "No line of your own code matches{}: it is in library files ({}); --all-files shows "
            "them.",
            asked, libraryFile);
    return fmt::format("No line matches{}.", asked);
}

SourceText lineSource(const LineReportOptions& options, const core::ProcessTrace& p,
                      const std::string& file) {
    return reportedSource(p, file,
                          options.readSource
                              ? options.readSource(file, p.cwd)
                              : SourceFiles(p.cwd, options.readAnyFile, &p.sources).read(file));
}

void renderLines(const core::Trace& trace, const LineReportOptions& options, std::ostream& out) {
    const ByteText b(options.bytes);
    bool any = false;
    std::set<std::string> noted;  // files said to have changed, once each
    for (const core::ProcessTrace& p : trace.processes) {
        // Blocks come file by file (per device): one file is kept at a time.
        std::optional<std::string> loadedFile;
        SourceText source;
        for (const auto& [key, rows] : selectBlocks(p, options)) {
            const std::string& file = std::get<1>(key);
            if (file != loadedFile) {
                source = lineSource(options, p, file);
                loadedFile = file;
            }
            any = true;
            renderBlock(key, rows, source, source.changed && noted.insert(file).second, p.pid, b,
                        out);
        }
    }
    if (!any) {
        out << noLinesReason(trace, options) << '\n';
        return;
    }
    // Not what the line held: what the device held while it ran (memlab's reading).
    out << "\nPeak: the device's total, at most, while the line ran (what it called included) · "
           "Allocated: while it was on the stack · Self alloc: by the line itself\n";
}

}  // namespace memtool::reporters
