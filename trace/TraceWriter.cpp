#include "trace/TraceWriter.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/SourceHash.h"
#include "trace/TraceReader.h"

namespace memtool::reporters {

namespace {

using nlohmann::json;

// JSON as nlohmann's dump(1) writes it: a newline and one space a level before
// each member and element, "key": value, empty objects and arrays as {} and [].
class TextWriter {
public:
    // An object's members (distinct keys), listed in whatever order reads best:
    // written sorted by key, as a JSON document (a std::map) keeps them.
    using Member = std::pair<std::string_view, std::function<void()>>;

    // `depth`: the level of what is written (a process's members are at
    // kProcessMemberDepth).
    explicit TextWriter(std::string& out, int depth = 0) : out_(out), depth_(depth) {}
    // A whole trace's writer: text given to rawKept is noted in `inserts`, not
    // copied (TextPieces).
    TextWriter(std::string& out, std::vector<std::pair<size_t, std::string_view>>* inserts)
        : out_(out), depth_(0), inserts_(inserts) {}

    void object(std::vector<Member> members) {
        std::sort(members.begin(), members.end(),
                  [](const Member& a, const Member& b) { return a.first < b.first; });
        out_ += '{';
        ++depth_;
        bool first = true;
        for (const Member& m : members) {
            if (!first) out_ += ',';
            first = false;
            newline();
            value(m.first);
            out_ += ": ";
            m.second();
        }
        close('}', first);
    }

    template <typename Range, typename Each>
    void array(const Range& items, Each each) {
        out_ += '[';
        ++depth_;
        bool first = true;
        for (const auto& item : items) {
            if (!first) out_ += ',';
            first = false;
            newline();
            each(item);
        }
        close(']', first);
    }

    // [a, b], as the timeline's points and the sources' lines are written.
    template <typename A, typename B>
    void pair(const A& a, const B& b) {
        out_ += '[';
        ++depth_;
        newline();
        value(a);
        out_ += ',';
        newline();
        value(b);
        close(']', false);
    }

    // An object keyed by the map's keys, each value written by `each`.
    template <typename Map, typename Each>
    void map(const Map& m, Each each) {
        std::vector<Member> members;
        members.reserve(m.size());
        for (const auto& entry : m)
            members.emplace_back(entry.first, [&each, &entry] { each(entry.second); });
        object(std::move(members));
    }

    // Text written by another TextWriter at this one's level.
    void raw(std::string_view text) { out_ += text; }
    // The same, for text that outlives what this writer writes: only a whole
    // trace's writer (the constructor with `inserts`) is given any.
    void rawKept(std::string_view text) { inserts_->emplace_back(out_.size(), text); }
    void null() { out_ += "null"; }
    void value(bool b) { out_ += b ? "true" : "false"; }
    template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
    void value(I i) {
        char digits[24];
        const auto end = std::to_chars(digits, digits + sizeof digits, i).ptr;
        out_.append(digits, end);
    }
    // The shortest text that reads back as the same double, as nlohmann writes it.
    void value(double d) { out_ += json(d).dump(); }
    void value(const char* s) { value(std::string_view(s)); }
    void value(std::string_view s) {
        // Printable ASCII goes out as it is; anything else is escaped (and bytes
        // that are not UTF-8 replaced) by nlohmann's own writer.
        const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
            return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
        });
        if (plain) {
            out_ += '"';
            out_ += s;
            out_ += '"';
        } else {
            out_ += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
        }
    }
    template <typename T>
    void value(const std::optional<T>& v) {
        if (v)
            value(*v);
        else
            null();
    }
    template <typename T>
    void value(const std::vector<T>& items) {
        array(items, [this](const T& item) { value(item); });
    }

private:
    void newline() {
        out_ += '\n';
        out_.append(static_cast<size_t>(depth_), ' ');
    }
    void close(char bracket, bool empty) {
        --depth_;
        if (!empty) newline();
        out_ += bracket;
    }

