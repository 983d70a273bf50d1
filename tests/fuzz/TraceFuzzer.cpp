// libFuzzer harness: a trace.json from someone else, through everything that reads
// one: the loader, report (table, JSON, lines, collapsed, perfetto, HTML), check
// against limits and against itself as a baseline, diff. core::Error (bad input, exit 2) is the
// expected answer to a bad trace; anything else that escapes, and any sanitizer report, is a bug.
// Sources for --lines come from a fixed text here, not from the file system.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/Error.h"
#include "reporters/Check.h"
#include "reporters/CollapsedReporter.h"
#include "reporters/Diff.h"
#include "reporters/HtmlReporter.h"
#include "reporters/JsonReporter.h"
#include "reporters/LineReporter.h"
#include "reporters/PerfettoReporter.h"
#include "reporters/TableReporter.h"
#include "trace/TraceReader.h"

namespace {

using namespace memtool;

void report(const core::Trace& trace) {
    std::ostringstream out;
    for (reporters::SortKey sort :
         {reporters::SortKey::Peak, reporters::SortKey::Leaked, reporters::SortKey::Active}) {
        reporters::ReportOptions o;
        o.top = 3;
        o.sort = sort;
        reporters::renderTable(trace, o, out);
        reporters::renderJson(trace, o).dump();
    }
    reporters::LineReportOptions lines;
    lines.allFiles = true;
    lines.readSource = [](const std::string& file, const std::string&) {
        reporters::SourceText s;
        s.found = file.size() % 2 == 0;
        if (s.found)
            s.lines = reporters::numberedLines(
                "import torch\ndef f(x):\n    y = torch.empty(x)\n    return y\n");
        return s;
    };
    reporters::renderLines(trace, lines, out);
    for (reporters::Metric m :
         {reporters::Metric::Peak, reporters::Metric::Allocated, reporters::Metric::Leaked})
        reporters::renderCollapsed(trace, m, out);
    reporters::renderPerfetto(trace).dump();
    reporters::HtmlOptions html;
    html.lines = lines;
    reporters::renderHtml(trace, html, out);
}

void check(const core::Trace& trace) {
    reporters::CheckOptions o;
    for (const char* limit : {"cpu=1MiB", "cuda=2GB", "cuda:0.active=1", "pinned=0"})
        o.limits.push_back(reporters::parsePeakLimit(limit));
    o.baseline = trace;
    o.maxIncrease = reporters::parseIncrease("5%");
    for (reporters::Metric m :
         {reporters::Metric::Peak, reporters::Metric::Allocated, reporters::Metric::Leaked}) {
        o.metric = m;
        const auto results = reporters::runChecks(trace, o);
        std::ostringstream out;
        reporters::renderCheckText(results, out);
        reporters::renderCheckJson(results, out);
        reporters::renderCheckJunit(results, "fuzz.json", out);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    core::Trace trace;
    try {
        trace = reporters::traceFromText(std::string(reinterpret_cast<const char*>(data), size),
                                         "fuzz");
    } catch (const core::Error& e) {
        if (e.exitCode() != core::kExitBadInput) throw;
        return 0;
    }
    // Past the loader, what is left to refuse is check's and diff's own bad input
    // (a trace without processes), also exit 2.
    try {
        report(trace);
        check(trace);
        std::ostringstream out;
        reporters::DiffOptions o;
        o.top = 5;
        const reporters::TraceDiff d = reporters::diffTraces(trace, trace, o);
        reporters::renderDiffText(d, out);
        reporters::renderDiffJson(d, out);
    } catch (const core::Error& e) {
        if (e.exitCode() != core::kExitBadInput) throw;
    }
    return 0;
}
