#include "reporters/LineReporter.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <vector>

#include "core/FrameClassifier.h"
#include "core/Units.h"

namespace memtool::reporters {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> readSource(const std::string& path) {
    std::vector<std::string> lines;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

// `text` matched literally inside a regular expression: a function name comes from
// the trace, and a trace is input ("f(" must not break the report).
std::string regexLiteral(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c != '\0' && std::strchr("\\^$.|?*+()[]{}", c)) out += '\\';
        out += c;
    }
    return out;
}

// The line of `def name` (or `async def`) at or above `from`, if within reach.
size_t findDefinition(const std::vector<std::string>& src, size_t from,
                      const std::string& function) {
    std::string last =
        function.substr(function.rfind('.') == std::string::npos ? 0 : function.rfind('.') + 1);
    if (last.empty() || last[0] == '<') return from;
    std::regex def(R"(^\s*(async\s+)?def\s+)" + regexLiteral(last) + R"(\s*\()");
    for (size_t l = from; l >= 1 && from - l < 500; --l) {
        if (l <= src.size() && std::regex_search(src[l - 1], def)) return l;
    }
    return from;
}

}  // namespace

void renderLines(const core::Trace& trace, const LineReportOptions& options, std::ostream& out) {
    bool any = false;
    for (const core::ProcessTrace& p : trace.processes) {
        // (device, file, function) -> line -> stat
        std::map<std::tuple<std::string, std::string, std::string>,
                 std::map<uint64_t, const core::LineStat*>>
            blocks;
        for (const auto& l : p.lines) {
            if (!options.file.empty() && !endsWith(l.file, options.file)) continue;
            if (options.file.empty() && !options.allFiles && core::isLibraryPythonFile(l.file))
                continue;
            if (!options.function.empty() && l.function != options.function) continue;
            blocks[{l.device, l.file, l.function}][l.line] = &l;
        }
        std::map<std::string, std::vector<std::string>> sources;
        for (const auto& [key, rows] : blocks) {
            const auto& [device, file, function] = key;
            auto [it, fresh] = sources.try_emplace(file);
            if (fresh) it->second = readSource(file);
            const std::vector<std::string>& src = it->second;
            uint64_t first = rows.begin()->first, last = rows.rbegin()->first;
            if (!src.empty()) first = findDefinition(src, first, function);
            any = true;
            // CUDA lines with the torch bridge attached also show PyTorch's active and
            // reserved peaks (memlab's active_bytes / reserved_bytes columns).
            bool pools = false;
            for (const auto& [n, s] : rows) pools |= !s->pools.empty();
            auto poolPeak = [](const core::LineStat& s, const char* pool) {
                auto it = s.pools.find(pool);
                return it == s.pools.end() ? std::string()
                                           : core::formatBytes(it->second.peakBytes);
            };
            out << fmt::format("\n## {} — {} [{}] (pid {})\n", function, file, device, p.pid);
            out << fmt::format("{:>6}  {:>12}  {:>12}  {:>12}  {:>7}", "Line", "Peak", "Allocated",
                               "Self alloc", "Count");
            if (pools) out << fmt::format("  {:>12}  {:>12}", "Active peak", "Reserv. peak");
            out << "  Code\n";
            if (src.empty()) out << "        (source not found; line numbers only)\n";
            for (uint64_t n = first; n <= last; ++n) {
                auto row = rows.find(n);
                std::string code = n >= 1 && n <= src.size() ? src[n - 1] : "";
                if (row == rows.end()) {
                    if (src.empty()) continue;
                    out << fmt::format("{:>6}  {:>12}  {:>12}  {:>12}  {:>7}", n, "", "", "", "");
                    if (pools) out << fmt::format("  {:>12}  {:>12}", "", "");
                } else {
                    const core::LineStat& s = *row->second;
                    out << fmt::format("{:>6}  {:>12}  {:>12}  {:>12}  {:>7}", n,
                                       core::formatBytes(s.peakBytes),
                                       core::formatBytes(s.allocatedBytes),
                                       core::formatBytes(s.selfAllocatedBytes), s.count);
                    if (pools)
                        out << fmt::format("  {:>12}  {:>12}", poolPeak(s, core::kPoolActive),
                                           poolPeak(s, core::kPoolReserved));
                }
                out << "  " << code << '\n';
            }
        }
    }
    if (!any)
        out << "No line statistics match (run with Python stacks on, or check "
               "--file/--function).\n";
}

}  // namespace memtool::reporters