    std::string& out_;
    int depth_;
    std::vector<std::pair<size_t, std::string_view>>* inserts_ = nullptr;
};

// The trace's object, its processes array, a process's object.
constexpr int kProcessMemberDepth = 3;

using Members = std::vector<TextWriter::Member>;

// A member written by TextWriter::value.
template <typename T>
TextWriter::Member field(TextWriter& w, std::string_view key, const T& v) {
    return {key, [&w, &v] { w.value(v); }};
}

// "active" and "reserved" ride inside their device, hotspot or line entry.
template <typename Figures, typename Write>
void addPools(Members& m, TextWriter& w, const std::map<std::string, Figures>& pools, Write write) {
    for (const auto& pool : pools)
        m.emplace_back(pool.first, [&w, &pool, write] { write(w, pool.second); });
}

Members poolTotalsMembers(TextWriter& w, const core::PoolTotals& d) {
    return {field(w, "peak_bytes", d.peakBytes),
            field(w, "current_bytes", d.currentBytes),
            field(w, "leaked_bytes", d.leakedBytes),
            field(w, "held_at_exit_bytes", d.heldAtExitBytes),
            field(w, "live_at_end_bytes", d.liveAtEndBytes),
            field(w, "teardown_freed_bytes", d.teardownFreedBytes),
            field(w, "teardown_free_count", d.teardownFreeCount),
            field(w, "paused_bytes", d.pausedBytes),
            field(w, "allocated_bytes", d.allocatedBytes),
            field(w, "freed_bytes", d.freedBytes),
            field(w, "alloc_count", d.allocCount),
            field(w, "free_count", d.freeCount),
            field(w, "peak_time_s", d.peakTimeS)};
}

void writePoolTotals(TextWriter& w, const core::PoolTotals& d) {
    w.object(poolTotalsMembers(w, d));
}

Members hotspotFiguresMembers(TextWriter& w, const core::HotspotFigures& f) {
    return {field(w, "allocated_bytes", f.allocatedBytes),
            field(w, "count", f.count),
            field(w, "peak_bytes", f.peakBytes),
            field(w, "leaked_bytes", f.leakedBytes),
            field(w, "held_at_exit_bytes", f.heldAtExitBytes),
            field(w, "live_at_end_bytes", f.liveAtEndBytes)};
}

void writeHotspotFigures(TextWriter& w, const core::HotspotFigures& f) {
    w.object(hotspotFiguresMembers(w, f));
}

Members lineFiguresMembers(TextWriter& w, const core::LineFigures& f) {
    return {field(w, "peak_bytes", f.peakBytes), field(w, "allocated_bytes", f.allocatedBytes),
            field(w, "self_allocated_bytes", f.selfAllocatedBytes), field(w, "count", f.count)};
}

void writeLineFigures(TextWriter& w, const core::LineFigures& f) {
    w.object(lineFiguresMembers(w, f));
}

void writeDevice(TextWriter& w, const core::DeviceTotals& d) {
    Members m = poolTotalsMembers(w, d);
    m.push_back(field(w, "source", d.source));
    if (!d.heldBy.empty())
        m.emplace_back("held_by", [&w, &d] {
            w.array(d.heldBy, [&w](const core::HeldBy& h) {
                w.object({field(w, "name", h.name), field(w, "bytes", h.bytes)});
            });
        });
    addPools(m, w, d.pools, writePoolTotals);
    w.object(std::move(m));
}

void writeEventsSummary(TextWriter& w, const core::EventsSummary& e) {
    w.object({field(w, "section", e.section), field(w, "mode", e.mode), field(w, "limit", e.limit),
              field(w, "seen", e.seen), field(w, "kept", e.kept), field(w, "folded", e.folded)});
}

