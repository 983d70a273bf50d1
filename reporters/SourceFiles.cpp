#include "reporters/SourceFiles.h"

#include <cstdlib>
#include <optional>

#include "core/SourceHash.h"
#include "reporters/Files.h"

namespace memtool::reporters {

namespace {

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
    "--all-files reads it";

}  // namespace

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

SourceFiles::SourceFiles(std::string traceCwd, bool anywhere)
    : traceCwd_(std::move(traceCwd)), anywhere_(anywhere) {
    while (traceCwd_.size() > 1 && traceCwd_.back() == '/') traceCwd_.pop_back();
    if (traceCwd_.empty() || traceCwd_[0] != '/') traceCwd_.clear();
    if (!traceCwd_.empty()) traceCwdReal_ = resolved(traceCwd_).value_or("");
    here_ = resolved(".").value_or("");
}

SourceText SourceFiles::read(const std::string& file) const {
    SourceText out;
    if (file.empty()) return out;
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
    const std::optional<std::string> text = readRegularFile(*real, kMaxSourceBytes, &why);
    if (!text) {
        out.why = why;
        return out;
    }
    out.lines = numberedLines(*text);
    out.hash = core::fnv1a64(*text);
    out.found = true;
    return out;
}

}  // namespace memtool::reporters
