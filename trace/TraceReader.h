#pragma once
// trace.json <-> core::Trace. Loading validates the schema and reports any
// problem as core::Error with exit code 2 and a one-line message.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "trace/TraceModel.h"

namespace memtool::reporters {

nlohmann::json traceToJson(const core::Trace& trace);
core::Trace traceFromJson(const nlohmann::json& j, const std::string& origin);
// One hotspot as trace.json writes it (its pools included).
nlohmann::json hotspotToJson(const core::Hotspot& h);
// One line row as trace.json writes it (its pools included).
nlohmann::json lineToJson(const core::LineStat& l);
// One entry of a frames table as trace.json writes it; throws std::exception
// (nlohmann's, or std::runtime_error) for one that is not a frame.
core::Frame readFrame(const nlohmann::json& j);

// A trace file may hold at most this many bytes (its JSON tree takes several times
// as much memory); the environment variable MEMTOOL_MAX_TRACE_BYTES sets another
// limit ("2GiB"). Throws core::Error (2) when that is not a size.
inline constexpr uint64_t kDefaultMaxTraceBytes = uint64_t{256} << 20;
uint64_t maxTraceBytes();
// Deeper JSON is refused before it is parsed (a trace is 6 levels deep).
inline constexpr size_t kMaxTraceNesting = 64;
// False when arrays and objects in `text` nest deeper than `maxDepth` (exact for
// valid JSON; what is not valid JSON fails to parse anyway).
bool nestingWithin(std::string_view text, size_t maxDepth);

// trace.json's text -> the model; `origin` names it in messages. Throws core::Error
// (2) for anything that is not a trace of this schema.
core::Trace traceFromText(const std::string& text, const std::string& origin);
// Reads a regular file (or a shell's pipe, see readRegularFile) of at most
// maxTraceBytes(): a FIFO, a device or a larger file is bad input (2), refused
// before it is read.
core::Trace loadTrace(const std::string& path);
// trace.json's text, written without a JSON document (TraceText.h); strings come
// from the program (argv, file and function names) and the working directory:
// bytes that are not UTF-8 become U+FFFD rather than cost the trace.
std::string traceToText(const core::Trace& trace);
// Writes traceToText atomically, through a temporary file no one else can have
// planted (see replaceFile).
void saveTrace(const core::Trace& trace, const std::string& path);

}  // namespace memtool::reporters
