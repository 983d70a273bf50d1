#include "trace/SourceFiles.h"

#include <cstdlib>
#include <optional>

#include "core/Files.h"
#include "core/SourceHash.h"

namespace memtool::reporters {

namespace {

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

// The path with every symbolic link, "." and ".." resolved; nullopt when it does
// not exist.
std::optional<std::string> resolved(const std::string& path) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (!real) return std::nullopt;
    std::string out(real);
    std::free(real);
    return out;
}

// `path` is `dir` or inside it (both absolute, without a trailing slash but "/").
bool inside(const std::string& path, const std::string& dir) {
    if (dir.empty()) return false;
    if (dir == "/") return path[0] == '/';
    return path.compare(0, dir.size(), dir) == 0 &&
           (path.size() == dir.size() || path[dir.size()] == '/');
}

const char* const kOutside =
    "outside the directory the trace was recorded in or the one memtool runs in; "
    "--read-any-file reads it";
const char* const kNotRecorded =
    "the trace has no directory here and no record of this file; --read-any-file reads it";

}  // namespace

uint64_t findDefinition(const std::map<uint64_t, std::string>& src, uint64_t from,
                        const std::string& function) {
    const size_t dot = function.rfind('.');
    const std::string last = function.substr(dot == std::string::npos ? 0 : dot + 1);
    if (last.empty() || last[0] == '<') return from;
    for (auto it = src.upper_bound(from); it != src.begin();) {
        --it;
        if (from - it->first >= kDefinitionReach) break;
        if (definesFunction(it->second, last)) return it->first;
    }
    return from;
}

std::map<uint64_t, std::string> numberedLines(const std::string& text) {
    std::map<uint64_t, std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        lines.emplace_hint(lines.end(), lines.size() + 1, text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

SourceFiles::SourceFiles(std::string traceCwd, bool anywhere,
                         const std::map<std::string, core::SourceFile>* recorded)
    : traceCwd_(std::move(traceCwd)), anywhere_(anywhere), recorded_(recorded) {
    while (traceCwd_.size() > 1 && traceCwd_.back() == '/') traceCwd_.pop_back();
    if (traceCwd_.empty() || traceCwd_[0] != '/') traceCwd_.clear();
    if (!traceCwd_.empty()) traceCwdReal_ = resolved(traceCwd_).value_or("");
    here_ = resolved(".").value_or("");
}

SourceText SourceFiles::read(const std::string& file) const {
    SourceText out;
    if (file.empty()) return out;
    // No directory of its own here: the names could be any file's (see the header).
    const bool guarded = !anywhere_ && (traceCwdReal_.empty() || traceCwdReal_ == "/");
    if (guarded && !(recorded_ && recorded_->count(file))) {
        out.why = kNotRecorded;
        return out;
    }
    const bool absolute = file[0] == '/';
    std::string candidate;
    if (anywhere_ || !traceCwdReal_.empty()) {
        const std::string& base = traceCwdReal_.empty() ? here_ : traceCwdReal_;
        candidate = absolute ? file : base + "/" + file;
    } else if (!absolute) {
        candidate = here_ + "/" + file;  // recorded elsewhere: the matching checkout is here
    } else if (!traceCwd_.empty() && inside(file, traceCwd_)) {
        candidate = here_ + (traceCwd_ == "/" ? file : file.substr(traceCwd_.size()));
    } else {
        out.why = kOutside;
        return out;
    }
    const std::optional<std::string> real = resolved(candidate);
    if (!real) return out;  // not found
    if (!anywhere_ &&
        !(inside(*real, here_) && (traceCwdReal_.empty() || inside(*real, traceCwdReal_)))) {
        out.why = kOutside;
        return out;
    }
    std::string why;
    const std::optional<std::string> text = core::readRegularFile(*real, kMaxSourceBytes, &why);
    if (!text) {
        out.why = why;
        return out;
    }
    out.hash = core::fnv1a64(*text);
    out.found = true;
    // Guarded, the file is read for its hash alone: what is shown is what the trace
    // recorded, flagged where the file here hashes otherwise.
    if (!guarded) out.lines = numberedLines(*text);
    return out;
}

}  // namespace memtool::reporters
