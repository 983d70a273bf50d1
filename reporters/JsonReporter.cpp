#include "reporters/JsonReporter.h"

#include "reporters/HotspotRows.h"
#include "reporters/RankSummary.h"
#include "trace/TraceReader.h"

namespace memtool::reporters {

namespace {

using nlohmann::json;

// A row as trace.json writes a hotspot, its site chosen again (--site) and the
// frames the text table shows with it; a grouped row (--group-by) names its
// group instead of a stack. Frames are ids into the process's `frames`.
json rowToJson(const core::ProcessTrace& p, const HotspotRow& row) {
    json e = hotspotToJson(row.figures);
    for (const char* key : {"site", "site_frame", "frames", "stack"}) e.erase(key);
    e["stacks"] = row.stacks;
    if (!row.group.empty()) {
        e["group"] = row.group;
        return e;
    }
    e["site"] = row.site ? core::formatFrame(p.frames.at(*row.site)) : core::kNoStackSite;
    e["site_frame"] = row.site ? json(*row.site) : json(nullptr);
    e["below"] = row.below;
    e["callers"] = row.callers;
    e["frames"] = row.largest->frames;
    e["stack"] = row.largest->stack;
    return e;
}

}  // namespace

json renderJson(const core::Trace& trace, const ReportOptions& options,
                const LineReportOptions* lines) {
    json full = traceToJson(trace);
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const auto& p = trace.processes[i];
        json top = json::object(), others = json::object();
        for (const auto& [device, totals] : p.devices) {
            json rows = json::array();
            HotspotRest rest;
            for (const HotspotRow& row :
                 hotspotRows(p, device, optionsFor(p, device, options), &rest))
                rows.push_back(rowToJson(p, row));
            top[device] = rows;
            // What --top left out, summed: with top_hotspots, the device's figures.
            core::Hotspot sum;
            static_cast<core::HotspotFigures&>(sum) = rest.figures;
            sum.pools = rest.pools;
            sum.device = device;
            json o = hotspotToJson(sum);
            for (const char* key : {"site", "site_frame", "frames", "stack"}) o.erase(key);
            o["rows"] = rest.rows;
            others[device] = o;
        }
        auto& out = full["processes"][i];
        out.erase("hotspots");
        out["top_hotspots"] = top;
        out["other_hotspots"] = others;
        out["sort"] = sortKeyName(options.sort);
        out["site_mode"] = options.site ? core::siteModeName(*options.site) : "recorded";
        out["depth"] = options.depth;
        out["group_by"] = groupByName(options.groupBy);
        if (lines) {
            json rows = json::array();
            for (const core::LineStat* l : selectLineRows(p, *lines))
                rows.push_back(lineToJson(*l));
            out["line_table"] = rows;
        }
    }
    // Several processes: the figures the text report opens with.
    if (trace.processes.size() > 1) full["ranks"] = rankSummaryJson(trace, summarizeRanks(trace));
    return full;
}

}  // namespace memtool::reporters
