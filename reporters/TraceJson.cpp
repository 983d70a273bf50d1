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

json deviceToJson(const core::DeviceTotals& d) {
    return json{{"peak_bytes", d.peakBytes},         {"current_bytes", d.currentBytes},
                {"allocated_bytes", d.allocatedBytes}, {"freed_bytes", d.freedBytes},
                {"alloc_count", d.allocCount},       {"free_count", d.freeCount},
                {"peak_time_s", d.peakTimeS},       {"source", d.source}};
}

core::DeviceTotals deviceFromJson(const json& j) {
    core::DeviceTotals d;
    d.peakBytes = j.at("peak_bytes").get<uint64_t>();
    d.currentBytes = j.at("current_bytes").get<uint64_t>();
    d.allocatedBytes = j.at("allocated_bytes").get<uint64_t>();
    d.freedBytes = j.at("freed_bytes").get<uint64_t>();
    d.allocCount = j.at("alloc_count").get<uint64_t>();
    d.freeCount = j.at("free_count").get<uint64_t>();
    d.peakTimeS = j.value("peak_time_s", 0.0);
    d.source = j.value("source", std::string());
    return d;
}

json processToJson(const core::ProcessTrace& p) {
    json devices = json::object();
    for (const auto& [name, d] : p.devices) devices[name] = deviceToJson(d);
    json hotspots = json::array();
    for (const auto& h : p.hotspots) {
        hotspots.push_back({{"device", h.device},
                            {"site", h.site},
                            {"stack", h.stack},
                            {"allocated_bytes", h.allocatedBytes},
                            {"count", h.count},
                            {"peak_bytes", h.peakBytes},
                            {"leaked_bytes", h.leakedBytes}});
    }
    json lines = json::array();
    for (const auto& l : p.lines) {
        lines.push_back({{"file", l.file},
                         {"line", l.line},
                         {"function", l.function},
                         {"device", l.device},
                         {"peak_bytes", l.peakBytes},
                         {"allocated_bytes", l.allocatedBytes},
                         {"self_allocated_bytes", l.selfAllocatedBytes},
                         {"count", l.count}});
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
        s.allocatedBytes = h.at("allocated_bytes").get<uint64_t>();
        s.count = h.at("count").get<uint64_t>();
        s.peakBytes = h.at("peak_bytes").get<uint64_t>();
        s.leakedBytes = h.at("leaked_bytes").get<uint64_t>();
        p.hotspots.push_back(std::move(s));
    }
    if (j.contains("lines")) {
        for (const auto& l : j["lines"]) {
            core::LineStat s;
            s.file = l.at("file").get<std::string>();
            s.line = l.at("line").get<uint64_t>();
            s.function = l.at("function").get<std::string>();
            s.device = l.at("device").get<std::string>();
            s.peakBytes = l.at("peak_bytes").get<uint64_t>();
            s.allocatedBytes = l.at("allocated_bytes").get<uint64_t>();
            s.selfAllocatedBytes = l.at("self_allocated_bytes").get<uint64_t>();
            s.count = l.at("count").get<uint64_t>();
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