void writeFrame(TextWriter& w, const core::Frame& f) {
    Members m = {{"kind", [&w, &f] { w.value(f.isPython() ? "python" : "native"); }},
                 field(w, "function", f.function),
                 field(w, "file", f.file),
                 field(w, "line", f.line),
                 field(w, "user", f.user)};
    if (!f.isPython()) m.push_back(field(w, "module", f.module));
    if (f.isUnnamed()) m.push_back(field(w, "offset", f.offset));
    if (f.isPython() && !f.source.empty()) m.push_back(field(w, "source", f.source));
    w.object(std::move(m));
}

void writeLine(TextWriter& w, const core::LineStat& l) {
    Members m = lineFiguresMembers(w, l);
    m.insert(m.end(), {field(w, "file", l.file), field(w, "line", l.line),
                       field(w, "function", l.function), field(w, "device", l.device)});
    addPools(m, w, l.pools, writeLineFigures);
    w.object(std::move(m));
}

void writeHotspot(TextWriter& w, const core::Hotspot& h) {
    Members m = hotspotFiguresMembers(w, h);
    m.insert(m.end(),
             {field(w, "device", h.device), field(w, "site", h.site), field(w, "stack", h.stack),
              field(w, "frames", h.frames), field(w, "site_frame", h.siteFrame)});
    addPools(m, w, h.pools, writeHotspotFigures);
    w.object(std::move(m));
}

// `read_back` only where it is true: most streams end with their end record.
void writeStream(TextWriter& w, const core::StreamCheck& s) {
    Members m = {field(w, "verified", s.verified),
                 field(w, "records", s.recordsReceived),
                 field(w, "allocs", s.allocsReceived),
                 field(w, "frees", s.freesReceived),
                 field(w, "unmatched_frees", s.unmatchedFrees),
                 field(w, "missed_events", s.missedEvents)};
    if (s.readBack) m.push_back(field(w, "read_back", s.readBack));
    if (s.lockCounted) {
        m.push_back(field(w, "lock_contended", s.lockContended));
        m.push_back(field(w, "lock_waits", s.lockWaits));
    }
    w.object(std::move(m));
}

void writeRegion(TextWriter& w, const core::RegionTotals& r) {
    w.object({field(w, "tag", r.tag), field(w, "device", r.device), field(w, "backup", r.backup),
              field(w, "bytes", r.bytes), field(w, "paused_bytes", r.pausedBytes)});
}

void writeControl(TextWriter& w, const core::ControlEvent& e) {
    w.object({field(w, "time_s", e.timeS), field(w, "action", e.action),
              field(w, "origin", e.origin), field(w, "tag", e.tag), field(w, "device", e.device),
              field(w, "bytes", e.bytes), field(w, "backup", e.backup),
              field(w, "duration_s", e.durationS), field(w, "ok", e.ok),
              field(w, "message", e.message)});
}

void writeOom(TextWriter& w, const core::OomEvent& e) {
    auto bySite = [&w, &e] {
        w.array(e.bySite, [&w](const core::OomSiteBytes& s) {
            w.object({field(w, "site", s.site), field(w, "site_frame", s.siteFrame),
                      field(w, "bytes", s.bytes)});
        });
    };
    auto byLine = [&w, &e] {
        w.array(e.byLine, [&w](const core::OomLineBytes& l) {
            w.object({field(w, "file", l.file), field(w, "line", l.line),
                      field(w, "function", l.function), field(w, "bytes", l.bytes)});
        });
    };
    w.object({field(w, "time_s", e.timeS),
              field(w, "device", e.device),
              field(w, "requested_bytes", e.requestedBytes),
              field(w, "source", e.source),
              field(w, "site", e.site),
              field(w, "stack", e.stack),
              field(w, "frames", e.frames),
              field(w, "site_frame", e.siteFrame),
              field(w, "file", e.file),
              field(w, "line", e.line),
              field(w, "function", e.function),
              field(w, "held_on", e.heldOn),
              field(w, "live_bytes", e.liveBytes),
              field(w, "device_free_bytes", e.deviceFreeBytes),
              field(w, "device_total_bytes", e.deviceTotalBytes),
              {"by_site", bySite},
              {"by_line", byLine}});
}

