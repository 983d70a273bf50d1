#include "reporters/LineReporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "core/FrameClassifier.h"
#include "core/Units.h"

namespace memtool::reporters {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Skips spaces and tabs from `at`; returns how many.
size_t skipBlanks(const std::string& s, size_t& at) {
    const size_t from = at;
    while (at < s.size() && (s[at] == ' ' || s[at] == '\t')) ++at;
    return at - from;
}

bool take(const std::string& s, size_t& at, const std::string& word) {
    if (s.compare(at, word.size(), word) != 0) return false;
    at += word.size();
    return true;
}

// `line` is `def name(` or `async def name(`. Matched by hand: the name comes from
// the trace (no regular expression may be made of it), and std::regex recurses
// per character, so a long line of a hostile file could overflow the stack.
bool definesFunction(const std::string& line, const std::string& name) {
    size_t at = 0;
    skipBlanks(line, at);
    if (take(line, at, "async") && skipBlanks(line, at) == 0) return false;
    if (!take(line, at, "def") || skipBlanks(line, at) == 0 || !take(line, at, name)) return false;
    skipBlanks(line, at);
    return at < line.size() && line[at] == '(';
}

// The line of `def name` (or `async def`) at or above `from`, if within reach.
uint64_t findDefinition(const std::vector<std::string>& src, uint64_t from,
                        const std::string& function) {
    const size_t dot = function.rfind('.');
    const std::string last = function.substr(dot == std::string::npos ? 0 : dot + 1);
    if (last.empty() || last[0] == '<') return from;
    const uint64_t start = std::min<uint64_t>(from, src.size());
    for (uint64_t l = start; l >= 1 && from - l < 500; --l)
        if (definesFunction(src[l - 1], last)) return l;
    return from;
}

using Rows = std::map<uint64_t, const core::LineStat*>;              // line -> its row
using BlockKey = std::tuple<std::string, std::string, std::string>;  // device, file, function

std::map<BlockKey, Rows> selectBlocks(const core::ProcessTrace& p,
                                      const LineReportOptions& options) {
    std::map<BlockKey, Rows> blocks;
    for (const auto& l : p.lines) {
        if (!options.file.empty() && !endsWith(l.file, options.file)) continue;
        if (options.file.empty() && !options.allFiles && core::isLibraryPythonFile(l.file))
            continue;
        if (!options.function.empty() && l.function != options.function) continue;
        blocks[{l.device, l.file, l.function}][l.line] = &l;
    }
    return blocks;
}

// One function's table: the def line, then every line to its last allocating one.
// Lines that allocated nothing are shown only where there is code to show, so the
// work is bounded by the rows and the source, whatever the line numbers.
void renderBlock(const BlockKey& key, const Rows& rows, const SourceText& source, int64_t pid,
                 std::ostream& out) {
    const auto& [device, file, function] = key;
    const std::vector<std::string>& src = source.lines;
    // CUDA lines with the torch bridge attached also show PyTorch's active and
    // reserved peaks (memlab's active_bytes / reserved_bytes columns).
    bool pools = false;
    for (const auto& [n, s] : rows) pools |= !s->pools.empty();
    auto poolPeak = [](const core::LineStat& s, const char* pool) {
        auto it = s.pools.find(pool);
        return it == s.pools.end() ? std::string() : core::formatBytes(it->second.peakBytes);
    };
    auto code = [&](uint64_t n) { return n >= 1 && n <= src.size() ? src[n - 1] : ""; };

    out << fmt::format("\n## {} — {} [{}] (pid {})\n", function, file, device, pid);
    out << fmt::format("{:>6}  {:>12}  {:>12}  {:>12}  {:>7}", "Line", "Peak", "Allocated",
                       "Self alloc", "Count");
    if (pools) out << fmt::format("  {:>12}  {:>12}", "Active peak", "Reserv. peak");
    out << "  Code\n";
    if (!source.found)
        out << (source.why.empty() ? "        (source not found; line numbers only)\n"
                                   : fmt::format("        (source not read: {})\n", source.why));

    uint64_t next = src.empty() ? 0 : findDefinition(src, rows.begin()->first, function);
    for (const auto& [n, row] : rows) {
        for (uint64_t blank = std::max<uint64_t>(next, 1); blank < n && blank <= src.size();
             ++blank) {
            out << fmt::format("{:>6}  {:>12}  {:>12}  {:>12}  {:>7}", blank, "", "", "", "");
            if (pools) out << fmt::format("  {:>12}  {:>12}", "", "");
            out << "  " << code(blank) << '\n';
        }
        const core::LineStat& s = *row;
        out << fmt::format("{:>6}  {:>12}  {:>12}  {:>12}  {:>7}", n,
                           core::formatBytes(s.peakBytes), core::formatBytes(s.allocatedBytes),
                           core::formatBytes(s.selfAllocatedBytes), s.count);
        if (pools)
            out << fmt::format("  {:>12}  {:>12}", poolPeak(s, core::kPoolActive),
                               poolPeak(s, core::kPoolReserved));
        out << "  " << code(n) << '\n';
        next = n + 1;  // wraps only past the last line number, which no row follows
    }
}

}  // namespace

void renderLines(const core::Trace& trace, const LineReportOptions& options, std::ostream& out) {
    bool any = false;
    for (const core::ProcessTrace& p : trace.processes) {
        const SourceFiles files(p.cwd, options.allFiles);
        // Blocks come file by file (per device): one file is kept at a time.
        std::optional<std::string> loadedFile;
        SourceText source;
        for (const auto& [key, rows] : selectBlocks(p, options)) {
            const std::string& file = std::get<1>(key);
            if (file != loadedFile) {
                source = options.readSource ? options.readSource(file, p.cwd) : files.read(file);
                loadedFile = file;
            }
            any = true;
            renderBlock(key, rows, source, p.pid, out);
        }
    }
    if (!any)
        out << "No line statistics match (run with Python stacks on, or check "
               "--file/--function).\n";
}

}  // namespace memtool::reporters
