#include "trace/TraceBuilder.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "core/DecimalPair.h"
#include "core/FrameClassifier.h"
#include "core/FrameTable.h"
#include "core/LauncherRanks.h"
#include "core/Protocol.h"
#include "trace/HotspotSelection.h"
#include "trace/Symbolizer.h"

namespace memtool::cli {

void ProcessOutcome::setExitStatus(int status) {
    if (WIFEXITED(status)) exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) exitSignal = WTERMSIG(status);
}

namespace {

using core::Frame;
using Stack = std::vector<Frame>;  // innermost first

// The interpreter's own code: where a Python stack stands in for the native one.
bool isInterpreterFrame(const Frame& f) {
    return !f.isPython() && core::isInterpreterModule(f.module);
}

// The trace row a wire device code belongs to: "cuda:0" for cuda:0's pools too
// (core::poolKey names the pool within it).
std::string deviceRow(uint8_t code) {
    int ordinal = core::cudaOrdinal(code);
    return core::deviceName(ordinal >= 0 ? core::cudaDevice(ordinal) : code);
}

// ---- the process as a whole --------------------------------------------------------

// Rank, local rank and world size as torchrun, Slurm, Open MPI or MPICH set them.
void rankOf(const core::Handshake& h, core::ProcessTrace& p) {
    for (const auto& [name, value] : h.environment) p.rankEnvironment[name] = value;
    const core::LauncherRanks ranks = core::launcherRanks(h.environment);
    p.rank = ranks.rank;
    p.localRank = ranks.localRank;
    p.worldSize = ranks.worldSize;
}

core::ProcessTrace processHeader(const core::Aggregator& agg) {
    core::ProcessTrace p;
    if (const auto& h = agg.handshake()) {
        p.pid = h->pid;
        p.ppid = h->ppid;
        p.command = h->command;
        p.nativeStacks = h->nativeStacks;
        p.pythonStacks = h->pythonStacks;
        p.forked = h->forked;
        // The zero of its clock on the wall's: what puts several processes' timelines,
        // and several traces', on one clock (reporters/RankSummary.h).
        if (h->startUnixNs) p.startUnixS = static_cast<double>(h->startUnixNs) / 1e9;
        rankOf(*h, p);
    }
    const auto& end = agg.end();
    p.exec = end && end->exitKind == static_cast<uint64_t>(core::ExitKind::Exec);
    p.detached = end && end->exitKind == static_cast<uint64_t>(core::ExitKind::Detach);
    for (const core::NoteRecord& n : agg.notes()) {
        if (n.key == core::kNoteWarning) p.warnings.push_back(n.text);
        // Digits only, as the collector writes them; anything else is ignored.
        uint64_t count = 0, zero = 0;
        if (n.key == core::kNoteEarlierFrees && core::readDecimalPair(n.text + " 0", &count, &zero))
            p.earlierFrees = count;
    }
    if (!agg.continuationProblem().empty())
        p.warnings.push_back("some frames its parent's stacks share with it are unknown: " +
                             agg.continuationProblem());
    if (const auto& end = agg.programEnd()) {
        p.leakMoment =
            end->how == core::kProgramEndPython ? core::kLeakAtPython : core::kLeakAtExit;
        p.leakTimeS = static_cast<double>(end->timeNs) / 1e9;
        p.heldAtExitKnown = end->reachableKnown;
    } else {
        p.leakMoment = core::kLeakAtEnd;
        p.leakTimeS = static_cast<double>(agg.lastTimeNs()) / 1e9;
    }
    return p;
}

// An image that exec'd leaked nothing: what it held went with it.
void releasedByExec(core::ProcessTrace& p) {
    for (auto& [name, d] : p.devices) {
        d.currentBytes = d.pausedBytes = d.leakedBytes = d.liveAtEndBytes = d.heldAtExitBytes = 0;
        for (auto& [pool, totals] : d.pools) {
            totals.currentBytes = totals.pausedBytes = totals.leakedBytes = 0;
            totals.liveAtEndBytes = totals.heldAtExitBytes = 0;
        }
    }
    for (core::Hotspot& h : p.hotspots) {
        h.leakedBytes = h.liveAtEndBytes = h.heldAtExitBytes = 0;
        for (auto& [pool, f] : h.pools) f.leakedBytes = f.liveAtEndBytes = f.heldAtExitBytes = 0;
    }
    for (core::RegionTotals& r : p.regions) r.bytes = r.pausedBytes = 0;
}

// What saw the CUDA events: CUPTI unless the collector said otherwise.
std::string cudaSource(const core::Aggregator& agg) {
    std::string source = "cupti";
    for (const core::NoteRecord& n : agg.notes())
        if (n.key == core::kNoteCudaSource) source = n.text;
    return source;
}

// What each global held at the program's end, largest first, at most kMaxHeldBy.
std::vector<core::HeldBy> heldByGlobal(const core::DeviceState& d) {
    std::vector<core::HeldBy> out;
    for (const auto& [name, bytes] : d.heldBy)
        if (bytes > 0) out.push_back({name, bytes});
    std::stable_sort(out.begin(), out.end(), [](const core::HeldBy& a, const core::HeldBy& b) {
        return a.bytes > b.bytes;
    });
    if (out.size() > core::kMaxHeldBy) out.resize(core::kMaxHeldBy);
    return out;
}

// One row per device; a caching-allocator pool's figures ride inside its device's row.
std::map<std::string, core::DeviceTotals> deviceTotals(const core::Aggregator& agg) {
    const std::string cuda = cudaSource(agg);
    std::map<std::string, core::DeviceTotals> devices;
    for (const auto& [code, d] : agg.devices()) {
        core::PoolTotals totals;
        totals.peakBytes = d.peakBytes;
        // Everything live at the end, whether a pause had released it or not; leaked
        // is what was live when the program's own code finished, where that is known.
        totals.currentBytes = d.currentBytes + d.pausedBytes;
        totals.liveAtEndBytes = agg.programEnd() ? d.liveAtProgramEnd : totals.currentBytes;
        totals.heldAtExitBytes = d.heldAtProgramEnd;
        totals.leakedBytes = totals.liveAtEndBytes - totals.heldAtExitBytes;
        totals.teardownFreedBytes = d.teardownFreedBytes;
        totals.teardownFreeCount = d.teardownFreeCount;
        totals.pausedBytes = d.pausedBytes;
        totals.allocatedBytes = d.allocatedBytes;
        totals.freedBytes = d.freedBytes;
        totals.allocCount = d.allocCount;
        totals.freeCount = d.freeCount;
        totals.peakTimeS = static_cast<double>(d.peakTimeNs) / 1e9;
        const std::string pool = core::poolKey(code);
        core::DeviceTotals& t = devices[deviceRow(code)];
        if (!pool.empty()) {
            t.pools[pool] = totals;
        } else {
            static_cast<core::PoolTotals&>(t) = totals;
            t.heldBy = heldByGlobal(d);
            t.source = code == core::kDeviceCpu      ? "libc10"
                       : code == core::kDeviceShared ? "shm"
                       : core::npuOrdinal(code) >= 0 ? "acl"
                                                     : cuda;
        }
    }
    return devices;
}

// A series per device and pool, named as `memtool check` names them ("cuda:0.active").
std::map<std::string, core::TimelineSeries> timelines(const core::Aggregator& agg) {
    std::map<std::string, core::TimelineSeries> series;
    for (const auto& [code, d] : agg.devices())
        if (!d.timeline.empty()) series[core::deviceName(code)] = timelineSeries(d.timeline);
    return series;
}

// ---- one stack ---------------------------------------------------------------------

Stack pythonFrames(const core::Aggregator& agg, uint64_t pyNode) {
    Stack python;
    for (uint64_t n = pyNode; n != 0; n = agg.pyNodes()[n].parent) {
        const core::PyNodeRecord& node = agg.pyNodes()[n];
        const core::PyCodeRecord& code = agg.pyCodes()[node.codeId];
        Frame f;
        f.kind = core::FrameKind::Python;
        // Code 0: a frame of the stream this one continues that never arrived.
        f.function = node.codeId == 0 ? "(a frame not received)" : code.name;
        f.file = code.file;
        f.line = node.line;
        f.user = !core::isLibraryPythonFile(code.file);
        python.push_back(std::move(f));
    }
    return python;
}

Frame nativeFrame(Frame f) {
    f.kind = core::FrameKind::Native;
    // A named frame is its function: its call sites are not told apart.
    if (!f.isUnnamed()) f.offset = 0;
    // Header code compiled into the user's binary (torch::empty from a LibTorch
    // header, std::make_shared inlined into main) is library code all the same.
    f.user = !core::isLibraryModule(f.module) && !core::isLibrarySource(f.file);
    return f;
}

// Symbolized from the innermost frame out, each return address giving the
// functions inlined there and then its own; stopping where nothing further is
// shown: at main (libc's start-up frames), or at the interpreter's innermost frame
// when Python frames stand in for everything outside it (the collector stops
// unwinding there; traces of earlier versions go on to the evaluation loop).
Stack nativeFrames(const core::Aggregator& agg, Symbolizer& symbolizer, uint64_t nativeNode,
                   bool pythonFollows) {
    Stack native;
    for (uint64_t n = nativeNode; n != 0; n = agg.nativeNodes()[n].parent) {
        for (const Frame& f : symbolizer.symbolize(agg.nativeNodes()[n].ip))
            native.push_back(nativeFrame(f));
        // The address's own function is the last of its frames.
        if (!native.empty() && endsShownStack(native.back(), pythonFollows)) break;
    }
    return native;
}

// memtool's own frames at the inner end (the torch bridge and the hook that
// attached it) are how the event was seen, not who asked for the memory.
void dropMemtoolFrames(Stack& native) {
    auto ours = std::find_if(native.begin(), native.end(),
                             [](const Frame& f) { return !core::isMemtoolModule(f.module); });
    native.erase(native.begin(), ours);
}

// The Python frames stand where the interpreter's were: the native frames the
// innermost Python call reached (torch's C++), then the Python stack. The
// interpreter's frames and those outside them (main, Py_RunMain, ...) say
// nothing a Python frame does not.
Stack mergeStacks(Stack native, Stack python) {
    if (python.empty()) return native;
    native.erase(std::find_if(native.begin(), native.end(), isInterpreterFrame), native.end());
    for (auto& f : python) native.push_back(std::move(f));
    return native;
}

Stack mergedStack(const core::Aggregator& agg, Symbolizer& symbolizer, const core::StackState& s) {
    Stack python = pythonFrames(agg, s.pyNode);
    Stack native = nativeFrames(agg, symbolizer, s.nativeNode, !python.empty());
    dropMemtoolFrames(native);
    return mergeStacks(std::move(native), std::move(python));
}

// ---- tables over all stacks --------------------------------------------------------

// Hotspots, one per (device, stack as printed): stacks that read alike are one
// hotspot, as trace.json has always had it. Frames are stored once per process.
class HotspotTable {
public:
    void add(const std::string& device, const std::string& pool, const Stack& stack,
             std::optional<size_t> site, const core::HotspotFigures& figures) {
        std::vector<std::string> text;
        std::string joined;
        for (const Frame& f : stack) {
            text.push_back(core::formatFrame(f));
            joined += text.back();
            joined += '\n';
        }
        auto [it, inserted] = index_.try_emplace({device, joined}, hotspots_.size());
        if (inserted) {
            core::Hotspot h;
            h.device = device;
            for (const Frame& f : stack) h.frames.push_back(frames_.intern(f));
            if (site) h.siteFrame = h.frames[*site];
            h.site = site ? text[*site] : core::kNoStackSite;
            h.stack = std::move(text);
            hotspots_.push_back(std::move(h));
        }
        core::Hotspot& h = hotspots_[it->second];
        core::HotspotFigures& into = pool.empty() ? h : h.pools[pool];
        into.allocatedBytes += figures.allocatedBytes;
        into.count += figures.count;
        into.peakBytes += figures.peakBytes;
        into.liveAtEndBytes += figures.liveAtEndBytes;
        into.heldAtExitBytes += figures.heldAtExitBytes;
        into.leakedBytes += figures.leakedBytes;
    }

