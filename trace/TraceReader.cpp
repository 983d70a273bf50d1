#include "trace/TraceReader.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "core/Error.h"
#include "core/Files.h"
#include "core/FrameClassifier.h"
#include "core/FrameTable.h"
#include "core/Protocol.h"
#include "core/SourceHash.h"
#include "core/Units.h"
#include "trace/EventLog.h"
#include "trace/RecordedSources.h"
#include "trace/TraceWriter.h"

namespace memtool::reporters {

using nlohmann::json;

namespace {

// A field that is JSON but not what the schema says (a negative byte count, a
// frame id past the table): the trace is bad input, like a missing field.
class MalformedTrace : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A value quoted in a message: the start of it, on one line.
std::string brief(const json& v) {
    std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    constexpr size_t kMax = 40;
    return text.size() <= kMax ? text : text.substr(0, kMax) + "...";
}

// Byte counts, event counts, ids and line numbers: whole numbers, never negative
// (nlohmann would wrap -1 round to 2^64 - 1 without a word).
uint64_t unsignedValue(const json& v, const std::string& what) {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
        throw MalformedTrace(what + " is " + brief(v) + ", not a whole number >= 0");
    return v.get<uint64_t>();
}

uint64_t unsignedField(const json& j, const char* key) {
    return unsignedValue(j.at(key), std::string("\"") + key + "\"");
}

uint64_t optionalUnsigned(const json& j, const char* key) {
    return j.contains(key) ? unsignedField(j, key) : 0;
}

std::optional<int> optionalInt(const json& j, const char* key) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    const json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < std::numeric_limits<int>::min() ||
        v.get<int64_t>() > std::numeric_limits<int>::max())
        throw MalformedTrace(std::string("\"") + key + "\" is " + brief(v) +
                             ", not an integer or null");
    return v.get<int>();
}

template <typename Figures, typename FromJson>
void poolsFromJson(const json& j, std::map<std::string, Figures>& pools, FromJson fromJson) {
    for (const char* name :
         {core::kPoolActive, core::kPoolReserved, core::kPoolGraphs, core::kPoolGraphsActive})
        if (j.contains(name)) pools[name] = fromJson(j.at(name));
}

core::PoolTotals poolTotalsFromJson(const json& j) {
    core::PoolTotals d;
    d.peakBytes = unsignedField(j, "peak_bytes");
    d.currentBytes = unsignedField(j, "current_bytes");
    // Older traces counted leaks at the stream's end.
    d.leakedBytes = j.contains("leaked_bytes") ? unsignedField(j, "leaked_bytes") : d.currentBytes;
    // Older still: leaked was everything live at the moment, none of it held.
    d.heldAtExitBytes = optionalUnsigned(j, "held_at_exit_bytes");
    d.liveAtEndBytes = j.contains("live_at_end_bytes") ? unsignedField(j, "live_at_end_bytes")
                                                       : d.leakedBytes + d.heldAtExitBytes;
    d.teardownFreedBytes = optionalUnsigned(j, "teardown_freed_bytes");
    d.teardownFreeCount = optionalUnsigned(j, "teardown_free_count");
    d.pausedBytes = optionalUnsigned(j, "paused_bytes");
    d.allocatedBytes = unsignedField(j, "allocated_bytes");
    d.freedBytes = unsignedField(j, "freed_bytes");
    d.allocCount = unsignedField(j, "alloc_count");
    d.freeCount = unsignedField(j, "free_count");
    d.peakTimeS = j.value("peak_time_s", 0.0);
    return d;
}

core::HotspotFigures hotspotFiguresFromJson(const json& j) {
    core::HotspotFigures f;
    f.allocatedBytes = unsignedField(j, "allocated_bytes");
    f.count = unsignedField(j, "count");
    f.peakBytes = unsignedField(j, "peak_bytes");
    f.leakedBytes = unsignedField(j, "leaked_bytes");
    f.heldAtExitBytes = optionalUnsigned(j, "held_at_exit_bytes");
    f.liveAtEndBytes = j.contains("live_at_end_bytes") ? unsignedField(j, "live_at_end_bytes")
                                                       : f.leakedBytes + f.heldAtExitBytes;
    return f;
}

