#pragma once
// A process's rank, local rank and world size as its launcher set them (torchrun,
// Slurm, Open MPI, MPICH), read from the variables its handshake carries
// (kRankVariables in Protocol.h). One reading for the trace (trace/TraceBuilder)
// and for `memtool ctl` (cli/ctl/ControlServer lists each process's rank, which
// `ctl --rank N` selects by). Header-only, standard library only.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memtool::core {

struct LauncherRanks {
    std::optional<int64_t> rank, localRank, worldSize;
};

// A launcher's variable as a number: digits only (a value like "0,1" is no rank).
inline std::optional<int64_t> launcherNumber(const std::string& text) {
    if (text.empty() || text.size() > 9 ||
        text.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return std::stoll(text);
}

// `environment`: name and value pairs as the handshake has them.
inline LauncherRanks launcherRanks(
    const std::vector<std::pair<std::string, std::string>>& environment) {
    // The first of `names` that the process had set to a number (a name given twice:
    // its last value, as a map of them keeps it).
    const auto firstSet = [&](std::initializer_list<const char*> names) -> std::optional<int64_t> {
        for (const char* name : names)
            for (auto it = environment.rbegin(); it != environment.rend(); ++it)
                if (it->first == name) {
                    if (auto n = launcherNumber(it->second)) return n;
                    break;
                }
        return std::nullopt;
    };
    return {firstSet({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}),
            firstSet({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}),
            firstSet({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})};
}

}  // namespace memtool::core