    void moveInto(core::ProcessTrace& p) && {
        p.frames = std::move(frames_).release();
        p.hotspots = std::move(hotspots_);
    }

private:
    core::FrameTable frames_;
    std::map<std::pair<std::string, std::string>, size_t>
        index_;  // (device, stack text) -> hotspot
    std::vector<core::Hotspot> hotspots_;
};

// Lines: every distinct (file, line) of a Python frame or of the user's own native
// code with debug info, counted once per stack even under recursion; a module's
// frame (run --modules) is no line.
class LineTable {
public:
    void add(const std::string& device, const std::string& pool, const Stack& stack,
             const core::StackState& s) {
        std::set<std::pair<std::string, uint64_t>> seen;
        bool innermost = true;  // the first line-bearing frame owns the bytes ("self")
        for (const Frame& f : stack) {
            if (f.file.empty() || f.line == 0 || !(f.isPython() || f.user) ||
                core::isModuleScope(f))
                continue;
            const bool isSelf = innermost;
            innermost = false;
            if (!seen.insert({f.file, f.line}).second) continue;
            core::LineStat& l = rows_[std::make_tuple(device, f.file, f.line)];
            if (l.file.empty()) {
                l.file = f.file;
                l.line = f.line;
                l.function = f.function;
                l.device = device;
            }
            core::LineFigures& into = pool.empty() ? l : l.pools[pool];
            into.allocatedBytes += s.allocatedBytes;
            into.count += s.count;
            into.peakBytes = std::max(into.peakBytes, s.maxDeviceBytesAtAlloc);
            if (isSelf) into.selfAllocatedBytes += s.allocatedBytes;
        }
    }