core::LineFigures lineFiguresFromJson(const json& j) {
    core::LineFigures f;
    f.peakBytes = unsignedField(j, "peak_bytes");
    f.allocatedBytes = unsignedField(j, "allocated_bytes");
    f.selfAllocatedBytes = unsignedField(j, "self_allocated_bytes");
    f.count = unsignedField(j, "count");
    return f;
}

core::DeviceTotals deviceFromJson(const json& j) {
    core::DeviceTotals d;
    static_cast<core::PoolTotals&>(d) = poolTotalsFromJson(j);
    d.source = j.value("source", std::string());
    poolsFromJson(j, d.pools, poolTotalsFromJson);
    if (j.contains("held_by"))
        for (const json& h : j.at("held_by")) {
            if (d.heldBy.size() == core::kMaxHeldBy) break;
            d.heldBy.push_back({h.at("name").get<std::string>(), unsignedField(h, "bytes")});
        }
    return d;
}

core::EventsSummary eventsSummaryFromJson(const json& j) {
    core::EventsSummary e;
    e.section = unsignedField(j, "section");
    e.mode = j.at("mode").get<std::string>();
    if (e.mode != core::kEventsLast && e.mode != core::kEventsAll)
        throw MalformedTrace("unknown events mode " + brief(j.at("mode")));
    e.limit = unsignedField(j, "limit");
    e.seen = unsignedField(j, "seen");
    e.kept = unsignedField(j, "kept");
    e.folded = unsignedField(j, "folded");
    return e;
}

core::Frame frameFromJson(const json& j) {
    core::Frame f;
    const std::string kind = j.at("kind").get<std::string>();
    if (kind != "python" && kind != "native")
        throw MalformedTrace("unknown frame kind '" + kind + "'");
    f.kind = kind == "python" ? core::FrameKind::Python : core::FrameKind::Native;
    f.function = j.at("function").get<std::string>();
    f.file = j.at("file").get<std::string>();
    f.line = unsignedField(j, "line");
    f.user = j.at("user").get<bool>();
    f.module = j.value("module", std::string());
    f.offset = optionalUnsigned(j, "offset");
    if (f.isPython()) f.source = j.value("source", std::string());
    return f;
}

// `text` is BEFORE, `separator`, then a number in `base` that fits 64 bits (lower-
// case hex digits or decimal ones, nothing else). By hand, not std::regex: its
// matcher recurses per character, and a long frame text overflowed the stack.
bool splitNumber(const std::string& text, const std::string& separator, int base,
                 std::string* before, uint64_t* number) {
    const size_t at = text.rfind(separator);
    if (at == std::string::npos) return false;
    const char* first = text.data() + at + separator.size();
    const char* last = text.data() + text.size();
    if (first == last) return false;
    for (const char* c = first; c != last; ++c)
        if (!((*c >= '0' && *c <= '9') || (base == 16 && *c >= 'a' && *c <= 'f'))) return false;
    const auto [end, error] = std::from_chars(first, last, *number, base);
    if (error != std::errc() || end != last) return false;  // past 64 bits
    *before = text.substr(0, at);
    return true;
}

// A frame as memtool wrote it before trace.json kept frames, as text only:
// "function (file:line)", "function (module)" or "?? (module+0x1a)" (what
// core::formatFrame writes). The one place that reads a frame back from text. A
// file ending in ".py" makes a Python frame, as those memtools told them apart;
// a module is known by its file name only.
core::Frame parseLegacyFrame(const std::string& text) {
    core::Frame f;
    const size_t open = text.rfind(" (");
    if (open == std::string::npos || text.back() != ')') {
        f.function = text;
        return f;
    }
    f.function = text.substr(0, open);
    const std::string where = text.substr(open + 2, text.size() - open - 3);
    uint64_t number = 0;
    std::string before;
    if (f.function == "??" && splitNumber(where, "+0x", 16, &before, &number)) {
        f.module = before == "?" ? "" : before;
        f.offset = number;
    } else if (splitNumber(where, ":", 10, &before, &number)) {
        f.file = before;
        f.line = number;
        const bool python = f.file.size() >= 3 && f.file.compare(f.file.size() - 3, 3, ".py") == 0;
        f.kind = python ? core::FrameKind::Python : core::FrameKind::Native;
        f.user = python && !core::isLibraryPythonFile(f.file);
    } else {
        f.module = where == "?" ? "" : where;
    }
    if (!f.isPython() && f.function == "??") f.function.clear();
    return f;
}

