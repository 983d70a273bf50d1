#include "cli/commands/SharedOptions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "core/Error.h"

namespace memtool::cli {

void writeText(const std::string& path, const std::string& text) {
    if (path.empty()) {
        std::cout << text;
        return;
    }
    std::ofstream out(path, std::ios::trunc);
    if (out) out << text << std::flush;
    // errno from the open or the write that failed: "Is a directory", "Permission denied".
    if (!out)
        throw core::Error(core::kExitBadInput,
                          "cannot write " + path + ": " + std::strerror(errno));
}

void addProcessOptions(CLI::App* command, reporters::ProcessFilter& filter, const char* what) {
    command->add_option_function<int64_t>(
        "--pid", [&filter](const int64_t& pid) { filter.pid = pid; },
        std::string("Only the process with this pid is ") + what);
    command->add_option_function<int64_t>(
        "--rank", [&filter](const int64_t& rank) { filter.rank = rank; },
        std::string("Only the processes of this rank (RANK, SLURM_PROCID, ...) are ") + what);
}

CLI::Validator decimalCount(uint64_t most) {
    return CLI::Validator(
        [most](std::string& text) -> std::string {
            const bool digits =
                !text.empty() && text.size() <= 20 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (!digits || std::strtoull(text.c_str(), nullptr, 10) > most)
                return fmt::format("'{}' is not a whole number from 0 to {}", text, most);
            // What CLI11 then converts (a transform may change it): no leading zeros.
            text.erase(0, std::min(text.find_first_not_of('0'), text.size() - 1));
            return {};
        },
        "COUNT");
}

CLI::Option* addBytesOption(CLI::App* command, std::string& units) {
    return command
        ->add_option("--bytes", units,
                     "How sizes are written: iec (1 KiB = 1,024 B), si (1 kB = 1,000 B) or "
                     "exact (40,000 B)")
        ->check(CLI::IsMember({"iec", "si", "exact"}))
        ->capture_default_str();
}

}  // namespace memtool::cli
