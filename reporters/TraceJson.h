#pragma once
// trace.json <-> core::Trace. Loading validates the schema and reports any
// problem as core::Error with exit code 2 and a one-line message.

#include <nlohmann/json.hpp>
#include <string>

#include "core/TraceModel.h"

namespace memtool::reporters {

nlohmann::json traceToJson(const core::Trace& trace);
core::Trace traceFromJson(const nlohmann::json& j, const std::string& origin);
// One hotspot as trace.json writes it (its pools included).
nlohmann::json hotspotToJson(const core::Hotspot& h);

core::Trace loadTrace(const std::string& path);
// Writes atomically (temporary file, then rename).
void saveTrace(const core::Trace& trace, const std::string& path);

}  // namespace memtool::reporters
