#pragma once
// trace.json's text written straight from the model, laid out byte for byte as
// nlohmann's dump(1) lays out the same document: no JSON document is built. At
// the end of a run the document (a node per value, a map per object) cost more
// than the rest of the end together, most of it first touches of the memory it
// took (docs/TRACE.md describes the fields; TraceJson.h reads them back).

#include <string>

#include "core/TraceModel.h"

namespace memtool::reporters {

// One hotspot, one line row, as trace.json writes them (their pools included),
// at the outermost level; the whole trace is traceToText (TraceJson.h).
std::string hotspotText(const core::Hotspot& h);
std::string lineText(const core::LineStat& l);

}  // namespace memtool::reporters
