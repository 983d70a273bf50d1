#include "trace/RecordedSources.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/FrameClassifier.h"

namespace memtool::reporters {

namespace {

// Files of the user's own code: those the line table shows without --all-files,
// less library headers inlined into native code (the C++ standard library, torch).
bool userFile(const std::string& file) {
    return !core::isLibraryPythonFile(file) && !core::isLibrarySource(file);
}

// What a process's reports show of one file: single lines, and the line table's
// blocks as (function -> its first and last row).
struct Wanted {
    std::set<uint64_t> lines;
    std::map<std::string, std::pair<uint64_t, uint64_t>> blocks;
};

std::map<std::string, Wanted> wantedLines(const core::ProcessTrace& p) {
    std::map<std::string, Wanted> wanted;
    auto line = [&](const std::string& file, uint64_t n) {
        if (n > 0 && userFile(file)) wanted[file].lines.insert(n);
    };
    for (const core::LineStat& l : p.lines) {
        if (l.line == 0 || !userFile(l.file)) continue;
        auto [it, fresh] = wanted[l.file].blocks.try_emplace(l.function, l.line, l.line);
        it->second.first = std::min(it->second.first, l.line);
        it->second.second = std::max(it->second.second, l.line);
    }
    for (const core::Frame& f : p.frames)
        if (f.user) line(f.file, f.line);
    for (const core::OomEvent& e : p.oom) {
        line(e.file, e.line);
        for (const core::OomLineBytes& l : e.byLine) line(l.file, l.line);
    }
    return wanted;
}

core::SourceFile recorded(const SourceText& text, const Wanted& wanted) {
    core::SourceFile out;
    out.fnv1a64 = *text.hash;
    auto keep = [&](uint64_t n) {
        auto it = text.lines.find(n);
        if (it != text.lines.end() && it->second.size() <= kMaxRecordedLineBytes)
            out.lines.insert(*it);
    };
    for (uint64_t n : wanted.lines) keep(n);
    // As the line table shows a block: its def, then every line to its last row.
    for (const auto& [function, rows] : wanted.blocks) {
        const uint64_t from = findDefinition(text.lines, rows.first, function);
        for (auto it = text.lines.lower_bound(from);
             it != text.lines.end() && it->first <= rows.second; ++it)
            keep(it->first);
    }
    return out;
}

}  // namespace

void recordSources(core::Trace& trace) {
    // Processes of one run mostly share their files: each is read once.
    std::map<std::pair<std::string, std::string>, SourceText> read;  // (cwd, file)
    for (core::ProcessTrace& p : trace.processes) {
        const SourceFiles files(p.cwd, true);
        for (const auto& [file, wanted] : wantedLines(p)) {
            auto [it, fresh] = read.try_emplace({p.cwd, file});
            if (fresh) it->second = files.read(file);
            if (it->second.found && it->second.hash) p.sources[file] = recorded(it->second, wanted);
        }
    }
}

SourceText reportedSource(const core::ProcessTrace& p, const std::string& file, SourceText here) {
    auto it = p.sources.find(file);
    if (it == p.sources.end()) return here;
    SourceText out;
    out.lines = it->second.lines;
    out.found = true;
    out.recorded = true;
    out.hash = it->second.fnv1a64;
    out.changed = here.found && here.hash && *here.hash != it->second.fnv1a64;
    return out;
}

std::string changedSourceNote(const std::string& file) {
    return file + " changed since the run: lines shown as recorded";
}

std::string recordedLineCode(const core::ProcessTrace& p, const std::string& file, uint64_t line) {
    auto source = p.sources.find(file);
    if (source == p.sources.end()) return {};
    auto it = source->second.lines.find(line);
    if (it == source->second.lines.end()) return {};
    const std::string& code = it->second;
    const size_t first = code.find_first_not_of(" \t");
    const size_t last = code.find_last_not_of(" \t\r");
    return first == std::string::npos ? "" : code.substr(first, last - first + 1);
}

}  // namespace memtool::reporters