// Points as [time_s, bytes] pairs: a series is a few thousand of them.
void writeSeries(TextWriter& w, const core::TimelineSeries& series) {
    auto points = [&w, &series] {
        w.array(series.points, [&w](const core::TimelinePoint& p) { w.pair(p.timeS, p.bytes); });
    };
    w.object({field(w, "bucket_s", series.bucketS), {"points", points}});
}

// Each file's lines as [line, text] pairs, in order.
void writeSource(TextWriter& w, const core::SourceFile& source) {
    auto lines = [&w, &source] {
        w.array(source.lines, [&w](const std::pair<const uint64_t, std::string>& line) {
            w.pair(line.first, line.second);
        });
    };
    const std::string hash = core::hashText(source.fnv1a64);
    w.object({field(w, "fnv1a64", hash), {"lines", lines}});
}

template <typename T, typename Write>
TextWriter::Member arrayField(TextWriter& w, std::string_view key, const std::vector<T>& items,
                              Write write) {
    return {key, [&w, &items, write] { w.array(items, [&w, write](const T& x) { write(w, x); }); }};
}

template <typename Map, typename Write>
TextWriter::Member mapField(TextWriter& w, std::string_view key, const Map& m, Write write) {
    return {key, [&w, &m, write] { w.map(m, [&w, write](const auto& v) { write(w, v); }); }};
}

void writeGraphPool(TextWriter& w, const core::GraphPool& g) {
    w.object(
        {field(w, "device", g.device),
         field(w, "number", g.number),
         {"id", [&w, &g] { w.pair(g.idFirst, g.idSecond); }},
         field(w, "reserved_peak_bytes", g.reservedPeakBytes),
         field(w, "active_peak_bytes", g.activePeakBytes),
         field(w, "reserved_end_bytes", g.reservedEndBytes),
         field(w, "active_end_bytes", g.activeEndBytes),
         arrayField(w, "sites", g.sites, [](TextWriter& to, const core::GraphPool::Site& s) {
             to.object({field(to, "site", s.site), field(to, "allocated_bytes", s.allocatedBytes)});
         })});
}

void writeStorageAtAttach(TextWriter& w, const core::StorageAtAttach& s) {
    w.object({field(w, "device", s.device), field(w, "name", s.name), field(w, "bytes", s.bytes)});
}

// {"time_s": T, "storages": [...]}, or {"unlisted": WHY}.
void writeLiveAtAttach(TextWriter& w, const core::ProcessTrace& p) {
    if (!p.liveAtAttachTimeS) return w.object({field(w, "unlisted", p.liveAtAttachUnlisted)});
    w.object({field(w, "time_s", *p.liveAtAttachTimeS),
              arrayField(w, "storages", p.liveAtAttach, writeStorageAtAttach)});
}

// The members a process's body decides (RenderedBody), by key: each written
// by `write`, at the level of a process's members.
template <typename Write>
void bodyMembers(TextWriter& w, const core::ProcessTrace& p, Write write) {
    write("devices", mapField(w, "devices", p.devices, writeDevice));
    write("frames", arrayField(w, "frames", p.frames, writeFrame));
    write("hotspots", arrayField(w, "hotspots", p.hotspots, writeHotspot));
    write("lines", arrayField(w, "lines", p.lines, writeLine));
    write("stream", {"stream", [&w, &p] { writeStream(w, p.stream); }});
    write("regions", arrayField(w, "regions", p.regions, writeRegion));
    write("control", arrayField(w, "control", p.control, writeControl));
    write("oom", arrayField(w, "oom", p.oom, writeOom));
    // Only where the torch bridge saw a private pool: traces without stay as they were.
    if (!p.graphPools.empty())
        write("graph_pools", arrayField(w, "graph_pools", p.graphPools, writeGraphPool));
    write("timeline", mapField(w, "timeline", p.timeline, writeSeries));
}

