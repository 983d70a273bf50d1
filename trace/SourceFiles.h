#pragma once
// Where `memtool report --lines` finds the code it prints beside its numbers. The
// file names come from the trace, and a trace may come from someone else: a name
// alone must not make memtool print /etc/passwd, block on a FIFO or read
// /dev/zero until memory runs out. So, unless the user says otherwise
// (--read-any-file), only files inside both the directory the trace was recorded in
// (its `cwd`) and the directory `memtool report` runs in are read, after every
// symbolic link is resolved:
//
//   - a trace recorded here (its cwd exists on this machine): names are read
//     where they are, relative ones from the trace's cwd;
//   - a trace without a directory here (none recorded, one that does not exist on
//     this machine, e.g. a CI machine's, or "/"): names are taken relative to its
//     cwd and read from the current directory, the matching checkout, but only
//     those the trace recorded a hash of (RecordedSources.h: memtool run read
//     them), and only to tell whether they changed: the recorded text is shown.
//     Otherwise a report run in / or $HOME would show whatever file a crafted
//     trace names there;
//
// and in every case only regular files of at most kMaxSourceBytes.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::reporters {

inline constexpr uint64_t kMaxSourceBytes = uint64_t{16} << 20;

struct SourceText {
    // Line number (from 1) -> its text. A file read here has every line; the text a
    // trace recorded (RecordedSources.h) only those its reports show.
    std::map<uint64_t, std::string> lines;
    bool found = false;
    std::string why;               // when not found and not merely missing: why it was not read
    std::optional<uint64_t> hash;  // a file read here: core::fnv1a64 of its bytes
    bool recorded = false;         // the text is the trace's, as memtool run read it
    bool changed = false;          // recorded, and the file here is no longer what was read
};

// "a\nb\n" -> {1: "a", 2: "b"}: a file's lines without their newlines.
std::map<uint64_t, std::string> numberedLines(const std::string& text);

// How far above a function's first row its `def` is looked for, in lines.
inline constexpr uint64_t kDefinitionReach = 500;
// The line of `def name(` (or `async def`) of `function` (its last dotted part) at
// or above line `from` of `src`, within kDefinitionReach; `from` when none is.
uint64_t findDefinition(const std::map<uint64_t, std::string>& src, uint64_t from,
                        const std::string& function);

class SourceFiles {
public:
    // `traceCwd`: the process's cwd as the trace has it ("" when unknown);
    // `anywhere`: --read-any-file, read any regular file the trace names;
    // `recorded`: the files the trace recorded (ProcessTrace::sources), by name.
    SourceFiles(std::string traceCwd, bool anywhere,
                const std::map<std::string, core::SourceFile>* recorded = nullptr);

    SourceText read(const std::string& file) const;

private:
    std::string traceCwd_;
    std::string traceCwdReal_;  // traceCwd_ resolved, "" when it does not exist here
    std::string here_;          // the current directory, resolved
    bool anywhere_;
    const std::map<std::string, core::SourceFile>* recorded_;
};

}  // namespace memtool::reporters