uint32_t frameId(const json& id, size_t tableSize) {
    const uint64_t v = unsignedValue(id, "a frame id");
    if (v >= tableSize)
        throw MalformedTrace("frame id " + std::to_string(v) + " is not in the frames table (" +
                             std::to_string(tableSize) + " frames)");
    return static_cast<uint32_t>(v);
}

// A stack (a hotspot's, an out-of-memory request's) as ids into the frames
// table: its "frames" and "site_frame"; or, written before trace.json kept them,
// its text `site` and `stack` parsed and added to `frames`.
void stackIdsFromJson(const json& j, const std::string& site, const std::vector<std::string>& stack,
                      core::FrameTable& frames, size_t tableSize, std::vector<uint32_t>& ids,
                      std::optional<uint32_t>& siteId) {
    if (j.contains("frames")) {
        for (const json& id : j.at("frames")) ids.push_back(frameId(id, tableSize));
        if (!j.at("site_frame").is_null()) siteId = frameId(j.at("site_frame"), tableSize);
        return;
    }
    for (const std::string& text : stack) ids.push_back(frames.intern(parseLegacyFrame(text)));
    if (site != core::kNoStackSite) siteId = frames.intern(parseLegacyFrame(site));
}

// `frames` holds the process's table as read; hotspots from an older memtool
// (no "frames" of their own) add the frames parsed from their text to it.
core::Hotspot hotspotFromJson(const json& j, core::FrameTable& frames, size_t tableSize) {
    core::Hotspot h;
    h.device = j.at("device").get<std::string>();
    h.site = j.at("site").get<std::string>();
    h.stack = j.at("stack").get<std::vector<std::string>>();
    stackIdsFromJson(j, h.site, h.stack, frames, tableSize, h.frames, h.siteFrame);
    static_cast<core::HotspotFigures&>(h) = hotspotFiguresFromJson(j);
    poolsFromJson(j, h.pools, hotspotFiguresFromJson);
    return h;
}

core::LineStat lineFromJson(const json& j) {
    core::LineStat l;
    l.file = j.at("file").get<std::string>();
    l.line = unsignedField(j, "line");
    l.function = j.at("function").get<std::string>();
    l.device = j.at("device").get<std::string>();
    static_cast<core::LineFigures&>(l) = lineFiguresFromJson(j);
    poolsFromJson(j, l.pools, lineFiguresFromJson);
    return l;
}

// "live_at_attach": {"time_s", "storages": [{device, name, bytes}]} or {"unlisted"}.
void liveAtAttachFromJson(const json& j, core::ProcessTrace& p) {
    if (!j.is_object()) throw MalformedTrace("\"live_at_attach\" is not an object");
    if (j.contains("unlisted")) p.liveAtAttachUnlisted = j.at("unlisted").get<std::string>();
    if (!j.contains("time_s")) return;
    p.liveAtAttachTimeS = j.at("time_s").get<double>();
    for (const json& s : j.at("storages"))
        p.liveAtAttach.push_back({s.at("device").get<std::string>(),
                                  s.at("name").get<std::string>(), unsignedField(s, "bytes")});
}

core::RegionTotals regionFromJson(const json& j) {
    core::RegionTotals r;
    r.tag = j.at("tag").get<std::string>();
    r.device = j.at("device").get<std::string>();
    r.backup = j.at("backup").get<std::string>();
    r.bytes = unsignedField(j, "bytes");
    r.pausedBytes = unsignedField(j, "paused_bytes");
    return r;
}

