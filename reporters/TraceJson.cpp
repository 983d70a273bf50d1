#include "reporters/TraceJson.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/Error.h"

namespace memtool::reporters {

using nlohmann::json;

namespace {

// "active" and "reserved" ride inside their device, hotspot or line entry.
template <typename Figures, typename ToJson>
void poolsToJson(json& j, const std::map<std::string, Figures>& pools, ToJson toJson) {
    for (const auto& [name, f] : pools) j[name] = toJson(f);
}

template <typename Figures, typename FromJson>
void poolsFromJson(const json& j, std::map<std::string, Figures>& pools, FromJson fromJson) {
    for (const char* name : {core::kPoolActive, core::kPoolReserved})
        if (j.contains(name)) pools[name] = fromJson(j.at(name));
}

json poolTotalsToJson(const core::PoolTotals& d) {
    return json{{"peak_bytes", d.peakBytes},         {"current_bytes", d.currentBytes},
                {"allocated_bytes", d.allocatedBytes}, {"freed_bytes", d.freedBytes},
                {"alloc_count", d.allocCount},       {"free_count", d.freeCount},
                {"peak_time_s", d.peakTimeS}};
}

core::PoolTotals poolTotalsFromJson(const json& j) {
    core::PoolTotals d;
    d.peakBytes = j.at("peak_bytes").get<uint64_t>();
    d.currentBytes = j.at("current_bytes").get<uint64_t>();
    d.allocatedBytes = j.at("allocated_bytes").get<uint64_t>();
    d.freedBytes = j.at("freed_bytes").get<uint64_t>();
    d.allocCount = j.at("alloc_count").get<uint64_t>();
    d.freeCount = j.at("free_count").get<uint64_t>();
    d.peakTimeS = j.value("peak_time_s", 0.0);
    return d;
}

json hotspotFiguresToJson(const core::HotspotFigures& f) {
    return json{{"allocated_bytes", f.allocatedBytes},
                {"count", f.count},
                {"peak_bytes", f.peakBytes},
                {"leaked_bytes", f.leakedBytes}};
}

core::HotspotFigures hotspotFiguresFromJson(const json& j) {
    core::HotspotFigures f;
    f.allocatedBytes = j.at("allocated_bytes").get<uint64_t>();
    f.count = j.at("count").get<uint64_t>();
    f.peakBytes = j.at("peak_bytes").get<uint64_t>();
    f.leakedBytes = j.at("leaked_bytes").get<uint64_t>();
    return f;
}

json lineFiguresToJson(const core::LineFigures& f) {
    return json{{"peak_bytes", f.peakBytes},
                {"allocated_bytes", f.allocatedBytes},
                {"self_allocated_bytes", f.selfAllocatedBytes},
                {"count", f.count}};
}

core::LineFigures lineFiguresFromJson(const json& j) {
    core::LineFigures f;
    f.peakBytes = j.at("peak_bytes").get<uint64_t>();
    f.allocatedBytes = j.at("allocated_bytes").get<uint64_t>();
    f.selfAllocatedBytes = j.at("self_allocated_bytes").get<uint64_t>();
    f.count = j.at("count").get<uint64_t>();
    return f;
}

json deviceToJson(const core::DeviceTotals& d) {
    json j = poolTotalsToJson(d);
    j["source"] = d.source;
    poolsToJson(j, d.pools, poolTotalsToJson);
    return j;
}

core::DeviceTotals deviceFromJson(const json& j) {
    core::DeviceTotals d;
    static_cast<core::PoolTotals&>(d) = poolTotalsFromJson(j);
    d.source = j.value("source", std::string());
    poolsFromJson(j, d.pools, poolTotalsFromJson);
    return d;
}

}  // namespace

json hotspotToJson(const core::Hotspot& h) {
    json e = hotspotFiguresToJson(h);
    e["device"] = h.device;
    e["site"] = h.site;
    e["stack"] = h.stack;
    poolsToJson(e, h.pools, hotspotFiguresToJson);
    return e;
}

namespace {

json processToJson(const core::ProcessTrace& p) {
    json devices = json::object();
    for (const auto& [name, d] : p.devices) devices[name] = deviceToJson(d);
    json hotspots = json::array();
    for (const auto& h : p.hotspots) {
        hotspots.push_back(hotspotToJson(h));
    }
    json lines = json::array();
    for (const auto& l : p.lines) {
        json e = lineFiguresToJson(l);
        e["file"] = l.file;
        e["line"] = l.line;
        e["function"] = l.function;
        e["device"] = l.device;
        poolsToJson(e, l.pools, lineFiguresToJson);
        lines.push_back(std::move(e));
    }
    json j = {{"pid", p.pid},
              {"ppid", p.ppid},
              {"command", p.command},
              {"cwd", p.cwd},
              {"exit_code", p.exitCode ? json(*p.exitCode) : json(nullptr)},
              {"exit_signal", p.exitSignal ? json(*p.exitSignal) : json(nullptr)},
              {"complete", p.complete},
              {"duration_s", p.durationS},
              {"max_rss_bytes", p.maxRssBytes},
              {"native_stacks", p.nativeStacks},
              {"python_stacks", p.pythonStacks},
              {"devices", devices},
              {"hotspots", hotspots},
              {"lines", lines},
              {"stream",
               {{"verified", p.stream.verified},
                {"records", p.stream.recordsReceived},
                {"allocs", p.stream.allocsReceived},
                {"frees", p.stream.freesReceived},
                {"unmatched_frees", p.stream.unmatchedFrees},
                {"missed_events", p.stream.missedEvents}}},
              {"warnings", p.warnings}};
    if (!p.complete) j["incomplete_reason"] = p.incompleteReason;
    return j;
}

core::ProcessTrace processFromJson(const json& j) {
    core::ProcessTrace p;
    p.pid = j.at("pid").get<int64_t>();
    p.ppid = j.value("ppid", int64_t{0});
    p.command = j.at("command").get<std::vector<std::string>>();
    p.cwd = j.value("cwd", std::string());
    if (j.contains("exit_code") && !j["exit_code"].is_null()) p.exitCode = j["exit_code"].get<int>();
    if (j.contains("exit_signal") && !j["exit_signal"].is_null()) p.exitSignal = j["exit_signal"].get<int>();
    p.complete = j.at("complete").get<bool>();
    p.incompleteReason = j.value("incomplete_reason", std::string());
    p.durationS = j.at("duration_s").get<double>();
    p.maxRssBytes = j.value("max_rss_bytes", uint64_t{0});
    p.nativeStacks = j.value("native_stacks", true);
    p.pythonStacks = j.value("python_stacks", true);
    for (const auto& [name, d] : j.at("devices").items()) p.devices[name] = deviceFromJson(d);
    for (const auto& h : j.at("hotspots")) {
        core::Hotspot s;
        s.device = h.at("device").get<std::string>();
        s.site = h.at("site").get<std::string>();
        s.stack = h.at("stack").get<std::vector<std::string>>();
        static_cast<core::HotspotFigures&>(s) = hotspotFiguresFromJson(h);
        poolsFromJson(h, s.pools, hotspotFiguresFromJson);
        p.hotspots.push_back(std::move(s));
    }
    if (j.contains("lines")) {
        for (const auto& l : j["lines"]) {
            core::LineStat s;
            s.file = l.at("file").get<std::string>();
            s.line = l.at("line").get<uint64_t>();
            s.function = l.at("function").get<std::string>();
            s.device = l.at("device").get<std::string>();
            static_cast<core::LineFigures&>(s) = lineFiguresFromJson(l);
            poolsFromJson(l, s.pools, lineFiguresFromJson);
            p.lines.push_back(std::move(s));
        }
    }
    if (j.contains("stream")) {
        const json& s = j["stream"];
        p.stream.verified = s.value("verified", false);
        p.stream.recordsReceived = s.value("records", uint64_t{0});
        p.stream.allocsReceived = s.value("allocs", uint64_t{0});
        p.stream.freesReceived = s.value("frees", uint64_t{0});
        p.stream.unmatchedFrees = s.value("unmatched_frees", uint64_t{0});
        p.stream.missedEvents = s.value("missed_events", uint64_t{0});
    }
    if (j.contains("warnings")) p.warnings = j["warnings"].get<std::vector<std::string>>();
    return p;
}

}  // namespace

json traceToJson(const core::Trace& trace) {
    json processes = json::array();
    for (const auto& p : trace.processes) processes.push_back(processToJson(p));
    return {{"schema", trace.schema},
            {"memtool_version", trace.memtoolVersion},
            {"cli_max_rss_bytes", trace.cliMaxRssBytes},
            {"processes", processes}};
}

core::Trace traceFromJson(const json& j, const std::string& origin) {
    if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string())
        throw core::Error(core::kExitBadInput, origin + ": not a memtool trace (no \"schema\" field)");
    std::string schema = j["schema"].get<std::string>();
    if (schema != core::kTraceSchema) {
        throw core::Error(core::kExitBadInput, origin + ": unknown schema '" + schema +
                                                   "' (this memtool reads " + core::kTraceSchema + ")");
    }
    try {
        core::Trace t;
        t.schema = schema;
        t.memtoolVersion = j.value("memtool_version", std::string());
        t.cliMaxRssBytes = j.value("cli_max_rss_bytes", uint64_t{0});
        for (const auto& p : j.at("processes")) t.processes.push_back(processFromJson(p));
        return t;
    } catch (const json::exception& e) {
        throw core::Error(core::kExitBadInput, origin + ": malformed trace: " + e.what());
    }
}

core::Trace loadTrace(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw core::Error(core::kExitBadInput, "cannot open " + path + ": " + std::strerror(errno));
    std::stringstream buf;
    buf << in.rdbuf();
    json j = json::parse(buf.str(), nullptr, false);
    if (j.is_discarded()) throw core::Error(core::kExitBadInput, path + ": not valid JSON");
    return traceFromJson(j, path);
}

void saveTrace(const core::Trace& trace, const std::string& path) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw core::Error(core::kExitRunFailed, "cannot write " + tmp + ": " + std::strerror(errno));
        out << traceToJson(trace).dump(1) << '\n';
        if (!out) throw core::Error(core::kExitRunFailed, "cannot write " + tmp + ": " + std::strerror(errno));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw core::Error(core::kExitRunFailed, "cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace memtool::reporters
