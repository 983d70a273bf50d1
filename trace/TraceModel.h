#pragma once
// trace.json, schema memtool.trace/1, as plain data. Reporters read this model;
// trace/TraceReader converts it to and from JSON. Field meanings: docs/TRACE.md.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/Frame.h"

namespace memtool::core {

inline constexpr const char* kTraceSchema = "memtool.trace/1";

// PyTorch's caching allocator on one CUDA device, seen through the torch bridge:
// "active" (blocks in tensors; the allocator's allocated_bytes) and "reserved"
// (segments it holds). Keys of the pools maps below.
inline constexpr const char* kPoolActive = "active";
inline constexpr const char* kPoolReserved = "reserved";
// The private pools' part of those two (CUDA graphs' pools, torch.cuda.MemPool).
inline constexpr const char* kPoolGraphs = "graphs";
inline constexpr const char* kPoolGraphsActive = "graphs_active";

// ProcessTrace::leakMoment.
inline constexpr const char* kLeakAtPython = "python";
inline constexpr const char* kLeakAtExit = "exit";
inline constexpr const char* kLeakAtEnd = "end";

// The figures of one device, or of one caching-allocator pool of a CUDA device.
struct PoolTotals {
    uint64_t peakBytes = 0;     // the most held at once (paused memory is not held)
    uint64_t currentBytes = 0;  // live at the end of the stream, paused or not
    // Live when the program's own code finished (ProcessTrace::leakMoment), paused
    // or not; currentBytes when the stream has no such moment. Where the program's
    // globals were listed (ProcessTrace::heldAtExitKnown) it splits into what they
    // still reached (heldAtExitBytes: a model, its optimizer state) and the rest
    // (leakedBytes: what nothing reachable held); elsewhere leakedBytes is all of it.
    uint64_t liveAtEndBytes = 0;
    uint64_t heldAtExitBytes = 0;
    uint64_t leakedBytes = 0;
    uint64_t teardownFreedBytes = 0;  // freed after that moment (the interpreter's teardown)
    uint64_t teardownFreeCount = 0;
    uint64_t pausedBytes = 0;  // of which paused (pausable regions) at the end
    uint64_t allocatedBytes = 0;
    uint64_t freedBytes = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    double peakTimeS = 0;  // seconds since the process started, when the peak was reached
};

// Of a device's held_at_exit_bytes, what one global of the program held (the
// variable its tensors were first reached from: `kept`, `module.name`).
struct HeldBy {
    std::string name;  // "" for storages the collector sent without a name
    uint64_t bytes = 0;
};
inline constexpr size_t kMaxHeldBy = 100;  // a trace's list per device, largest first

struct DeviceTotals : PoolTotals {
    std::vector<HeldBy> heldBy;  // largest first (then by name), at most kMaxHeldBy
    std::string source;  // what saw it: "libc10" (CPU allocator hooks), "cupti" (CUDA driver
                         // callbacks), "runtime-hooks" (CUDA runtime API hooks)
    std::map<std::string, PoolTotals> pools;  // cuda:N with the torch bridge: "active", "reserved"
};

// What one call stack allocated on a device (or in one of its pools).
struct HotspotFigures {
    uint64_t allocatedBytes = 0;
    uint64_t count = 0;
    uint64_t peakBytes = 0;  // live at the moment of the device's peak
    // Live when the program's own code finished (leakMoment), and its split as
    // PoolTotals's: held (reachable from globals) and leaked (the rest).
    uint64_t liveAtEndBytes = 0;
    uint64_t heldAtExitBytes = 0;
    uint64_t leakedBytes = 0;
};

// What was allocated while one source line executed, on a device (or in one of its pools).
struct LineFigures {
    uint64_t peakBytes = 0;           // device's live bytes, at most, while this line executed
    uint64_t allocatedBytes = 0;      // inclusive: allocations with this line anywhere on the stack
    uint64_t selfAllocatedBytes = 0;  // allocations whose innermost Python frame is this line
    uint64_t count = 0;
};

struct Hotspot : HotspotFigures {
    std::string device;
    std::vector<uint32_t> frames;  // ids into ProcessTrace::frames, innermost first
    std::optional<uint32_t>
        siteFrame;  // id of the frame the hotspot is named after; none without a stack
    // The same as text, as trace.json carries it for people and jq: formatFrame()
    // of each frame, and of the site (kNoStackSite without one). Reporters show
    // text made from the frames; these are written back as they were read.
    std::string site;
    std::vector<std::string> stack;
    std::map<std::string, HotspotFigures> pools;  // the same stack in the caching allocator's pools
};

struct LineStat : LineFigures {
    std::string file;
    uint64_t line = 0;
    std::string function;
    std::string device;
    std::map<std::string, LineFigures> pools;  // the same line in the caching allocator's pools
};

struct StreamCheck {
    bool verified = false;  // the collector's end counters equal what was received
    // Verified from the counts a killed process left beside its send buffer: it
    // died before its collector could end the stream (core::TailHeader).
    bool readBack = false;
    uint64_t recordsReceived = 0;
    uint64_t allocsReceived = 0;
    uint64_t freesReceived = 0;
    uint64_t unmatchedFrees = 0;
    uint64_t missedEvents = 0;
    // The collector's lock over the stream (core::kNoteCollectorLock): the times a
    // thread found it held, and slept on it; where the stream said.
    bool lockCounted = false;
    uint64_t lockContended = 0;
    uint64_t lockWaits = 0;
};

// A pausable region (a tag on one device) as the stream left it.
struct RegionTotals {
    std::string tag;
    std::string device;
    std::string backup;        // "none", "host", "disk"
    uint64_t bytes = 0;        // live at the end, resident or paused
    uint64_t pausedBytes = 0;  // of which paused
};

// memtool attach: a storage Python could see in the process when memtool asked,
// right after the attach, that memtool never saw allocated (it was there before).
struct StorageAtAttach {
    std::string device;
    std::string name;  // the tensor's name, as `memtool ctl PID tensors` gives it
    uint64_t bytes = 0;
};

// One pause or resume, as it happened.
struct ControlEvent {
    double timeS = 0;    // on the allocations' clock: seconds since the collector connected
    std::string action;  // "pause", "resume", "yield", "restore"
    std::string origin;  // "api" (the program), "ctl" (memtool ctl), "policy" (a policy's rule)
    std::string tag;
    std::string device;
    uint64_t bytes = 0;  // physical memory released or restored
    std::string backup;  // "none", "host", "disk"
    double durationS = 0;
    bool ok = true;  // false: it failed and changed nothing
    std::string message;
};

// Live bytes right after an event.
struct TimelinePoint {
    double timeS = 0;  // on the allocations' clock: seconds since the collector connected
    uint64_t bytes = 0;
};

// A device's (or pool's) live bytes over the run, reduced to at most a few thousand
// points: per time bucket its first, lowest, highest and last (core/Timeline.h). The
// highest point is the device's peak_bytes at its peak_time_s.
struct TimelineSeries {
    double bucketS = 0;  // the width of the buckets it was reduced to
    std::vector<TimelinePoint> points;
};

// What held a device at an out-of-memory moment: one call site, or one source
// line (the innermost line of the user's own code or of Python on the stack).
struct OomSiteBytes {
    std::string site;  // formatFrame() of the site; "(N other sites)" for the rest
    uint64_t bytes = 0;
    // The site's frame: an id into ProcessTrace::frames; none for the rest and
    // for stacks without a frame. Reports show the frame, as they show hotspots'.
    std::optional<uint32_t> siteFrame;
};
struct OomLineBytes {
    std::string file;  // empty: the stacks with no such line, or the rest
    uint64_t line = 0;
    std::string function;  // or "(no source line)", "(N other lines)"
    uint64_t bytes = 0;
};

// An allocation the device refused for want of memory, and what was live then.
// Traces from before capture existed carry only the first three fields.
struct OomEvent {
    double timeS = 0;  // on the allocations' clock
    std::string device;
    uint64_t requestedBytes = 0;
    std::string source;  // "allocator" (the call failed), "torch" (PyTorch's allocator gave up)
    // The request's stack and site, as hotspots keep theirs: ids into
    // ProcessTrace::frames, innermost first, and the site's id (none without a
    // stack); `site` and `stack` are the same as text, as trace.json carries
    // them (kNoStackSite without a stack), written back as they were read.
    std::vector<uint32_t> frames;
    std::optional<uint32_t> siteFrame;
    std::string site;
    std::vector<std::string> stack;
    std::string file;  // the request's innermost user/Python line, when it has one
    uint64_t line = 0;
    std::string function;
    std::string heldOn;            // the device or pool the held bytes are counted on
    uint64_t liveBytes = 0;        // held then on heldOn
    uint64_t deviceFreeBytes = 0;  // the device's free and total bytes then (0: unknown)
    uint64_t deviceTotalBytes = 0;
    std::vector<OomSiteBytes> bySite;  // largest first; they add up to liveBytes
    std::vector<OomLineBytes> byLine;  // likewise
};

// A source file the trace quotes, as memtool run read it when the run ended: the
// lines its reports show (the line table's blocks, hotspot frames, out-of-memory
// lines), so that an archived trace shows the code as it was.
struct SourceFile {
    uint64_t fnv1a64 = 0;                   // of the whole file's bytes as read (core/SourceHash.h)
    std::map<uint64_t, std::string> lines;  // line number (from 1) -> its text, newline cut
};

// memtool run --events: how this process's events were kept, in the log the
// trace names (Trace::eventsFile; trace/EventLog.h).
struct EventsSummary {
    uint64_t section = 0;  // its entry's position in the log
    std::string mode;      // "last" (a ring of the last `limit`) or "all"
    uint64_t limit = 0;
    uint64_t seen = 0;    // that arrived
    uint64_t kept = 0;    // in the log
    uint64_t folded = 0;  // folded into windows by the collector: not in the log
};

// One private pool of PyTorch's caching allocator on a CUDA device, seen through
// the torch bridge: a CUDA graph's own, one graphs share (graph_pool_handle()),
// a torch.cuda.MemPool. Its bytes are also in the device's reserved and active.
struct GraphPool {
    std::string device;   // "cuda:0"
    uint32_t number = 0;  // 1 and up, in the order it first held memory
    // PyTorch's MempoolId_t: (capture id, 0) for a graph's own pool, (0, uid) for
    // graph_pool_handle() and MemPool.
    uint64_t idFirst = 0, idSecond = 0;
    uint64_t reservedPeakBytes = 0;  // the most its segments held at once
    uint64_t activePeakBytes = 0;    // the most its blocks held at once
    uint64_t reservedEndBytes = 0;   // at the stream's end
    uint64_t activeEndBytes = 0;
    // Where its blocks were allocated (the site of each stack, as hotspots name
    // it), most bytes first, at most kMaxGraphPoolSites: where the graphs that
    // captured into it ran.
    struct Site {
        std::string site;
        uint64_t allocatedBytes = 0;
    };
    std::vector<Site> sites;
};
inline constexpr size_t kMaxGraphPoolSites = 5;

struct ProcessTrace {
    int64_t pid = 0;
    int64_t ppid = 0;
    std::vector<std::string> command;
    std::string cwd;  // working directory memtool run started in (where relative paths lead)
    // The host it ran on (gethostname), which puts the traces of a multi-node job's
    // ranks apart; empty in older traces and in those memtool did not run.
    std::string host;
    std::optional<int> exitCode;    // set when the process exited normally
    std::optional<int> exitSignal;  // set when a signal ended it
    bool complete = false;
    std::string incompleteReason;
    bool snapshot = false;  // taken while the process ran (memtool ctl PID snapshot): no exit yet
    // Its collector connected: it loaded an allocator memtool tracks (libc10's CPU
    // allocator, CUDA). False only for processes[0] when the program never did.
    bool tracked = true;
    bool forked = false;  // forked from its parent without exec: what it inherited is not counted
    bool exec = false;    // this image ended by exec'ing another: what it held went with it
    // A memtool.track() block's trace: the process ran on when it ended, and
    // earlierFrees of its frees were of blocks allocated before the block began
    // (counted nowhere else).
    bool detached = false;
    uint64_t earlierFrees = 0;
    // The track was `memtool attach`'s (detached: memtool let the process go).
    bool attached = false;
    // Its storages from before the attach that Python could see, as listed when the
    // main thread first ran Python after it (listed, not counted); at what time;
    // or why they could not be listed.
    std::vector<StorageAtAttach> liveAtAttach;
    std::optional<double> liveAtAttachTimeS;
    std::string liveAtAttachUnlisted;
    // Where a launcher (torchrun, Slurm, MPI) set them: the process's rank, its rank
    // on its node and the number of ranks; rankEnvironment has the variables as set.
    std::optional<int64_t> rank;
    std::optional<int64_t> localRank;
    std::optional<int64_t> worldSize;
    std::map<std::string, std::string> rankEnvironment;
    double durationS = 0;
    // When leaks were counted: kLeakAtPython (interpreter finalization began),
    // kLeakAtExit (main returned, exit was called) or kLeakAtEnd (the stream's
    // end: no such moment was seen, e.g. os._exit, a kill, a snapshot).
    std::string leakMoment = "end";
    // The program's globals were listed at a "python" leakMoment: held_at_exit_bytes
    // figures are known (else they are 0 and leaked_bytes is everything live then).
    bool heldAtExitKnown = false;
    double leakTimeS = 0;      // on the allocations' clock (the end: the last event's time)
    uint64_t maxRssBytes = 0;  // the launched process only: its peak resident memory (0: unknown)
    // The launched process only: CPU seconds (user + system) it and the children it
    // waited for used, from wait4; unset when not known.
    std::optional<double> cpuS;
    // When its stream started (the zero of its clock), Unix seconds: what puts
    // memtool run's polls (Trace::polls) on its clock. Unset in older traces.
    std::optional<double> startUnixS;
    bool nativeStacks = true;
    bool pythonStacks = true;
    std::map<std::string, DeviceTotals> devices;
    // Every frame hotspots and out-of-memory events name, once each (their ids index this).
    std::vector<Frame> frames;
    std::vector<Hotspot> hotspots;
    std::vector<LineStat> lines;
    StreamCheck stream;
    std::vector<RegionTotals> regions;
    std::vector<ControlEvent> control;
    std::vector<OomEvent> oom;
    std::vector<GraphPool> graphPools;  // by number
    uint64_t oomCount = 0;  // out-of-memory events in all (oom keeps the first 16 in full)
    // Per device and pool, by name: "cpu", "cuda:0", "cuda:0.active", ... (control
    // and oom events stand on the same clock).
    std::map<std::string, TimelineSeries> timeline;
    // The user's own source files its frames, lines and out-of-memory events name,
    // by the name they give (files that could not be read are absent).
    std::map<std::string, SourceFile> sources;
    std::vector<std::string> warnings;
    std::optional<EventsSummary> events;
};

// The first warning of an untracked process: that it loaded no allocator memtool
// tracks, or instead why memtool's collector could not load into it at all (a
// statically linked or setuid program, cli/run/PreloadReach.h).
inline constexpr const char* kNoTrackedAllocatorWarning =
    "the program loaded no allocator memtool tracks (no libc10 CPU allocator)";
// That reason for an untracked process whose collector could not load; empty
// for any other.
inline std::string collectorUnloadable(const ProcessTrace& p) {
    if (p.tracked || p.warnings.empty() || p.warnings.front() == kNoTrackedAllocatorWarning)
        return {};
    return p.warnings.front();
}

// memtool run's readings of the machine (--poll, --policy), every interval_ms:
// per series, bytes over time (reduced as a device's timeline is), time_s since
// startUnixS. Series: "cpu.used"/"cpu.total" (host memory, as its cgroup limits
// it or /proc/meminfo), "cuda:N.used"/"cuda:N.total"/"cuda:N.processes" (NVML),
// "rss:PID", "backup_dir.free".
struct PollSeries {
    uint32_t intervalMs = 0;
    uint64_t rounds = 0;
    double startUnixS = 0;
    std::string hostSource;  // "cgroup v2 /sys/fs/cgroup/...", "meminfo"
    std::string cudaSource;  // "nvml", "none"
    std::map<std::string, TimelineSeries> series;
};

// One action a policy's rule took, with the reading that triggered it.
struct PolicyAction {
    int64_t pid = 0;
    double timeS = 0;  // on that process's clock
    uint64_t rule = 0;
    std::string ruleText;  // "cuda used above 85%: pause weights to host"
    std::string device;    // where the reading crossed
    std::string metric;
    uint64_t readingBytes = 0;
    uint64_t thresholdBytes = 0;
    std::optional<double> usedPercent;  // the device's, when polled
    std::string action;                 // "pause weights to host"
    bool ok = false;
    std::string message;
    uint64_t bytes = 0;  // what moved
    double seconds = 0;
};

struct Trace {
    std::string schema = kTraceSchema;
    std::string memtoolVersion;
    uint64_t cliMaxRssBytes = 0;    // memtool run's own peak resident memory
    std::optional<double> cliCpuS;  // memtool run's own CPU seconds (user + system); unset: unknown
    std::vector<ProcessTrace> processes;
    std::optional<PollSeries> polls;
    std::vector<PolicyAction> policyActions;
    // The event log's file (--events), beside the trace: a plain file name; empty: none.
    std::string eventsFile;
};

// "cpu", "cuda:0", "cuda:0.active", ... for a wire device code.
std::string deviceName(uint8_t device);
// The pool a wire device code names: kPoolActive, kPoolReserved, or "" for a
// device's own figures.
const char* poolKey(uint8_t device);

}  // namespace memtool::core