core::GraphPool graphPoolFromJson(const json& j) {
    core::GraphPool g;
    g.device = j.at("device").get<std::string>();
    const uint64_t number = unsignedField(j, "number");
    if (number == 0 || number > core::kMaxGraphPools)
        throw MalformedTrace("a graph pool's \"number\" is " + std::to_string(number) +
                             ", not 1 to " + std::to_string(core::kMaxGraphPools));
    g.number = static_cast<uint32_t>(number);
    const json& id = j.at("id");
    if (!id.is_array() || id.size() != 2 || !id[0].is_number_unsigned() ||
        !id[1].is_number_unsigned())
        throw MalformedTrace("a graph pool's \"id\" is " + brief(id) +
                             ", not two unsigned integers");
    g.idFirst = id[0].get<uint64_t>();
    g.idSecond = id[1].get<uint64_t>();
    g.reservedPeakBytes = unsignedField(j, "reserved_peak_bytes");
    g.activePeakBytes = unsignedField(j, "active_peak_bytes");
    g.reservedEndBytes = unsignedField(j, "reserved_end_bytes");
    g.activeEndBytes = unsignedField(j, "active_end_bytes");
    if (j.contains("sites"))
        for (const json& site : j.at("sites"))
            g.sites.push_back(
                {site.at("site").get<std::string>(), unsignedField(site, "allocated_bytes")});
    return g;
}

core::ControlEvent controlFromJson(const json& j) {
    core::ControlEvent e;
    e.timeS = j.at("time_s").get<double>();
    e.action = j.at("action").get<std::string>();
    e.origin = j.at("origin").get<std::string>();
    e.tag = j.at("tag").get<std::string>();
    e.device = j.at("device").get<std::string>();
    e.bytes = unsignedField(j, "bytes");
    e.backup = j.at("backup").get<std::string>();
    e.durationS = j.at("duration_s").get<double>();
    e.ok = j.at("ok").get<bool>();
    e.message = j.at("message").get<std::string>();
    return e;
}

// Whether an older trace's site text names a frame ("f (file:line)", "g (lib.so)"),
// not a row of the rest ("(3 other sites)") or kNoStackSite.
bool namesAFrame(const std::string& text) {
    return text.size() > 2 && text.back() == ')' && text.rfind(" (") != std::string::npos;
}

// `frames` as in hotspotFromJson: events from an older memtool (no "frames" of
// their own) add the frames parsed from their text to it.
core::OomEvent oomFromJson(const json& j, core::FrameTable& frames, size_t tableSize) {
    core::OomEvent e;
    e.timeS = j.at("time_s").get<double>();
    e.device = j.at("device").get<std::string>();
    e.requestedBytes = unsignedField(j, "requested_bytes");
    if (!j.contains("source")) return e;  // a trace from before capture
    e.source = j.at("source").get<std::string>();
    e.site = j.at("site").get<std::string>();
    e.stack = j.at("stack").get<std::vector<std::string>>();
    stackIdsFromJson(j, e.site, e.stack, frames, tableSize, e.frames, e.siteFrame);
    e.file = j.at("file").get<std::string>();
    e.line = unsignedField(j, "line");
    e.function = j.at("function").get<std::string>();
    e.heldOn = j.at("held_on").get<std::string>();
    e.liveBytes = unsignedField(j, "live_bytes");
    e.deviceFreeBytes = unsignedField(j, "device_free_bytes");
    e.deviceTotalBytes = unsignedField(j, "device_total_bytes");
    for (const auto& s : j.at("by_site")) {
        core::OomSiteBytes row{s.at("site").get<std::string>(), unsignedField(s, "bytes"),
                               std::nullopt};
        if (s.contains("site_frame")) {
            if (!s.at("site_frame").is_null())
                row.siteFrame = frameId(s.at("site_frame"), tableSize);
        } else if (namesAFrame(row.site)) {
            row.siteFrame = frames.intern(parseLegacyFrame(row.site));
        }
        e.bySite.push_back(std::move(row));
    }
    for (const auto& l : j.at("by_line"))
        e.byLine.push_back({l.at("file").get<std::string>(), unsignedField(l, "line"),
                            l.at("function").get<std::string>(), unsignedField(l, "bytes")});
    return e;
}

core::TimelineSeries timelineSeriesFromJson(const json& j) {
    core::TimelineSeries series;
    series.bucketS = j.at("bucket_s").get<double>();
    for (const json& p : j.at("points")) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number())
            throw MalformedTrace("a timeline point is " + p.dump() + ", not [time_s, bytes]");
        const double t = p[0].get<double>();
        // Reports draw the points in order; a series that goes back in time is not one memtool
        // wrote.
        if (!series.points.empty() && t < series.points.back().timeS)
            throw MalformedTrace("timeline points go back in time");
        series.points.push_back({t, unsignedValue(p[1], "a timeline point's bytes")});
    }
    return series;
}

