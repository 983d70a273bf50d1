#pragma once
// `memtool report --format html`: one self-contained page that works offline. The
// reporter writes the tables as HTML and the charts' data as JSON; a small script
// of our own (reporters/html/report.js, inlined with its style sheet) draws a
// timeline per device with its peak and its control and OOM events, and a flame
// graph (icicle) of the stacks holding memory at the peak and one of the bytes
// allocated over the run, zoomable by click; it also sorts the tables and shows
// tooltips. A Content-Security-Policy in the page forbids fetching anything.

#include <ostream>
#include <string>
#include <vector>

#include "reporters/LineReporter.h"
#include "trace/EventLog.h"
#include "trace/HotspotSelection.h"
#include "trace/TraceModel.h"

namespace memtool::reporters {

struct HtmlOptions {
    ReportOptions hotspots;  // order and number of each device's hotspot rows
    // Which line rows, as `--lines` chooses them, and where their code comes from
    // (LineReporter.h: lineSource).
    LineReportOptions lines;
    std::string source;  // where the trace came from, for the page's footer
    // The trace's event log, when it has one: the moment view and the events
    // before each focus (HtmlMoments.h).
    const core::EventLog* events = nullptr;
};

void renderHtml(const core::Trace& trace, const HtmlOptions& options, std::ostream& out);

}  // namespace memtool::reporters
