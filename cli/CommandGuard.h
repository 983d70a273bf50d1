#pragma once
// How a subcommand ends when it throws. A core::Error is an expected failure: its
// message as one line, its exit code. Anything else is a bug in memtool: an
// "internal error" line and `unexpectedExitCode`, never a code that blames the
// input or the environment.

#include <functional>
#include <ostream>

namespace memtool::cli {

// Returns what `command` returns, or the exit code of what it threw, after
// printing "memtool: <message>" to `err`.
int runGuarded(const std::function<int()>& command, int unexpectedExitCode, std::ostream& err);

}  // namespace memtool::cli