// Reports print these lines as they are, one per row: a line that holds a newline,
// or is longer than memtool records, or lines out of order are not what memtool
// wrote.
core::SourceFile sourceFileFromJson(const std::string& file, const json& j) {
    const std::string name = brief(json(file));
    if (!j.is_object())
        throw MalformedTrace("source " + name + " is " + brief(j) + ", not an object");
    core::SourceFile s;
    const json& hash = j.at("fnv1a64");
    const std::optional<uint64_t> h =
        hash.is_string() ? core::parseHashText(hash.get_ref<const std::string&>()) : std::nullopt;
    if (!h)
        throw MalformedTrace("the hash of source " + name + " is " + brief(hash) +
                             ", not 16 lowercase hex digits (FNV-1a, 64 bits)");
    s.fnv1a64 = *h;
    const json& lines = j.at("lines");
    if (!lines.is_array())
        throw MalformedTrace("the lines of source " + name + " are not an array");
    for (const json& l : lines) {
        if (!l.is_array() || l.size() != 2 || !l[1].is_string())
            throw MalformedTrace("a line of source " + name + " is " + brief(l) +
                                 ", not [line, text]");
        const uint64_t n = unsignedValue(l[0], "a line number of source " + name);
        if (n == 0 || (!s.lines.empty() && n <= s.lines.rbegin()->first))
            throw MalformedTrace("the lines of source " + name + " are not numbered from 1 up");
        const std::string& text = l[1].get_ref<const std::string&>();
        if (text.size() > kMaxRecordedLineBytes || text.find('\n') != std::string::npos)
            throw MalformedTrace(fmt::format(
                "line {} of source {} is {}", n, name,
                text.size() > kMaxRecordedLineBytes ? "longer than 64 KiB" : "more than one line"));
        s.lines.emplace_hint(s.lines.end(), n, text);
    }
    return s;
}

core::PollSeries pollsFromJson(const json& j) {
    core::PollSeries p;
    p.intervalMs = static_cast<uint32_t>(unsignedField(j, "interval_ms"));
    p.rounds = unsignedField(j, "rounds");
    p.startUnixS = j.at("start_unix_s").get<double>();
    p.hostSource = j.at("host_source").get<std::string>();
    p.cudaSource = j.at("cuda_source").get<std::string>();
    for (const auto& [name, series] : j.at("series").items())
        p.series[name] = timelineSeriesFromJson(series);
    return p;
}

core::PolicyAction policyActionFromJson(const json& j) {
    core::PolicyAction a;
    a.pid = j.at("pid").get<int64_t>();
    a.timeS = j.at("time_s").get<double>();
    a.rule = unsignedField(j, "rule");
    a.ruleText = j.at("rule_text").get<std::string>();
    a.device = j.at("device").get<std::string>();
    a.metric = j.at("metric").get<std::string>();
    a.readingBytes = unsignedField(j, "reading_bytes");
    a.thresholdBytes = unsignedField(j, "threshold_bytes");
    if (j.contains("used_percent")) a.usedPercent = j.at("used_percent").get<double>();
    a.action = j.at("do").get<std::string>();
    a.ok = j.at("ok").get<bool>();
    a.message = j.at("message").get<std::string>();
    a.bytes = unsignedField(j, "bytes");
    a.seconds = j.at("seconds").get<double>();
    return a;
}