void writeProcess(TextWriter& w, const core::ProcessTrace& p, const RenderedBody* rendered) {
    Members m = {field(w, "pid", p.pid),
                 field(w, "ppid", p.ppid),
                 field(w, "command", p.command),
                 field(w, "cwd", p.cwd),
                 field(w, "exit_code", p.exitCode),
                 field(w, "exit_signal", p.exitSignal),
                 field(w, "complete", p.complete),
                 field(w, "tracked", p.tracked),
                 field(w, "duration_s", p.durationS),
                 field(w, "leak_moment", p.leakMoment),
                 field(w, "leak_time_s", p.leakTimeS),
                 field(w, "held_at_exit_known", p.heldAtExitKnown),
                 field(w, "max_rss_bytes", p.maxRssBytes),
                 field(w, "native_stacks", p.nativeStacks),
                 field(w, "python_stacks", p.pythonStacks),
                 field(w, "oom_count", p.oomCount),
                 field(w, "warnings", p.warnings)};
    if (rendered)
        for (const auto& [key, text] : rendered->members())
            m.push_back({key, [&w, text = text] { w.rawKept(text); }});
    else
        bodyMembers(w, p, [&m](std::string_view, const TextWriter::Member& member) {
            m.push_back(member);
        });
    if (!p.complete) m.push_back(field(w, "incomplete_reason", p.incompleteReason));
    if (p.cpuS) m.push_back(field(w, "cpu_s", p.cpuS));
    if (p.startUnixS) m.push_back(field(w, "start_unix_s", p.startUnixS));
    if (!p.host.empty()) m.push_back(field(w, "host", p.host));
    if (p.snapshot) m.push_back(field(w, "snapshot", p.snapshot));
    if (p.forked) m.push_back(field(w, "forked", p.forked));
    if (p.exec) m.push_back(field(w, "exec", p.exec));
    if (p.detached) m.push_back(field(w, "detached", p.detached));
    if (p.earlierFrees) m.push_back(field(w, "earlier_frees", p.earlierFrees));
    if (p.attached) m.push_back(field(w, "attached", p.attached));
    if (p.liveAtAttachTimeS || !p.liveAtAttachUnlisted.empty())
        m.push_back({"live_at_attach", [&w, &p] { writeLiveAtAttach(w, p); }});
    if (p.rank) m.push_back(field(w, "rank", p.rank));
    if (p.localRank) m.push_back(field(w, "local_rank", p.localRank));
    if (p.worldSize) m.push_back(field(w, "world_size", p.worldSize));
    if (!p.rankEnvironment.empty())
        m.push_back(mapField(w, "rank_environment", p.rankEnvironment,
                             [](TextWriter& to, const std::string& v) { to.value(v); }));
    if (!p.sources.empty()) m.push_back(mapField(w, "sources", p.sources, writeSource));
    if (p.events) m.push_back({"events", [&w, &e = *p.events] { writeEventsSummary(w, e); }});
    w.object(std::move(m));
}

}  // namespace

RenderedBody::RenderedBody(const core::ProcessTrace& body) {
    // Room for a usual body at once (a pool worker's is ~60 KiB, a model's a few
    // hundred): grown from nothing by doubling, the text took each of its pages
    // about three times over, every new one a page fault, and each body's last
    // buffer is kept. Room not written to is not made resident.
    text_.reserve(256 * 1024);
    TextWriter w(text_, kProcessMemberDepth);
    std::vector<std::pair<std::string_view, size_t>> ends;
    bodyMembers(w, body, [&](std::string_view key, const TextWriter::Member& member) {
        member.second();
        ends.emplace_back(key, text_.size());
    });
    size_t from = 0;
    for (const auto& [key, end] : ends) {
        members_.emplace_back(key, std::string_view(text_).substr(from, end - from));
        from = end;
    }
}

std::string traceToText(const core::Trace& trace) { return traceToText(trace, {}); }

