#pragma once
// Which processes one `memtool ctl` command goes to when it names no pid: a
// selection of those `ctl list` shows, so a whole job on this host is commanded
// at once (`srun --overlap memtool ctl --all yield` on every node of a job).
//
//   --all      every process of the user's runs (what `ctl list` shows)
//   --rank N   those whose launcher set their rank to N (RANK, SLURM_PROCID,
//              OMPI_COMM_WORLD_RANK, PMI_RANK: core/LauncherRanks.h)
//   --run ID   those of one `memtool run`, named by its pid (ctl list's RUN)
//
// The command goes to each selected process at once (CtlCommand.cpp), which
// answers for itself.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace memtool::cli {

struct CtlSelection {
    enum class By { All, Rank, Run };
    By by = By::All;
    int64_t value = 0;  // the rank, or the pid of the memtool run
};

// A process id as the kernel gives them: digits only (no sign, no space), 1 to
// 4194304 (PID_MAX_LIMIT); anything else is none, never another pid wrapped.
// What `ctl PID` and `--run ID` take.
std::optional<int64_t> processIdOf(const std::string& word);

// Takes --all, --rank N and --run ID (also --rank=N, --run=ID) out of `words`,
// wherever they stand, as ctl's other options are. None: nullopt. Two of them, a
// rank that is not a whole number or a run that is not a process id: a usage
// error (core::Error, exit 2), one line.
std::optional<CtlSelection> takeSelection(std::vector<std::string>& words);

// Whether a process of `ctl list` (a run's listing entry, its fields checked) of
// the memtool run `runPid` is selected.
bool selects(const CtlSelection& selection, int64_t runPid, const nlohmann::json& process);

// How the selection was given, for messages: "--all", "--rank 1", "--run 4200".
std::string selectionText(const CtlSelection& selection);

// A selected process, as a selection's snapshot and answers name it.
struct SelectedProcess {
    int64_t pid = 0;
    std::optional<int64_t> rank;  // none where no launcher set one
};

// The files a selection's `snapshot -o FILE` writes, one for each of `processes`
// (in their order): FILE is a pattern as `memtool run -o` takes (%p the pid, %r
// the rank, %% a %: cli/run/OutputPattern.h). Two processes whose names are the
// same file (several selected, FILE without %p) would overwrite each other's:
// that, another %, and no FILE or "-" (the traces would run together on stdout)
// are usage errors (core::Error, exit 2), all before anything is sent.
std::vector<std::string> snapshotFiles(const std::string& pattern,
                                       const std::vector<SelectedProcess>& processes,
                                       const CtlSelection& selection);

// What heads each line of one process's answer to a selection: "[pid 1234 rank 1] ",
// "[pid 1234] " where no launcher set its rank. The answers of a job's processes
// come together, so each line says whose it is (and `grep 'rank 3]'` finds one's).
std::string answerPrefix(const SelectedProcess& process);

// `text` with `prefix` before each of its lines; a last line without a newline
// gets one, so one process's answer never runs into the next one's.
std::string prefixLines(const std::string& text, const std::string& prefix);

}  // namespace memtool::cli
