#include "reporters/ProcessSelection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/Error.h"

namespace memtool::reporters {

core::Trace selectProcesses(const core::Trace& trace, const ProcessFilter& filter,
                            const std::string& what) {
    if (!filter.any()) return trace;
    core::Trace selected = trace;
    selected.processes.clear();
    for (const core::ProcessTrace& p : trace.processes)
        if ((!filter.pid || p.pid == *filter.pid) && (!filter.rank || p.rank == filter.rank))
            selected.processes.push_back(p);
    if (selected.processes.empty()) {
        std::string named;
        if (filter.pid) named += fmt::format("pid {}", *filter.pid);
        if (filter.rank)
            named += fmt::format("{}rank {}", named.empty() ? "" : " and ", *filter.rank);
        std::string present;
        for (const core::ProcessTrace& p : trace.processes)
            present += fmt::format("{}{}{}", present.empty() ? "" : ", ", p.pid,
                                   p.rank ? fmt::format(" (rank {})", *p.rank) : "");
        throw core::Error(core::kExitBadInput,
                          fmt::format("{} has no process with {} (it has: {})", what, named,
                                      present.empty() ? "none" : present));
    }
    return selected;
}

std::string rankText(const core::ProcessTrace& p) { return p.rank ? std::to_string(*p.rank) : "-"; }

bool allocated(const core::ProcessTrace& p) {
    for (const auto& [name, d] : p.devices)
        if (d.allocCount > 0 || d.allocatedBytes > 0) return true;
    return false;
}

std::string exitText(const core::ProcessTrace& p) {
    if (p.exec) return "exec'd another program";
    if (p.exitCode) return fmt::format("exit code {}", *p.exitCode);
    if (p.exitSignal) return fmt::format("killed by signal {}", *p.exitSignal);
    if (p.snapshot) return "running (a snapshot)";
    if (p.detached && p.attached) return "ran on (memtool attach detached)";
    if (p.detached) return "ran on (memtool.track ended)";
    return "exit status unknown";
}

std::string noAllocationsText(const core::ProcessTrace& p) {
    if (const std::string why = core::collectorUnloadable(p); !why.empty())
        return "No tracked allocations: " + why + ".";
    if (!p.tracked)
        return "No tracked allocations (the program loaded no allocator memtool tracks).";
    return "No tracked allocations (memtool tracked the program's allocator, and nothing was "
           "allocated through it).";
}

namespace {

// `arg` as a POSIX shell reads it back: bare where nothing in it is special,
// in single quotes otherwise, and in bash's $'...' where it holds a control
// character (a newline of `python3 -c` code), so that a command always shows
// on one line and can be pasted back into a shell.
std::string shellWord(const std::string& arg) {
    const auto plain = [](unsigned char c) {
        return std::isalnum(c) || c >= 0x80 || std::strchr("_@%+=:,./-", c) != nullptr;
    };
    const auto control = [](unsigned char c) { return c < 0x20 || c == 0x7f; };
    if (!arg.empty() && std::all_of(arg.begin(), arg.end(), plain)) return arg;
    if (std::none_of(arg.begin(), arg.end(), control)) {
        std::string s = "'";
        for (char c : arg) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return s + "'";
    }
    std::string s = "$'";
    for (unsigned char c : arg) {
        if (c == '\n')
            s += "\\n";
        else if (c == '\t')
            s += "\\t";
        else if (c == '\\' || c == '\'')
            s += fmt::format("\\{}", static_cast<char>(c));
        else if (control(c))
            s += fmt::format("\\x{:02x}", c);
        else
            s += static_cast<char>(c);
    }
    return s + "'";
}

}  // namespace

std::string commandLine(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) s += (s.empty() ? "" : " ") + shellWord(a);
    return s;
}

std::string commandLine(const core::ProcessTrace& p) { return commandLine(p.command); }

bool commandContains(const core::ProcessTrace& p, const std::string& text) {
    std::string plain;
    for (const auto& a : p.command) plain += (plain.empty() ? "" : " ") + a;
    return plain.find(text) != std::string::npos || commandLine(p).find(text) != std::string::npos;
}

std::string shortText(const std::string& text, size_t maxCharacters) {
    // Characters, not bytes: a cut never splits a UTF-8 sequence.
    size_t characters = 0, cut = text.size();
    for (size_t i = 0; i < text.size(); ++i) {
        if ((text[i] & 0xC0) == 0x80) continue;        // inside a character
        if (characters + 3 == maxCharacters) cut = i;  // where "..." would go
        if (++characters > maxCharacters) return text.substr(0, cut) + "...";
    }
    return text;
}

std::string shortCommand(const core::ProcessTrace& p, size_t maxCharacters) {
    return shortText(commandLine(p), maxCharacters);
}

std::string parentText(const core::Trace& trace, const core::ProcessTrace& p) {
    if (p.forked) return fmt::format("forked from {}", p.ppid);
    for (const core::ProcessTrace& q : trace.processes)
        if (q.pid == p.ppid && &q != &p) return fmt::format("started by {}", p.ppid);
    return "";
}

std::string processLabel(const core::ProcessTrace& p) {
    return fmt::format("pid {} ({})", p.pid, shortCommand(p, 60));
}

std::vector<const core::ProcessTrace*> withCommand(const core::Trace& trace,
                                                   const std::string& text,
                                                   const std::string& what) {
    std::vector<const core::ProcessTrace*> out;
    for (const core::ProcessTrace& p : trace.processes)
        if (commandContains(p, text)) out.push_back(&p);
    if (out.empty() && !text.empty()) {
        std::string known;
        for (const core::ProcessTrace& p : trace.processes)
            known += (known.empty() ? "" : ", ") + processLabel(p);
        throw core::Error(
            core::kExitBadInput,
            fmt::format("no process of {} has a command containing '{}' (it holds {})", what, text,
                        known));
    }
    return out;
}

}  // namespace memtool::reporters