namespace {

void writePolls(TextWriter& w, const core::PollSeries& p) {
    w.object({field(w, "interval_ms", p.intervalMs), field(w, "rounds", p.rounds),
              field(w, "start_unix_s", p.startUnixS), field(w, "host_source", p.hostSource),
              field(w, "cuda_source", p.cudaSource), mapField(w, "series", p.series, writeSeries)});
}

void writePolicyAction(TextWriter& w, const core::PolicyAction& a) {
    Members m = {field(w, "pid", a.pid),
                 field(w, "time_s", a.timeS),
                 field(w, "rule", a.rule),
                 field(w, "rule_text", a.ruleText),
                 field(w, "device", a.device),
                 field(w, "metric", a.metric),
                 field(w, "reading_bytes", a.readingBytes),
                 field(w, "threshold_bytes", a.thresholdBytes),
                 field(w, "do", a.action),
                 field(w, "ok", a.ok),
                 field(w, "message", a.message),
                 field(w, "bytes", a.bytes),
                 field(w, "seconds", a.seconds)};
    if (a.usedPercent) m.push_back(field(w, "used_percent", *a.usedPercent));
    w.object(std::move(m));
}

void writeTrace(TextWriter& w, const core::Trace& trace,
                std::span<const RenderedBody* const> rendered) {
    size_t index = 0;
    auto process = [&](TextWriter& to, const core::ProcessTrace& p) {
        const size_t i = index++;
        writeProcess(to, p, i < rendered.size() ? rendered[i] : nullptr);
    };
    Members m = {field(w, "schema", trace.schema),
                 field(w, "memtool_version", trace.memtoolVersion),
                 field(w, "cli_max_rss_bytes", trace.cliMaxRssBytes),
                 arrayField(w, "processes", trace.processes, process)};
    if (trace.cliCpuS) m.push_back(field(w, "cli_cpu_s", trace.cliCpuS));
    if (trace.polls) m.push_back({"polls", [&w, &trace] { writePolls(w, *trace.polls); }});
    if (!trace.policyActions.empty())
        m.push_back(arrayField(w, "policy_actions", trace.policyActions, writePolicyAction));
    if (!trace.eventsFile.empty()) m.push_back(field(w, "events_file", trace.eventsFile));
    w.object(std::move(m));
    w.raw("\n");
}

}  // namespace

TextPieces traceToPieces(const core::Trace& trace, std::span<const RenderedBody* const> rendered) {
    TextPieces pieces;
    TextWriter w(pieces.own, &pieces.inserts);
    writeTrace(w, trace, rendered);
    return pieces;
}

// The pieces joined: with nothing rendered ahead, the text is all their own.
std::string traceToText(const core::Trace& trace, std::span<const RenderedBody* const> rendered) {
    TextPieces pieces = traceToPieces(trace, rendered);
    if (pieces.inserts.empty()) return std::move(pieces.own);
    const std::vector<std::string_view> views = pieces.views();
    size_t bytes = 0;
    for (std::string_view v : views) bytes += v.size();
    std::string out;
    out.reserve(bytes);
    for (std::string_view v : views) out += v;
    return out;
}

std::vector<std::string_view> TextPieces::views() const {
    std::vector<std::string_view> out;
    out.reserve(2 * inserts.size() + 1);
    const std::string_view text(own);
    size_t from = 0;
    for (const auto& [at, inserted] : inserts) {
        if (at > from) out.push_back(text.substr(from, at - from));
        if (!inserted.empty()) out.push_back(inserted);
        from = at;
    }
    if (from < text.size()) out.push_back(text.substr(from));
    return out;
}

std::string hotspotText(const core::Hotspot& h) {
    std::string out;
    TextWriter w(out);
    writeHotspot(w, h);
    return out;
}

std::string lineText(const core::LineStat& l) {
    std::string out;
    TextWriter w(out);
    writeLine(w, l);
    return out;
}

}  // namespace memtool::reporters
