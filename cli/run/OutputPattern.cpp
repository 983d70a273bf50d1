#include "cli/run/OutputPattern.h"

#include <fmt/format.h>

#include <map>

#include "core/Error.h"

namespace memtool::cli {

std::string expandOutputPattern(const std::string& pattern, const core::ProcessTrace& p) {
    std::string out;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
        if (pattern[i] != '%' || (next != 'p' && next != 'r' && next != '%')) {
            out += pattern[i];
            continue;
        }
        ++i;
        if (next == 'p')
            out += std::to_string(p.pid);
        else if (next == 'r')
            out += p.rank ? std::to_string(*p.rank) : "none";
        else
            out += '%';
    }
    return out;
}

void checkOutputPattern(const std::string& pattern, int exitCode) {
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%') continue;
        const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
        if (next == 'p' || next == 'r' || next == '%') {
            ++i;
            continue;
        }
        throw core::Error(exitCode,
                          fmt::format("-o {}: {} is no pattern (%p: the pid, %r: the rank, %%: a "
                                      "%)",
                                      pattern, next ? std::string("%") + next : "a % at the end"));
    }
}

bool isPerProcessPattern(const std::string& pattern) {
    for (size_t i = 0; i + 1 < pattern.size(); ++i) {
        if (pattern[i] != '%') continue;
        if (pattern[i + 1] == 'p' || pattern[i + 1] == 'r') return true;
        ++i;  // %% is a %
    }
    return false;
}

std::vector<std::pair<std::string, core::Trace>> splitByOutputPattern(core::Trace trace,
                                                                      const std::string& pattern) {
    std::vector<std::pair<std::string, core::Trace>> files;
    if (!isPerProcessPattern(pattern)) {
        files.emplace_back(expandOutputPattern(pattern, {}), std::move(trace));  // %% is a %
        return files;
    }
    std::vector<core::ProcessTrace> processes = std::move(trace.processes);
    trace.processes.clear();
    std::map<std::string, size_t> index;
    for (core::ProcessTrace& p : processes) {
        const std::string path = expandOutputPattern(pattern, p);
        auto [it, fresh] = index.try_emplace(path, files.size());
        if (fresh) {
            files.emplace_back(path, trace);  // the header: no process in it
        }
        files[it->second].second.processes.push_back(std::move(p));
    }
    return files;
}

}  // namespace memtool::cli
