#include "cli/ctl/CtlSelection.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cli/run/OutputPattern.h"
#include "core/Error.h"
#include "core/LauncherRanks.h"
#include "reporters/Markup.h"

namespace memtool::cli {

namespace {

// Named apart from CtlCommand.cpp's usage(): a unity build compiles both in one unit.
[[noreturn]] void ctlUsageError(const std::string& message) {
    throw core::Error(core::kExitBadInput, "ctl: " + message);
}

// --rank's value: a rank as launchers write them (core::launcherNumber).
int64_t rankValue(const std::string& text) {
    const std::optional<int64_t> rank = core::launcherNumber(text);
    if (!rank)
        ctlUsageError("--rank takes a rank (a whole number, 0 or more), not '" +
                      reporters::escapeTerminal(text) + "'");
    return *rank;
}

// --run's value: the pid of a memtool run (processIdOf).
int64_t runValue(const std::string& text) {
    const std::optional<int64_t> pid = processIdOf(text);
    if (!pid)
        ctlUsageError("--run takes the pid of a memtool run (ctl list's RUN), not '" +
                      reporters::escapeTerminal(text) + "'");
    return *pid;
}

}  // namespace

std::optional<int64_t> processIdOf(const std::string& word) {
    const bool digits =
        !word.empty() && word.size() <= 7 &&
        std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t pid = digits ? std::stoll(word) : 0;
    if (pid <= 0 || pid > 4194304) return std::nullopt;
    return pid;
}

std::optional<CtlSelection> takeSelection(std::vector<std::string>& words) {
    std::optional<CtlSelection> selection;
    std::vector<std::string> rest;
    const auto set = [&](CtlSelection s) {
        if (selection)
            ctlUsageError(
                fmt::format("{} and {} cannot go together: give one of --all, --rank N, --run ID",
                            selectionText(*selection), selectionText(s)));
        selection = s;
    };
    for (size_t i = 0; i < words.size(); ++i) {
        std::string name = words[i], value;
        const size_t eq = name.find('=');
        const bool inlineValue = eq != std::string::npos;
        if (inlineValue) {
            value = name.substr(eq + 1);
            name.resize(eq);
        }
        if (name == "--all") {
            if (inlineValue) ctlUsageError("--all takes no value");
            set({CtlSelection::By::All, 0});
            continue;
        }
        if (name != "--rank" && name != "--run") {
            rest.push_back(words[i]);
            continue;
        }
        if (!inlineValue) {
            if (i + 1 >= words.size()) ctlUsageError(name + " needs a value");
            value = words[++i];
        }
        if (name == "--rank")
            set({CtlSelection::By::Rank, rankValue(value)});
        else
            set({CtlSelection::By::Run, runValue(value)});
    }
    words = std::move(rest);
    return selection;
}

bool selects(const CtlSelection& selection, int64_t runPid, const nlohmann::json& process) {
    switch (selection.by) {
        case CtlSelection::By::All:
            return true;
        case CtlSelection::By::Run:
            return runPid == selection.value;
        case CtlSelection::By::Rank: {
            const auto rank = process.find("rank");
            return rank != process.end() && rank->is_number_integer() &&
                   rank->get<int64_t>() == selection.value;
        }
    }
    return false;
}

std::string selectionText(const CtlSelection& selection) {
    switch (selection.by) {
        case CtlSelection::By::All:
            return "--all";
        case CtlSelection::By::Rank:
            return fmt::format("--rank {}", selection.value);
        case CtlSelection::By::Run:
            return fmt::format("--run {}", selection.value);
    }
    return {};
}

std::vector<std::string> snapshotFiles(const std::string& pattern,
                                       const std::vector<SelectedProcess>& processes,
                                       const CtlSelection& selection) {
    if (pattern.empty() || pattern == "-")
        ctlUsageError(
            fmt::format("snapshot with {} writes a file for each process: give -o FILE (%p in "
                        "it is each one's pid)",
                        selectionText(selection)));
    checkOutputPattern(pattern, core::kExitBadInput);
    std::vector<std::string> files;
    std::map<std::string, int64_t> taken;  // file -> the pid it is for
    for (const SelectedProcess& p : processes) {
        core::ProcessTrace named;
        named.pid = p.pid;
        named.rank = p.rank;
        files.push_back(expandOutputPattern(pattern, named));
        const auto [it, fresh] = taken.try_emplace(files.back(), p.pid);
        if (!fresh)
            ctlUsageError(fmt::format(
                "snapshot with {}: -o {} names one file for processes {} and {}; "
                "put %p (each one's pid) in it",
                selectionText(selection), reporters::escapeTerminal(pattern), it->second, p.pid));
    }
    return files;
}

std::string answerPrefix(const SelectedProcess& process) {
    return process.rank ? fmt::format("[pid {} rank {}] ", process.pid, *process.rank)
                        : fmt::format("[pid {}] ", process.pid);
}

std::string prefixLines(const std::string& text, const std::string& prefix) {
    std::string lines;
    for (size_t start = 0; start < text.size();) {
        const size_t newline = text.find('\n', start);
        const size_t end = newline == std::string::npos ? text.size() : newline;
        lines += prefix;
        lines.append(text, start, end - start);
        lines += '\n';
        start = end + 1;
    }
    return lines;
}

}  // namespace memtool::cli
