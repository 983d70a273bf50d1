#pragma once
// What report, check and diff share on their command lines: --pid and --rank,
// --bytes, counts in decimal digits, and where their text goes.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "reporters/ProcessSelection.h"

namespace memtool::cli {

// The most rows or frames a report is asked for: more than any trace holds.
inline constexpr uint64_t kMostShown = 1000000000;

// Writes `text` to the file at `path`, or to stdout when the path is empty.
void writeText(const std::string& path, const std::string& text);

// --pid and --rank; `what`: "shown (...)" and the like.
void addProcessOptions(CLI::App* command, reporters::ProcessFilter& filter, const char* what);

// A count in decimal digits, at most `most`. CLI11 (2.1, Debian's) reads an
// unsigned option with strtoull in base 0: "-1" became the largest count, "010"
// eight, "0x3" three.
CLI::Validator decimalCount(uint64_t most);

// --bytes: how sizes are written in text.
CLI::Option* addBytesOption(CLI::App* command, std::string& units);

}  // namespace memtool::cli
