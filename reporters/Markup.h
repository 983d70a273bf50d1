#pragma once
// Text from a trace (names, paths, messages) inside XML or HTML: the JUnit file of
// `memtool check` and the HTML report escape it alike.

#include <string>

namespace memtool::reporters {

// & < > " ' as entities: safe in element text and in quoted attribute values.
std::string escapeMarkup(const std::string& text);

}  // namespace memtool::reporters
