#pragma once
// What `memtool run` answers about a live process from what its stream said so
// far: the tensors report (the program's Python-visible tensors, matched with
// the live storages the allocator handed out; the rest named by allocation site)
// and snapshots (a trace.json as of now).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/Aggregator.h"
#include "trace/TraceBuilder.h"

namespace memtool::cli {

class Symbolizer;

struct TensorsQuery {
    std::optional<std::string> device;  // "cpu", "cuda:0"; none: every device
    bool verbose = false;               // each invisible storage with its whole stack
};

// `visible` is memtool._live's answer ({"tensors": [...]}, from the target: data,
// checked field by field). The result, per device: the visible tensors, the
// storages no visible tensor owns grouped by site (or one by one, verbose), and
// the reconciliation: visible storages found live + invisible = live bytes.
nlohmann::json tensorsReport(const core::Aggregator& agg, Symbolizer& symbolizer,
                             const nlohmann::json& visible, const TensorsQuery& query,
                             SiteMode siteMode);

// memtool.allocated(), freed(), current(), peak() and top_sites() (MemLord's
// questions), from the stream so far: per device (cpu, cuda:0, ...; not the
// caching allocator's pools) its counters, and per allocation site on each device
// what it allocated, freed (allocated less what is still live) and holds now.
// `withSites` false: the devices alone (no stack is symbolized).
nlohmann::json countersReport(const core::Aggregator& agg, Symbolizer& symbolizer,
                              SiteMode siteMode, bool withSites);

}  // namespace memtool::cli