core::ProcessTrace processFromJson(const json& j) {
    core::ProcessTrace p;
    p.pid = j.at("pid").get<int64_t>();
    p.ppid = j.value("ppid", int64_t{0});
    p.command = j.at("command").get<std::vector<std::string>>();
    p.cwd = j.value("cwd", std::string());
    p.exitCode = optionalInt(j, "exit_code");
    p.exitSignal = optionalInt(j, "exit_signal");
    p.complete = j.at("complete").get<bool>();
    p.snapshot = j.value("snapshot", false) == true;
    p.forked = j.value("forked", false) == true;
    p.exec = j.value("exec", false) == true;
    p.detached = j.value("detached", false) == true;
    p.earlierFrees = optionalUnsigned(j, "earlier_frees");
    p.attached = j.value("attached", false) == true;
    if (j.contains("live_at_attach")) liveAtAttachFromJson(j.at("live_at_attach"), p);
    p.rank = optionalInt(j, "rank");
    p.localRank = optionalInt(j, "local_rank");
    p.worldSize = optionalInt(j, "world_size");
    if (j.contains("rank_environment"))
        for (const auto& [name, value] : j.at("rank_environment").items())
            if (value.is_string()) p.rankEnvironment[name] = value.get<std::string>();
    p.incompleteReason = j.value("incomplete_reason", std::string());
    p.durationS = j.at("duration_s").get<double>();
    p.leakMoment = j.value("leak_moment", std::string(core::kLeakAtEnd));
    if (p.leakMoment != core::kLeakAtPython && p.leakMoment != core::kLeakAtExit &&
        p.leakMoment != core::kLeakAtEnd)
        throw MalformedTrace("unknown leak_moment '" + p.leakMoment + "'");
    p.leakTimeS = j.value("leak_time_s", 0.0);
    p.heldAtExitKnown = j.value("held_at_exit_known", false);
    p.maxRssBytes = optionalUnsigned(j, "max_rss_bytes");
    if (j.contains("cpu_s")) p.cpuS = j.at("cpu_s").get<double>();
    if (j.contains("start_unix_s")) {
        // Unix seconds, as a clock gives them (to the year 5138): what puts the
        // processes on one clock cannot be anything else.
        p.startUnixS = j.at("start_unix_s").get<double>();
        if (!(*p.startUnixS >= 0 && *p.startUnixS < 1e11))
            throw MalformedTrace("start_unix_s is not a time (Unix seconds)");
    }
    p.host = j.value("host", std::string());
    p.nativeStacks = j.value("native_stacks", true);
    p.pythonStacks = j.value("python_stacks", true);
    for (const auto& [name, d] : j.at("devices").items()) p.devices[name] = deviceFromJson(d);
    std::vector<core::Frame> table;
    if (j.contains("frames"))
        for (const auto& f : j.at("frames")) table.push_back(frameFromJson(f));
    const size_t tableSize = table.size();
    core::FrameTable frames(std::move(table));
    for (const auto& h : j.at("hotspots"))
        p.hotspots.push_back(hotspotFromJson(h, frames, tableSize));
    if (j.contains("lines"))
        for (const auto& l : j["lines"]) p.lines.push_back(lineFromJson(l));
    if (j.contains("stream")) {
        const json& s = j["stream"];
        p.stream.verified = s.value("verified", false);
        p.stream.readBack = s.value("read_back", false);
        p.stream.recordsReceived = optionalUnsigned(s, "records");
        p.stream.allocsReceived = optionalUnsigned(s, "allocs");
        p.stream.freesReceived = optionalUnsigned(s, "frees");
        p.stream.unmatchedFrees = optionalUnsigned(s, "unmatched_frees");
        p.stream.missedEvents = optionalUnsigned(s, "missed_events");
        p.stream.lockCounted = s.contains("lock_contended");
        p.stream.lockContended = optionalUnsigned(s, "lock_contended");
        p.stream.lockWaits = optionalUnsigned(s, "lock_waits");
    }
    if (j.contains("regions"))
        for (const auto& r : j.at("regions")) p.regions.push_back(regionFromJson(r));
    if (j.contains("control"))
        for (const auto& c : j.at("control")) p.control.push_back(controlFromJson(c));
    if (j.contains("oom"))
        for (const auto& e : j.at("oom")) p.oom.push_back(oomFromJson(e, frames, tableSize));
    if (j.contains("graph_pools"))
        for (const auto& g : j.at("graph_pools")) p.graphPools.push_back(graphPoolFromJson(g));
    p.frames = std::move(frames).release();
    p.oomCount = j.contains("oom_count") ? unsignedField(j, "oom_count") : p.oom.size();
    if (j.contains("timeline"))
        for (const auto& [name, series] : j.at("timeline").items())
            p.timeline[name] = timelineSeriesFromJson(series);
    if (j.contains("sources")) {
        if (!j.at("sources").is_object()) throw MalformedTrace("\"sources\" is not an object");
        for (const auto& [file, source] : j.at("sources").items())
            p.sources[file] = sourceFileFromJson(file, source);
    }
    if (j.contains("warnings")) p.warnings = j["warnings"].get<std::vector<std::string>>();
    if (j.contains("events")) p.events = eventsSummaryFromJson(j.at("events"));
    // Older traces say it by what they hold: a collector's stream has at least its
    // handshake; the untracked program has no stream and no device.
    p.tracked = j.contains("tracked") ? j.at("tracked").get<bool>()
                                      : !p.devices.empty() || p.stream.recordsReceived > 0;
    return p;
}

}  // namespace

