#pragma once
// Text from a trace (names, paths, messages) or from a target's answer, where it
// is shown: inside XML or HTML (the JUnit file of `memtool check` and the HTML
// report escape it alike), and on a terminal.

#include <string>

namespace memtool::reporters {

// & < > " ' as entities: safe in element text and in quoted attribute values.
std::string escapeMarkup(const std::string& text);

// Nothing a terminal acts on: control characters (C0 but tab and, where
// `keepNewlines`, newline; DEL; C1, U+0080-U+009F) as \xNN and \u00NN, and bytes
// that are not UTF-8 as \xNN, so that a name a program chose cannot move the
// cursor, retitle the window or clear the screen. Plain text comes back as it is.
std::string escapeTerminal(const std::string& text, bool keepNewlines = false);

}  // namespace memtool::reporters