    // Ordered by device, file, line.
    std::vector<core::LineStat> rows() && {
        std::vector<core::LineStat> out;
        for (auto& [key, l] : rows_) out.push_back(std::move(l));
        return out;
    }

private:
    std::map<std::tuple<std::string, std::string, uint64_t>, core::LineStat> rows_;
};

// ---- the stream --------------------------------------------------------------------

core::StreamCheck streamCheck(const core::Aggregator& agg) {
    core::StreamCheck c;
    c.recordsReceived = agg.recordsReceived();
    c.allocsReceived = agg.allocsReceived();
    c.freesReceived = agg.freesReceived();
    c.unmatchedFrees = agg.unmatchedFrees();
    c.verified = agg.streamVerified();
    c.readBack = c.verified && !agg.end();
    if (agg.end()) c.missedEvents = agg.end()->missedEvents;
    // The last one counts: a stream that went on after an exec failed says it again.
    // Text that is not two whole numbers (a stream from elsewhere) is ignored.
    for (const core::NoteRecord& n : agg.notes()) {
        if (n.key != core::kNoteCollectorLock) continue;
        uint64_t contended = 0, waits = 0;
        if (!core::readDecimalPair(n.text, &contended, &waits)) continue;
        c.lockCounted = true;
        c.lockContended = contended;
        c.lockWaits = waits;
    }
    return c;
}

// Why the trace may not be whole; empty when it is.
std::string incompleteReason(const core::Aggregator& agg, const ProcessOutcome& outcome) {
    if (!outcome.streamError.empty()) return outcome.streamError;
    if (outcome.snapshot) return {};  // whole as far as it goes: the stream has not ended
    // Killed, its unsent records read back and the counts it left matching them:
    // every event it recorded is here (exit_signal says how it ended).
    if (!agg.end() && agg.streamVerified()) return {};
    if (!agg.end()) {
        const std::string readBack =
            outcome.recoveredRecords
                ? fmt::format("; the {} records it had not sent were read from its buffer",
                              outcome.recoveredRecords)
                : "";
        return (outcome.exitSignal
                    ? fmt::format("the process was killed by signal {} before its collector could "
                                  "finish the stream",
                                  *outcome.exitSignal)
                    : std::string(
                          "the stream ended without its end record (the process was killed)")) +
               readBack;
    }
    if (!agg.streamVerified()) {
        const core::EndFields& e = *agg.end();
        std::string why;
        if (e.recordCount != agg.recordsReceived() || e.allocCount != agg.allocsReceived() ||
            e.freeCount != agg.freesReceived())
            why = fmt::format(
                "the collector counted {} records, {} allocations and {} frees; {}, {} and {} "
                "arrived",
                e.recordCount, e.allocCount, e.freeCount, agg.recordsReceived(),
                agg.allocsReceived(), agg.freesReceived());
        if (e.missedEvents)
            why += fmt::format(
                "{}the collector could not record {} event{} (each made while it was recording "
                "another on the same thread)",
                why.empty() ? "" : "; ", e.missedEvents, e.missedEvents == 1 ? "" : "s");
        return why;
    }
    return {};
}

// Pausable regions as the stream left them, and every pause and resume.
void regionsAndControl(const core::Aggregator& agg, core::ProcessTrace& p) {
    for (const auto& [id, r] : agg.regions()) {
        p.regions.push_back(core::RegionTotals{r.record.tag, deviceRow(r.record.device),
                                               core::backupName(r.record.backup), r.liveBytes,
                                               r.pausedBytes});
    }
    for (const core::ControlRecord& c : agg.controls()) {
        const auto& region = agg.regions().at(c.f.region).record;
        core::ControlEvent e;
        e.timeS = static_cast<double>(c.timeNs) / 1e9;
        e.action = core::actionName(c.f.action);
        e.origin = c.f.origin == core::ControlOrigin::Ctl      ? "ctl"
                   : c.f.origin == core::ControlOrigin::Policy ? "policy"
                                                               : "api";
        e.tag = region.tag;
        e.device = deviceRow(region.device);
        e.bytes = c.f.bytes;
        e.backup = core::backupName(c.f.backup);
        e.durationS = static_cast<double>(c.f.durationNs) / 1e9;
        e.ok = c.f.ok;
        e.message = c.message;
        p.control.push_back(std::move(e));
    }
}

// ---- out of memory ------------------------------------------------------------------

// The innermost frame with a source line of the user's own code or of Python: the
// line a line table would charge (none when the stack has no such frame).
const Frame* innermostLine(const Stack& stack) {
    for (const Frame& f : stack)
        if (!f.file.empty() && f.line != 0 && (f.isPython() || f.user)) return &f;
    return nullptr;
}

constexpr size_t kOomRows = 10;  // per table; the rest in one row, so the rows add up

bool torchBridgeAttached(const core::Aggregator& agg) {
    for (const core::NoteRecord& n : agg.notes())
        if (n.key == core::kNoteTorchBridge && n.text == "attached") return true;
    return false;
}

// Each out-of-memory moment: the request (its site and line) and what held the
// device then, by site and by line, adding up to the bytes held.
void outOfMemory(const core::Aggregator& agg, Symbolizer& symbolizer, SiteMode siteMode,
                 core::ProcessTrace& p) {
    // With the torch bridge, a failed cudaMalloc is PyTorch's to retry after freeing
    // its cache: only its own out-of-memory error (source torch) is the program's.
    const bool bridge = torchBridgeAttached(agg);
    p.oomCount = agg.oomCount();
    // The events' frames join the hotspots' in the process's table.
    core::FrameTable table(std::move(p.frames));
    std::map<uint32_t, Stack> stacks;
    auto stackOf = [&](uint32_t i) -> const Stack& {
        auto [it, inserted] = stacks.try_emplace(i);
        if (inserted) it->second = mergedStack(agg, symbolizer, agg.stacks()[i]);
        return it->second;
    };
    for (const auto& o : agg.ooms()) {
        const bool torch = o.record.f.source == core::OomSource::Torch;
        if (bridge && !torch && core::cudaOrdinal(o.record.f.device) >= 0) {
            --p.oomCount;
            continue;
        }
        core::OomEvent e;
        e.timeS = static_cast<double>(o.record.timeNs) / 1e9;
        e.device = deviceRow(o.record.f.device);
        e.requestedBytes = o.record.f.size;
        e.source = torch ? "torch" : "allocator";
        const Stack& request = stackOf(o.stack);
        const auto site = core::chooseSite(request, siteMode);
        e.site = site ? core::formatFrame(request[*site]) : core::kNoStackSite;
        for (const Frame& f : request) {
            e.frames.push_back(table.intern(f));
            e.stack.push_back(core::formatFrame(f));
        }
        if (site) e.siteFrame = e.frames[*site];
        if (const Frame* f = innermostLine(request)) {
            e.file = f->file;
            e.line = f->line;
            e.function = f->function;
        }
        e.heldOn = core::deviceName(o.heldDevice);
        e.liveBytes = o.liveBytes;
        e.deviceFreeBytes = o.record.f.deviceFree;
        e.deviceTotalBytes = o.record.f.deviceTotal;

        // By the site's text, as before frames were kept; each with its frame.
        std::map<std::string, core::OomSiteBytes> bySite;
        std::map<std::tuple<std::string, uint64_t, std::string>, uint64_t> byLine;
        for (const auto& [index, bytes] : o.consumers) {
            const Stack& s = stackOf(index);
            const auto at = core::chooseSite(s, siteMode);
            const std::string text = at ? core::formatFrame(s[*at]) : core::kNoStackSite;
            auto [row, fresh] = bySite.try_emplace(text, core::OomSiteBytes{text, 0, std::nullopt});
            if (fresh && at) row->second.siteFrame = table.intern(s[*at]);
            row->second.bytes += bytes;
            const Frame* f = innermostLine(s);
            byLine[f ? std::make_tuple(f->file, f->line, f->function)
                     : std::make_tuple(std::string(), uint64_t{0},
                                       std::string("(no source line)"))] += bytes;
        }
        std::vector<core::OomSiteBytes> sites;
        for (auto& [text, row] : bySite) sites.push_back(std::move(row));
        std::stable_sort(sites.begin(), sites.end(),
                         [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
        uint64_t rest = 0;
        for (size_t i = 0; i < sites.size(); ++i) {
            if (i < kOomRows)
                e.bySite.push_back(sites[i]);
            else
                rest += sites[i].bytes;
        }
        if (sites.size() > kOomRows)
            e.bySite.push_back(
                {fmt::format("({} other sites)", sites.size() - kOomRows), rest, std::nullopt});
        std::vector<std::pair<std::tuple<std::string, uint64_t, std::string>, uint64_t>> lines(
            byLine.begin(), byLine.end());
        std::stable_sort(lines.begin(), lines.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
        rest = 0;
        for (size_t i = 0; i < lines.size(); ++i) {
            const auto& [file, line, function] = lines[i].first;
            if (i < kOomRows)
                e.byLine.push_back({file, line, function, lines[i].second});
            else
                rest += lines[i].second;
        }
        if (lines.size() > kOomRows)
            e.byLine.push_back(
                {"", 0, fmt::format("({} other lines)", lines.size() - kOomRows), rest});
        p.oom.push_back(std::move(e));
    }
    p.frames = std::move(table).release();
}

// Where a pool's blocks were allocated, by site, most bytes first.
std::vector<core::GraphPool::Site> graphPoolSites(const core::Aggregator& agg,
                                                  Symbolizer& symbolizer,
                                                  const core::GraphPoolState& g,
                                                  SiteMode siteMode) {
    std::map<std::string, uint64_t> bySite;
    for (const auto& [stack, bytes] : g.allocatedByStack) {
        if (stack >= agg.stacks().size()) continue;
        const Stack frames = mergedStack(agg, symbolizer, agg.stacks()[stack]);
        const auto site = core::chooseSite(frames, siteMode);
        bySite[site ? core::formatFrame(frames[*site]) : core::kNoStackSite] += bytes;
    }
    std::vector<core::GraphPool::Site> sites;
    for (auto& [site, bytes] : bySite) sites.push_back({site, bytes});
    std::stable_sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) {
        return a.allocatedBytes > b.allocatedBytes;
    });
    if (sites.size() > core::kMaxGraphPoolSites) sites.resize(core::kMaxGraphPoolSites);
    return sites;
}

// The private pools the stream counted, named by its cuda.graph_pool notes ("NUMBER
// DEVICE FIRST SECOND"); a pool no note named keeps id (0, 0). Each pool's two
// series go beside its device's: "cuda:0.graphs#2", "cuda:0.graphs_active#2".
void addGraphPools(const core::Aggregator& agg, Symbolizer& symbolizer, SiteMode siteMode,
                   core::ProcessTrace& p) {
    std::map<uint32_t, core::GraphPool> pools;
    for (const auto& [number, g] : agg.graphPools()) {
        core::GraphPool& pool = pools[number];
        pool.number = number;
        pool.device = "cuda:" + std::to_string(g.ordinal);
        pool.reservedPeakBytes = g.reservedPeak;
        pool.activePeakBytes = g.activePeak;
        pool.reservedEndBytes = g.reservedBytes;
        pool.activeEndBytes = g.activeBytes;
        pool.sites = graphPoolSites(agg, symbolizer, g, siteMode);
        if (!g.reservedTimeline.empty())
            p.timeline[fmt::format("{}.{}#{}", pool.device, core::kPoolGraphs, number)] =
                timelineSeries(g.reservedTimeline);
        if (!g.activeTimeline.empty())
            p.timeline[fmt::format("{}.{}#{}", pool.device, core::kPoolGraphsActive, number)] =
                timelineSeries(g.activeTimeline);
    }
    for (const core::NoteRecord& n : agg.notes()) {
        if (n.key != core::kNoteGraphPool) continue;
        unsigned long number = 0, first = 0, second = 0;
        int device = -1;
        char extra = 0;
        if (std::sscanf(n.text.c_str(), "%lu %d %lu %lu %c", &number, &device, &first, &second,
                        &extra) != 4 ||
            device < 0 || device >= core::kMaxGraphPoolDevices)
            continue;
        auto it = pools.find(static_cast<uint32_t>(number));
        // Named, never held anything; or a note that disagrees with the keys.
        if (it == pools.end() || it->second.device != "cuda:" + std::to_string(device)) continue;
        it->second.idFirst = first;
        it->second.idSecond = second;
    }
    for (auto& [number, pool] : pools) p.graphPools.push_back(std::move(pool));
}

}  // namespace

std::vector<core::Frame> stackFrames(const core::Aggregator& agg, Symbolizer& symbolizer,
                                     const core::StackState& stack) {
    return mergedStack(agg, symbolizer, stack);
}

std::optional<size_t> siteOf(const std::vector<core::Frame>& stack, SiteMode mode) {
    return core::chooseSite(stack, mode);
}

core::ProcessTrace buildProcessTrace(const core::Aggregator& agg, Symbolizer& symbolizer,
                                     const ProcessOutcome& outcome, SiteMode siteMode) {
    core::ProcessTrace p = buildProcessBody(agg, symbolizer, siteMode);
    applyOutcome(p, agg, outcome);
    return p;
}

core::ProcessTrace buildProcessBody(const core::Aggregator& agg, Symbolizer& symbolizer,
                                    SiteMode siteMode) {
    core::ProcessTrace p = processHeader(agg);
    p.devices = deviceTotals(agg);
    p.timeline = timelines(agg);
    addGraphPools(agg, symbolizer, siteMode, p);

    HotspotTable hotspots;
    LineTable lines;
    for (const core::StackState& s : agg.stacks()) {
        if (s.count == 0) continue;  // an out-of-memory request's stack that never allocated
        const Stack stack = mergedStack(agg, symbolizer, s);
        const std::string device = deviceRow(s.device);
        const std::string pool = core::poolKey(s.device);
        const uint64_t liveAtEnd =
            agg.programEnd() ? s.liveAtProgramEnd : s.liveBytes + s.pausedBytes;
        hotspots.add(device, pool, stack, core::chooseSite(stack, siteMode),
                     core::HotspotFigures{s.allocatedBytes, s.count, agg.liveAtPeak(s), liveAtEnd,
                                          s.heldAtProgramEnd, liveAtEnd - s.heldAtProgramEnd});
        lines.add(device, pool, stack, s);
    }
    std::move(hotspots).moveInto(p);
    p.lines = std::move(lines).rows();

    regionsAndControl(agg, p);
    outOfMemory(agg, symbolizer, siteMode, p);
    p.stream = streamCheck(agg);
    if (p.exec) releasedByExec(p);
    if (agg.doubleAllocs() > 0)
        p.warnings.push_back(fmt::format(
            "{} allocations reused a live address (a free went unseen)", agg.doubleAllocs()));
    return p;
}

void applyOutcome(core::ProcessTrace& p, const core::Aggregator& agg,
                  const ProcessOutcome& outcome) {
    p.exitCode = outcome.exitCode;
    p.exitSignal = outcome.exitSignal;
    // Seen from outside or not at all, the collector may know it: the status given
    // to exit() or _exit(). An image that exec'd has none of its own.
    const auto& end = agg.end();
    if (!p.exitCode && !p.exitSignal && end && end->exitStatus > 0 && !p.exec)
        p.exitCode = static_cast<int>(end->exitStatus - 1);
    p.snapshot = outcome.snapshot;
    p.durationS = outcome.durationS;
    p.incompleteReason = incompleteReason(agg, outcome);
    p.complete = p.incompleteReason.empty();
}

std::string siteText(const core::Aggregator& agg, Symbolizer& symbolizer, const core::StackState& s,
                     SiteMode siteMode) {
    const Stack stack = mergedStack(agg, symbolizer, s);
    const std::optional<size_t> site = core::chooseSite(stack, siteMode);
    return site ? reporters::shortFrame(stack[*site]) : core::kNoStackSite;
}

bool endsShownStack(const core::Frame& own, bool pythonFollows) {
    return own.function == "main" || (pythonFollows && isInterpreterFrame(own));
}

core::TimelineSeries timelineSeries(const core::Timeline& timeline) {
    core::TimelineSeries s;
    s.bucketS = static_cast<double>(timeline.bucketNs()) / 1e9;
    // The same conversion as peak_time_s: the peak's point carries that very number.
    for (const core::TimelineSample& sample : timeline.samples())
        s.points.push_back({static_cast<double>(sample.timeNs) / 1e9, sample.bytes});
    return s;
}

}  // namespace memtool::cli
