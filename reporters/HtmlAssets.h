#pragma once
// The HTML report's script and style sheet, inlined into every report. They live as
// files of their own (reporters/html/), which CMake turns into these strings.

namespace memtool::reporters {

extern const char* const kHtmlStyle;         // html/report.css
extern const char* const kHtmlErrorCatcher;  // html/errors.js: first, in <head>
extern const char* const kHtmlScript;        // html/report.js: last, in <body>

}  // namespace memtool::reporters