// The text is the one writer of trace.json (TraceText.h); a document is what it
// reads back as.
core::Frame readFrame(const json& j) { return frameFromJson(j); }

json traceToJson(const core::Trace& trace) { return json::parse(traceToText(trace)); }

json hotspotToJson(const core::Hotspot& h) { return json::parse(hotspotText(h)); }

json lineToJson(const core::LineStat& l) { return json::parse(lineText(l)); }

core::Trace traceFromJson(const json& j, const std::string& origin) {
    if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string())
        throw core::Error(core::kExitBadInput,
                          origin + ": not a memtool trace (no \"schema\" field)");
    std::string schema = j["schema"].get<std::string>();
    if (schema != core::kTraceSchema) {
        throw core::Error(core::kExitBadInput, origin + ": unknown schema '" + schema +
                                                   "' (this memtool reads " + core::kTraceSchema +
                                                   ")");
    }
    try {
        core::Trace t;
        t.schema = schema;
        t.memtoolVersion = j.value("memtool_version", std::string());
        t.cliMaxRssBytes = optionalUnsigned(j, "cli_max_rss_bytes");
        if (j.contains("cli_cpu_s")) t.cliCpuS = j.at("cli_cpu_s").get<double>();
        for (const auto& p : j.at("processes")) t.processes.push_back(processFromJson(p));
        if (j.contains("polls")) t.polls = pollsFromJson(j.at("polls"));
        if (j.contains("policy_actions"))
            for (const auto& a : j.at("policy_actions"))
                t.policyActions.push_back(policyActionFromJson(a));
        t.eventsFile = j.value("events_file", std::string());
        return t;
    } catch (const json::exception& e) {
        throw core::Error(core::kExitBadInput, origin + ": malformed trace: " + e.what());
    } catch (const MalformedTrace& e) {
        throw core::Error(core::kExitBadInput, origin + ": malformed trace: " + e.what());
    }
}

uint64_t maxTraceBytes() {
    const char* env = std::getenv("MEMTOOL_MAX_TRACE_BYTES");
    if (!env || !*env) return kDefaultMaxTraceBytes;
    const std::optional<uint64_t> bytes = core::parseSize(env);
    if (!bytes || *bytes == 0)
        throw core::Error(core::kExitBadInput, std::string("MEMTOOL_MAX_TRACE_BYTES='") + env +
                                                   "' is not a size (e.g. 2GiB)");
    return *bytes;
}

bool nestingWithin(std::string_view text, size_t maxDepth) {
    size_t depth = 0;
    bool inString = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\')
                ++i;  // the escaped character, a quote included
            else if (c == '"')
                inString = false;
        } else if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > maxDepth) return false;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return true;
}

core::Trace traceFromText(const std::string& text, const std::string& origin) {
    // nlohmann parses iteratively, but dumps, copies and compares recursively: a
    // deep enough document would overflow the stack later. A trace is 6 deep.
    if (!nestingWithin(text, kMaxTraceNesting))
        throw core::Error(core::kExitBadInput,
                          fmt::format("{}: not a memtool trace (nested deeper than {} levels)",
                                      origin, kMaxTraceNesting));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) throw core::Error(core::kExitBadInput, origin + ": not valid JSON");
    return traceFromJson(j, origin);
}

core::Trace loadTrace(const std::string& path) {
    const uint64_t limit = maxTraceBytes();
    std::string why;
    const std::optional<std::string> text =
        core::readRegularFile(path, limit, &why, /*anonymousPipes=*/true);
    if (!text) {
        if (why.rfind("it is larger", 0) == 0) why += "; MEMTOOL_MAX_TRACE_BYTES raises the limit";
        throw core::Error(core::kExitBadInput, "cannot open " + path + ": " + why);
    }
    return traceFromText(*text, path);
}

void saveTrace(const core::Trace& trace, const std::string& path) {
    core::replaceFile(path, traceToText(trace), core::kExitRunFailed);
}

}  // namespace memtool::reporters
