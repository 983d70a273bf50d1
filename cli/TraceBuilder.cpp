#include "cli/TraceBuilder.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "cli/Symbolizer.h"
#include "core/FrameClassifier.h"
#include "core/Protocol.h"

namespace memtool::cli {

namespace {

using core::isInterpreterModule;
using core::isLibraryModule;
using core::isLibraryPythonFile;
using core::isSystemSource;

struct Frame {
    bool python = false;
    std::string function;
    std::string file;
    uint64_t line = 0;
    std::string module;
    bool user = false;
    bool memtool = false;            // memtool's own libraries (collector, CUDA injection, torch bridge)
    bool allocatorInternal = false;  // memtool, libc, libc10: the allocation machinery itself
    std::string text;
};

std::string baseName(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool isEvalFrame(const Frame& f) {
    return !f.python && isInterpreterModule(f.module) && startsWith(f.function, "_PyEval_EvalFrame");
}

Frame nativeFrame(Symbolizer& sym, uint64_t ip) {
    const NativeFrame& n = sym.symbolize(ip);
    Frame f;
    f.function = n.function;
    f.file = n.file;
    f.line = n.line;
    f.module = n.module;
    std::string b = baseName(n.module);
    f.memtool = startsWith(b, "libmemtool_");
    f.allocatorInternal = f.memtool || startsWith(b, "libc.so") || startsWith(b, "libc10.so");
    // Header code compiled into the user's binary (torch::empty from a LibTorch
    // header) is library code all the same.
    f.user = !isLibraryModule(n.module) && !isSystemSource(n.file);
    std::string name = n.function.empty() ? "??" : n.function;
    if (!n.file.empty())
        f.text = fmt::format("{} ({}:{})", name, n.file, n.line);
    else if (n.function.empty())
        f.text = fmt::format("?? ({}+{:#x})", b.empty() ? "?" : b, n.offset);
    else
        f.text = fmt::format("{} ({})", name, b.empty() ? "?" : b);
    return f;
}

// The trace row a wire device code belongs to: "cuda:0" for cuda:0's pools too
// (core::poolKey names the pool within it).
std::string deviceRow(uint8_t code) {
    int ordinal = core::cudaOrdinal(code);
    return core::deviceName(ordinal >= 0 ? core::cudaDevice(ordinal) : code);
}

}  // namespace

core::ProcessTrace buildProcessTrace(const core::Aggregator& agg, Symbolizer& sym,
                                     const ProcessOutcome& outcome, SiteMode siteMode) {
    core::ProcessTrace p;
    if (agg.handshake()) {
        p.pid = agg.handshake()->pid;
        p.ppid = agg.handshake()->ppid;
        p.command = agg.handshake()->command;
        p.nativeStacks = agg.handshake()->nativeStacks;
        p.pythonStacks = agg.handshake()->pythonStacks;
    }
    p.exitCode = outcome.exitCode;
    p.exitSignal = outcome.exitSignal;
    p.durationS = outcome.durationS;

    std::string cudaSource = "cupti";
    for (const core::NoteRecord& n : agg.notes()) {
        if (n.key == core::kNoteWarning) p.warnings.push_back(n.text);
        if (n.key == core::kNoteCudaSource) cudaSource = n.text;
    }
    for (const auto& [code, d] : agg.devices()) {
        core::PoolTotals totals;
        totals.peakBytes = d.peakBytes;
        totals.currentBytes = d.currentBytes;
        totals.allocatedBytes = d.allocatedBytes;
        totals.freedBytes = d.freedBytes;
        totals.allocCount = d.allocCount;
        totals.freeCount = d.freeCount;
        totals.peakTimeS = static_cast<double>(d.peakTimeNs) / 1e9;
        const std::string pool = core::poolKey(code);
        core::DeviceTotals& t = p.devices[deviceRow(code)];
        if (!pool.empty()) {
            t.pools[pool] = totals;
        } else {
            static_cast<core::PoolTotals&>(t) = totals;
            t.source = code == core::kDeviceCpu ? "libc10" : cudaSource;
        }
    }

    const auto& nodes = agg.nativeNodes();
    const auto& pyNodes = agg.pyNodes();
    const auto& codes = agg.pyCodes();

    std::map<std::pair<std::string, std::string>, size_t> hotspotIndex;  // (device, stack) -> index
    struct LineKey {
        std::string device, file;
        uint64_t line;
        bool operator<(const LineKey& o) const {
            return std::tie(device, file, line) < std::tie(o.device, o.file, o.line);
        }
    };
    std::map<LineKey, core::LineStat> lines;

    for (const core::StackState& s : agg.stacks()) {
        std::vector<Frame> native, python;
        for (uint64_t n = s.pyNode; n != 0; n = pyNodes[n].parent) {
            const core::PyCodeRecord& c = codes[pyNodes[n].codeId];
            Frame f;
            f.python = true;
            f.function = c.name;
            f.file = c.file;
            f.line = pyNodes[n].line;
            f.user = !isLibraryPythonFile(c.file);
            f.text = fmt::format("{} ({}:{})", c.name, c.file, f.line);
            python.push_back(std::move(f));
        }
        // Symbolize from the innermost frame out, and stop where nothing further is
        // shown: at main (libc's start-up frames), or at the interpreter loop when
        // Python frames stand in for everything outside it.
        for (uint64_t n = s.nativeNode; n != 0; n = nodes[n].parent) {
            native.push_back(nativeFrame(sym, nodes[n].ip));
            if (native.back().function == "main" || (!python.empty() && isEvalFrame(native.back()))) break;
        }
        // memtool's own frames at the inner end (the torch bridge and the hook that
        // attached it) are how the event was seen, not who asked for the memory.
        auto ours = std::find_if(native.begin(), native.end(), [](const Frame& f) { return !f.memtool; });
        if (ours != native.end()) native.erase(native.begin(), ours);
        // The Python frames stand where the interpreter's were: keep the native frames
        // inside the innermost evaluation loop (torch's C++), minus the interpreter's
        // own call plumbing, then the Python stack; the native frames outside it
        // (main, Py_RunMain, ...) say nothing a Python frame does not.
        std::vector<Frame> merged;
        if (python.empty()) {
            merged = std::move(native);
        } else {
            auto eval = std::find_if(native.begin(), native.end(), isEvalFrame);
            for (auto it = native.begin(); it != eval; ++it)
                if (eval == native.end() || !isInterpreterModule(it->module)) merged.push_back(std::move(*it));
            for (auto& f : python) merged.push_back(std::move(f));
        }

        const std::string device = deviceRow(s.device);
        const std::string pool = core::poolKey(s.device);
        std::string site;
        if (!merged.empty()) {
            const Frame* chosen = &merged[0];
            if (siteMode == SiteMode::User) {
                auto user = std::find_if(merged.begin(), merged.end(), [](const Frame& f) { return f.user; });
                auto outside = std::find_if(merged.begin(), merged.end(),
                                            [](const Frame& f) { return !f.allocatorInternal; });
                chosen = user != merged.end() ? &*user : outside != merged.end() ? &*outside : &merged[0];
            }
            site = chosen->text;
        } else {
            site = "(no stack)";
        }
        std::vector<std::string> stack;
        std::string joined;
        for (const auto& f : merged) {
            stack.push_back(f.text);
            joined += f.text;
            joined += '\n';
        }
        auto [it, inserted] = hotspotIndex.try_emplace({device, joined}, p.hotspots.size());
        if (inserted) {
            core::Hotspot h;
            h.device = device;
            h.site = site;
            h.stack = std::move(stack);
            p.hotspots.push_back(std::move(h));
        }
        core::Hotspot& h = p.hotspots[it->second];
        core::HotspotFigures& hf = pool.empty() ? h : h.pools[pool];
        hf.allocatedBytes += s.allocatedBytes;
        hf.count += s.count;
        hf.peakBytes += agg.liveAtPeak(s);
        hf.leakedBytes += s.liveBytes;

        // Lines: every distinct (file, line) of a Python frame or of the user's own
        // native code with debug info, counted once per stack even under recursion.
        std::set<std::pair<std::string, uint64_t>> seen;
        bool selfAssigned = false;
        for (const Frame& f : merged) {
            bool lineBearing = !f.file.empty() && f.line > 0 && (f.python || f.user);
            if (!lineBearing) continue;
            bool isSelf = !selfAssigned;
            selfAssigned = true;
            if (!seen.insert({f.file, f.line}).second) continue;
            core::LineStat& l = lines[LineKey{device, f.file, f.line}];
            if (l.file.empty()) {
                l.file = f.file;
                l.line = f.line;
                l.function = f.function;
                l.device = device;
            }
            core::LineFigures& lf = pool.empty() ? l : l.pools[pool];
            lf.allocatedBytes += s.allocatedBytes;
            lf.count += s.count;
            lf.peakBytes = std::max(lf.peakBytes, s.maxDeviceBytesAtAlloc);
            if (isSelf) lf.selfAllocatedBytes += s.allocatedBytes;
        }
    }
    for (auto& [key, l] : lines) p.lines.push_back(std::move(l));

    p.stream.recordsReceived = agg.recordsReceived();
    p.stream.allocsReceived = agg.allocsReceived();
    p.stream.freesReceived = agg.freesReceived();
    p.stream.unmatchedFrees = agg.unmatchedFrees();
    p.stream.verified = agg.streamVerified();
    if (agg.end()) p.stream.missedEvents = agg.end()->missedEvents;
    if (!outcome.streamError.empty()) {
        p.incompleteReason = outcome.streamError;
    } else if (!agg.end()) {
        p.incompleteReason = outcome.exitSignal
                                 ? fmt::format("the process was killed by signal {} before its collector could "
                                               "finish the stream",
                                               *outcome.exitSignal)
                                 : "the stream ended without its end record (the process was killed)";
    } else if (!p.stream.verified) {
        p.incompleteReason = fmt::format(
            "the collector counted {} records, {} allocations and {} frees; {}, {} and {} arrived",
            agg.end()->recordCount, agg.end()->allocCount, agg.end()->freeCount, agg.recordsReceived(),
            agg.allocsReceived(), agg.freesReceived());
    }
    p.complete = p.incompleteReason.empty();
    if (agg.doubleAllocs() > 0)
        p.warnings.push_back(fmt::format("{} allocations reused a live address (a free went unseen)",
                                         agg.doubleAllocs()));
    return p;
}

}  // namespace memtool::cli
