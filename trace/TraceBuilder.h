#pragma once
// Turns one process's aggregated stream into its trace.json entry: device totals,
// then per stack the native frames (symbolized) with the Python frames put where
// the interpreter's were, the hotspot's site and the per-line rows; last, whether
// the stream arrived whole.

#include <optional>
#include <string>

#include "core/Aggregator.h"
#include "core/SiteChoice.h"
#include "trace/TraceModel.h"

namespace memtool::cli {

// A hotspot's site (core/SiteChoice.h).
using SiteMode = core::SiteMode;

// What the stream cannot say about the process: how it ended, seen from outside.
struct ProcessOutcome {
    std::optional<int> exitCode;
    std::optional<int> exitSignal;
    double durationS = 0;
    std::string streamError;  // set when the stream broke (protocol error, read error)
    bool snapshot = false;    // the process runs on: its stream has no end yet
    // Records read back from its send buffer after it died (CollectorConnection).
    uint64_t recoveredRecords = 0;

    // How it ended, from a status as wait() gives it: its exit code, or the signal
    // that killed it.
    void setExitStatus(int status);
};

class Symbolizer;

// A native stack is shown from its innermost frame out up to and including the
// address whose own function (the last of its frames) is `own`: main (libc's
// start-up frames say nothing), or, when Python frames follow, the interpreter's
// innermost frame (the Python frames stand in for it and everything outside).
bool endsShownStack(const core::Frame& own, bool pythonFollows);

// `symbolizer` answers for the process's native return addresses (for the
// ElfSymbolizer: it knows the modules in agg.modules()).
core::ProcessTrace buildProcessTrace(const core::Aggregator& agg, Symbolizer& symbolizer,
                                     const ProcessOutcome& outcome, SiteMode siteMode);
// The same in two steps: what the stream alone decides (everything but how the
// process ended), which no later event changes once the stream has ended, then
// the outcome. buildProcessTrace is applyOutcome(buildProcessBody(...)).
core::ProcessTrace buildProcessBody(const core::Aggregator& agg, Symbolizer& symbolizer,
                                    SiteMode siteMode);
void applyOutcome(core::ProcessTrace& p, const core::Aggregator& agg,
                  const ProcessOutcome& outcome);

// A timeline as trace.json keeps it: its samples in seconds, and its buckets' width.
core::TimelineSeries timelineSeries(const core::Timeline& timeline);

// One stack as trace.json shows it, innermost frame first: the native frames
// (symbolized) with the Python frames where the interpreter's were.
std::vector<core::Frame> stackFrames(const core::Aggregator& agg, Symbolizer& symbolizer,
                                     const core::StackState& stack);
// The position of the frame a stack is named after (its site); none when empty.
std::optional<size_t> siteOf(const std::vector<core::Frame>& stack, SiteMode mode);
// The site of one stack as the report's tables show it ("step (train.py:7)"), or
// "(no stack)": what the live view lists while the program runs.
std::string siteText(const core::Aggregator& agg, Symbolizer& symbolizer, const core::StackState& s,
                     SiteMode siteMode);

}  // namespace memtool::cli
