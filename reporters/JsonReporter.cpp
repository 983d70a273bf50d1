#include "reporters/JsonReporter.h"

#include "reporters/TraceJson.h"

namespace memtool::reporters {

nlohmann::json renderJson(const core::Trace& trace, const ReportOptions& options,
                          const LineReportOptions* lines) {
    nlohmann::json full = traceToJson(trace);
    for (size_t i = 0; i < trace.processes.size(); ++i) {
        const auto& p = trace.processes[i];
        nlohmann::json top = nlohmann::json::object();
        for (const auto& [device, totals] : p.devices) {
            nlohmann::json rows = nlohmann::json::array();
            for (const core::Hotspot* h : selectHotspots(p, device, optionsFor(p, device, options)))
                rows.push_back(hotspotToJson(*h));
            top[device] = rows;
        }
        auto& out = full["processes"][i];
        out.erase("hotspots");
        out["top_hotspots"] = top;
        out["sort"] = sortKeyName(options.sort);
        if (lines) {
            nlohmann::json rows = nlohmann::json::array();
            for (const core::LineStat* l : selectLineRows(p, *lines))
                rows.push_back(lineToJson(*l));
            out["line_table"] = rows;
        }
    }
    return full;
}

}  // namespace memtool::reporters
