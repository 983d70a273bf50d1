#pragma once
// The one error type the CLI and reporters throw; main() prints its message as a
// single line and exits with its code. Codes are documented in README.md.

#include <stdexcept>
#include <string>

namespace memtool::core {

inline constexpr int kExitCheckFailed = 1;  // memtool check: a limit was passed
inline constexpr int kExitBadInput = 2;     // usage error, unreadable or invalid trace
inline constexpr int kExitInternal = 70;    // report, check, diff: a bug in memtool (EX_SOFTWARE)
inline constexpr int kExitRunFailed = 125;  // memtool run could not profile (no collector, ...)
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;

class Error : public std::runtime_error {
public:
    Error(int exitCode, const std::string& message)
        : std::runtime_error(message), exitCode_(exitCode) {}
    int exitCode() const { return exitCode_; }

private:
    int exitCode_;
};

}  // namespace memtool::core
