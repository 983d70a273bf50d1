#pragma once
// Turns one process's aggregated stream into its trace.json entry: symbolizes
// native frames, puts Python frames where the interpreter's were, names each
// hotspot's site and derives the per-line table.

#include <optional>
#include <string>

#include "core/Aggregator.h"
#include "core/TraceModel.h"

namespace memtool::cli {

enum class SiteMode { User, All };

struct ProcessOutcome {
    std::optional<int> exitCode;
    std::optional<int> exitSignal;
    double durationS = 0;
    std::string streamError;  // set when the stream broke (protocol error, read error)
};

class Symbolizer;

// `symbolizer` must know the process's modules (those in agg.modules()).
core::ProcessTrace buildProcessTrace(const core::Aggregator& agg, Symbolizer& symbolizer,
                                     const ProcessOutcome& outcome, SiteMode siteMode);

}  // namespace memtool::cli
