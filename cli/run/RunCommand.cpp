#include "cli/run/RunCommand.h"

#include <fmt/format.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "cli/attach/AttachSession.h"
#include "cli/attach/Injection.h"
#include "cli/ctl/ControlServer.h"
#include "cli/live/LiveView.h"
#include "cli/policy/PolicyRunner.h"
#include "cli/run/CollectorLocator.h"
#include "cli/run/CudaPlan.h"
#include "cli/run/EventLoop.h"
#include "cli/run/FileLimit.h"
#include "cli/run/Launcher.h"
#include "cli/run/OutputPattern.h"
#include "cli/run/PreloadReach.h"
#include "cli/run/ProcStat.h"
#include "cli/run/RunEvents.h"
#include "cli/run/SignalRouter.h"
#include "cli/run/TargetProcess.h"
#include "cli/stream/CollectorListener.h"
#include "core/DecimalPair.h"
#include "core/Error.h"
#include "core/Files.h"
#include "core/Units.h"
#include "reporters/ProcessSelection.h"
#include "trace/RecordedSources.h"
#include "trace/TraceReader.h"
#include "trace/TraceWriter.h"

namespace memtool::cli {

namespace {

// Past --wait-children, what is already readable is still read (the program's
// own last bytes, a process that just ended), for at most this long more.
constexpr double kDrainS = 1.0;

// memtool run's own peak resident memory: VmHWM, this image's high-water mark.
// ru_maxrss is not it where memtool was forked from a large process and exec'd
// (the companion of memtool.track(), started by a program holding torch): at
// exec the kernel folds the old image's mark into it. ru_maxrss where /proc
// cannot be read.
uint64_t ownPeakRssBytes(const rusage& self) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmHWM:", 0) == 0)
            return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;  // kB
    return static_cast<uint64_t>(self.ru_maxrss) * 1024;                 // KiB on Linux
}

// -o -: the trace goes to stdout, after whatever the program printed there.
constexpr const char* kStdoutPath = "-";

// Where paused regions' disk backups go: the directory the user named, else
// $TMPDIR, else /tmp, as an absolute path (the program may change directory).
// The collector makes each backup there as a file no name ever points to (see
// DiskBackup), so nothing is made or left in it, however the program or memtool
// ends; the directory need only exist and be writable.
std::string backupDirectory(const std::string& base) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = !base.empty() ? base : tmp && *tmp ? tmp : "/tmp";
    auto refuse = [&](const std::string& why) {
        return core::Error(core::kExitRunFailed, "cannot keep backups in " + dir + ": " + why);
    };
    char resolved[PATH_MAX];
    if (!realpath(dir.c_str(), resolved)) throw refuse(std::strerror(errno));
    struct stat st {};
    if (stat(resolved, &st) != 0) throw refuse(std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) throw refuse("not a directory");
    if (access(resolved, W_OK | X_OK) != 0) throw refuse(std::strerror(errno));
    return resolved;
}

// MEMTOOL_FOLD in memtool run's environment: 0, the collector sends every event
// as its own record; 2, it folds every run of events into Window records; else
// only runs that come fast (collectors/engine/RecordWriter.h). The trace is the same
// either way: it is there to measure what folding costs and saves, and to test it.
// Under --events every event is its own record, as a window has none (unless
// MEMTOOL_FOLD=2 says always: its events are counted as folded, not logged).
std::string foldingOption(bool events) {
    const char* fold = std::getenv("MEMTOOL_FOLD");
    if (events && !(fold && std::string(fold) == "2")) return ",fold=0";
    if (fold && std::string(fold) == "0") return ",fold=0";
    if (fold && std::string(fold) == "2") return ",fold=2";
    return "";
}

// What the collector in the target is told: where to connect, what to record,
// where `import memtool` is found, where paused regions' backups go.
std::vector<EnvVariable> targetEnvironment(const RunOptions& options, const std::string& collector,
                                           const CudaPlan& cuda, const std::string& socketPath,
                                           const std::string& backupDir,
                                           const std::string& controlSocket) {
    const char* existing = std::getenv("LD_PRELOAD");
    std::vector<EnvVariable> env{
        {"LD_PRELOAD", existing && *existing ? collector + ":" + existing : collector},
        {core::kEnvSocket, socketPath},
        {core::kEnvBackupDir, backupDir},
        // Where the program asks memtool run about itself (memtool.snapshot, ...).
        {core::kEnvControlSocket, controlSocket},
        {core::kEnvOptions,
         fmt::format(
             "native={},python={},cudahooks={},pausable={},run={}{}{}{}{}{}{}",
             options.nativeStacks ? 1 : 0, options.pythonStacks ? 1 : 0, cuda.runtimeHooks ? 1 : 0,
             options.pausableAll ? 1 : 0,
             // The program is memtool run's child (the collector's control thread
             // waits until it is needed there only: ControlChannel.h).
             getpid(),
             // A live view shows what a quiet program did last: the collector's
             // control thread sends it from the start.
             options.live ? ",control=1" : "",
             options.hostPoolBytes ? fmt::format(",hostpool={}", *options.hostPoolBytes) : "",
             options.hostBudgetBytes ? fmt::format(",hostbudget={}", *options.hostBudgetBytes) : "",
             foldingOption(options.events.on()), options.moduleScopes ? ",modules=1" : "",
             options.verify ? ",verify=1" : "")},
    };
    // The CUDA driver loads this when (and only if) the program initializes CUDA.
    if (!cuda.injection.empty()) env.push_back({"CUDA_INJECTION64_PATH", cuda.injection});
    // A bridge named in the environment wins (tests, a bridge built elsewhere).
    if (!cuda.torchBridge.empty()) env.push_back({core::kEnvTorchBridge, cuda.torchBridge, true});
    // The package goes first on the path, the user's entries after it.
    if (const std::string package = locatePythonPackage(collector); !package.empty()) {
        const char* path = std::getenv("PYTHONPATH");
        env.push_back({"PYTHONPATH", path && *path ? package + ":" + path : package});
    }
    return env;
}

// A second after the program exited, with processes of the run still streaming,
// the user is told what memtool run waits for (the program's output has ended).
constexpr double kWaitNoticeS = 1;

// What memtool run still waits for once the program has exited: "1 process still
// running (pid 7202): waiting for it", up to five pids named.
std::string stillRunning(const CollectorListener& listener) {
    // Those streaming, and those left to memtool that have not connected (yet).
    std::set<int64_t> streaming;
    for (const auto& c : listener.connections())
        if (c->open() && c->isStream()) streaming.insert(c->aggregator().handshake()->pid);
    for (const auto& [pid, name] : childrenOf(getpid())) streaming.insert(pid);
    const std::vector<int64_t> pids(streaming.begin(), streaming.end());
    std::string named;
    for (size_t i = 0; i < pids.size() && i < 5; ++i)
        named += fmt::format("{}{}", i ? ", " : "", pids[i]);
    if (pids.size() > 5) named += fmt::format(" and {} more", pids.size() - 5);
    const bool one = pids.size() == 1;
    return fmt::format("{} process{} still running (pid{} {}): waiting for {}", pids.size(),
                       one ? "" : "es", one ? "" : "s", named, one ? "it" : "them");
}

// The processes' traces, built while the program is still exiting. Once every
// stream has ended, memtool run has nothing to read until the program is reaped,
// and the program's exit still takes a while (its libraries' destructors, the
// kernel freeing its memory: 40-65 ms for a fork pool of torch workers here).
// What a trace holds of an ended stream no later byte can change, so it is built
// then (TraceBuilder's body: symbolized stacks, hotspots, lines, timelines), on a
// core the exiting program leaves free; after the reap only how each process
// ended is added. A stream still open, or one that connects later, is built at
// the end as before. Their text is rendered then too (reporters::RenderedBody):
// after the reap, only what the outcome sets is written afresh.
class PreparedBodies {
public:
    explicit PreparedBodies(SiteMode siteMode) : siteMode_(siteMode) {}

    // Builds the body of every ended stream not built yet.
    void prepare(const CollectorListener& listener) {
        for (const auto& c : listener.connections()) {
            if (c->open() || !c->isStream() || bodies_.count(c.get())) continue;
            Prepared& p = bodies_[c.get()];
            p.body = buildProcessBody(c->aggregator(), c->symbolizer(), siteMode_);
            p.rendered = std::make_unique<reporters::RenderedBody>(p.body);
        }
    }

    // The trace of `c`'s process: its body built ahead (handed over, once) or
    // now; `rendered` is then its text, or null. The text stays this object's.
    core::ProcessTrace take(CollectorConnection& c, const ProcessOutcome& outcome,
                            const reporters::RenderedBody** rendered) {
        *rendered = nullptr;
        auto node = bodies_.extract(&c);
        if (node.empty())
            return buildProcessTrace(c.aggregator(), c.symbolizer(), outcome, siteMode_);
        Prepared& p = node.mapped();
        core::ProcessTrace trace = std::move(p.body);
        applyOutcome(trace, c.aggregator(), outcome);
        *rendered = p.rendered.get();
        handedOver_.push_back(std::move(p.rendered));
        return trace;
    }

private:
    struct Prepared {
        core::ProcessTrace body;
        std::unique_ptr<reporters::RenderedBody> rendered;
    };
    SiteMode siteMode_;
    std::map<const CollectorConnection*, Prepared> bodies_;  // built, not handed over yet
    std::vector<std::unique_ptr<reporters::RenderedBody>> handedOver_;  // text of those handed over
};

// True when a stream ended at an exec and none of its process has connected since:
// the new image's collector connects once it loads torch, then waits for admission
// (10 s). A body built meanwhile would keep the loop from admitting it: building one
// of a torch 2.x process reads its libraries' symbols for seconds (14 s for a CUDA
// torch 2.14 on a loaded 2-core machine), and that image ran unprofiled.
bool anImageToCome(const CollectorListener& listener) {
    std::set<int64_t> execed;
    for (const auto& c : listener.connections()) {
        if (!c->isStream()) continue;
        const int64_t pid = c->aggregator().handshake()->pid;
        execed.erase(pid);
        const auto& end = c->aggregator().end();
        if (!c->open() && end && end->exitKind == static_cast<uint64_t>(core::ExitKind::Exec))
            execed.insert(pid);
    }
    return !execed.empty();
}

// Runs the loop until the target has exited and every stream has ended (or
// `waitS` has passed since), the live view (if any) redrawn between waits; a
// control socket is one more watched descriptor. Unless `quiet`, a wait past
// kWaitNoticeS is said on stderr. While every stream has ended and memtool run
// still waits (for the program's reaping, or a descendant left running), `bodies`
// builds what it can.
void collectStreams(EventLoop& loop, const CollectorListener& listener, const TargetProcess& target,
                    LiveView* live, double waitS, bool quiet, PreparedBodies& bodies) {
    bool noticed = quiet || waitS <= kWaitNoticeS;
    for (;;) {
        // A collector may still sit in the listen queue: take it before leaving.
        // A descendant left running may connect yet (importing torch when its parent
        // exited) or be about to exit: it is waited for as a stream is.
        const bool ended = listener.openStreams() == 0 && !listener.connectionWaiting();
        if (target.exited() && ended && !target.childrenLeft()) return;
        // Built in the program's own exit (its streams ended, not yet reaped); not
        // while a new image or a descendant left running may yet connect.
        if (ended && !target.exited() && !anImageToCome(listener)) bodies.prepare(listener);
        if (!noticed && target.exited() && target.secondsSinceExit() >= kWaitNoticeS &&
            !(live && live->showing())) {
            noticed = true;
            std::cerr << fmt::format(
                "memtool: the program exited; {} until {:g} s after the exit (--wait-children "
                "sets how long)\n",
                stillRunning(listener), waitS);
        }
        if (target.exited() && target.secondsSinceExit() >= waitS) {
            // Whatever has arrived is read; a process still streaming gets no more.
            while (loop.waitOnce(0) && target.secondsSinceExit() < waitS + kDrainS) {
            }
            return;
        }
        int timeoutMs = target.exited() ? 100 : -1;
        if (live && live->showing()) {
            const int untilFrame = live->refresh(listener);
            timeoutMs = timeoutMs < 0 ? untilFrame : std::min(timeoutMs, untilFrame);
        }
        loop.waitOnce(timeoutMs);
    }
}

// Why a process still running when memtool run stopped waiting is incomplete
// (`block`: memtool.track's, whose end is what it was waited for after).
std::string unwaitedReason(double waitS, bool block) {
    if (block)
        return fmt::format(
            "the process was still running {:g} s after the memtool.track block ended, when "
            "memtool stopped waiting for it",
            waitS);
    if (waitS == 0)
        return "the process was still running when the program exited (memtool run "
               "--wait-children 0 waits for none)";
    return fmt::format(
        "the process was still running {:g} s after the program exited, when memtool run "
        "stopped waiting for it",
        waitS);
}

// processes[0] when no collector of the target connected: it loaded no tracked
// allocator, or the collector could not load into it (PreloadReach.h), which its
// warning says instead.
core::ProcessTrace untrackedTarget(const TargetProcess& target, const RunOptions& options) {
    const ProcessOutcome outcome = target.outcome();
    core::ProcessTrace p;
    p.pid = target.pid();
    p.ppid = getpid();
    p.command = options.command;
    p.exitCode = outcome.exitCode;
    p.exitSignal = outcome.exitSignal;
    p.durationS = outcome.durationS;
    p.nativeStacks = options.nativeStacks;
    p.pythonStacks = options.pythonStacks;
    p.complete = true;
    p.tracked = false;
    p.stream.verified = true;
    if (target.isOutside()) {
        p.warnings.push_back(
            "the tracked process never started its stream (memtool.track did not begin)");
        return p;
    }
    const char* path = getenv("PATH");
    const std::string unreachable =
        preloadUnreachable(options.command.at(0), path ? path : "/usr/local/bin:/usr/bin:/bin");
    p.warnings.push_back(unreachable.empty() ? core::kNoTrackedAllocatorWarning : unreachable);
    return p;
}

// Why a collector stopped writing its stream, from its notice (a connection of its
// own, kHandshakeNotice), by the stream's pid and start time.
std::map<std::pair<int64_t, uint64_t>, std::string> lostStreams(const CollectorListener& listener) {
    std::map<std::pair<int64_t, uint64_t>, std::string> lost;
    for (const auto& c : listener.connections()) {
        const auto& h = c->aggregator().handshake();
        if (!h || !h->notice) continue;
        for (const core::NoteRecord& n : c->aggregator().notes())
            if (n.key == core::kNoteStreamLost) lost[{h->pid, h->startUnixNs}] = n.text;
    }
    return lost;
}

// How children ended, by pid, as the processes that reaped them said
// (kNoteChildEnded, "PID STATUS"): a fork child killed by a signal cannot say it in
// its own stream, and only its parent waits for it. Text that is not two whole
// numbers (a stream from elsewhere) is ignored.
std::map<int64_t, int> reapedChildren(const CollectorListener& listener) {
    std::map<int64_t, int> reaped;
    for (const auto& c : listener.connections()) {
        if (!c->isStream()) continue;
        for (const core::NoteRecord& n : c->aggregator().notes()) {
            if (n.key != core::kNoteChildEnded) continue;
            uint64_t pid = 0, status = 0;
            if (core::readDecimalPair(n.text, &pid, &status) && pid > 0 && pid <= INT64_MAX &&
                status <= 0xffff)
                reaped[static_cast<int64_t>(pid)] = static_cast<int>(status);
        }
    }
    return reaped;
}

// processes[0] is the launched program (the last image it exec'd), then every
// other process in order of birth: by pid, as the kernel hands them out (the order
// they connected in is a race between siblings: a DataLoader's workers would come
// in another order each run, and diff would pair them so), the images of one pid
// in the order they ran.
// rendered[i]: trace.processes[i]'s body text rendered ahead, or null.
core::Trace assembleTrace(const CollectorListener& listener, const TargetProcess& target,
                          const RunOptions& options, const CudaPlan& cuda, PreparedBodies& bodies,
                          std::vector<const reporters::RenderedBody*>& rendered,
                          RunEvents& events) {
    core::Trace trace;
    trace.memtoolVersion = MEMTOOL_VERSION;
    const auto lost = lostStreams(listener);
    const auto reaped = reapedChildren(listener);
    auto lostReason = [&](const CollectorConnection& c) -> std::string {
        const auto& h = *c.aggregator().handshake();
        auto it = lost.find({h.pid, h.startUnixNs});
        return it == lost.end() ? std::string() : it->second;
    };
    // The last stream of each pid: the image that ran last, whose end the pid's end is.
    std::map<int64_t, CollectorConnection*> lastOfPid;
    for (const auto& c : listener.connections())
        if (c->isStream()) lastOfPid[c->aggregator().handshake()->pid] = c.get();
    auto launchedIt = lastOfPid.find(target.pid());
    CollectorConnection* launched = launchedIt == lastOfPid.end() ? nullptr : launchedIt->second;
    if (launched) {
        ProcessOutcome o = target.outcome();
        o.recoveredRecords = launched->recoveredRecords();
        o.streamError = lostReason(*launched);
        if (o.streamError.empty()) o.streamError = launched->error();
        trace.processes.push_back(bodies.take(*launched, o, &rendered.emplace_back()));
        events.add(trace.processes.back(), *launched);
        trace.processes.back().attached = options.attach;
        if (!target.isOutside()) {  // a tracked block's process runs on: no wait4 figures
            trace.processes.back().maxRssBytes = target.maxRssBytes();
            trace.processes.back().cpuS = target.cpuSeconds();
        }
        if (!cuda.warning.empty()) trace.processes.back().warnings.push_back(cuda.warning);
    } else {
        trace.processes.push_back(untrackedTarget(target, options));
        rendered.push_back(nullptr);
        trace.processes.back().maxRssBytes = target.maxRssBytes();
        trace.processes.back().cpuS = target.cpuSeconds();
    }
    // What never became a process of the trace: connections refused, streams that
    // broke before their handshake.
    std::vector<std::string>& warnings = trace.processes.front().warnings;
    warnings.insert(warnings.end(), listener.refusals().begin(), listener.refusals().end());
    for (const auto& c : listener.connections()) {
        if (!c->aggregator().handshake() && !c->error().empty())
            warnings.push_back("a collector's stream broke before its handshake: " + c->error());
        if (!c->refusal().empty()) warnings.push_back(c->refusal());
    }
    // Those left running: only memtool's own children can be (it is their subreaper),
    // and /proc is read (a file per process of the machine) only when it has any.
    const std::map<pid_t, std::string> left =
        target.childrenLeft() ? childrenOf(getpid()) : std::map<pid_t, std::string>{};
    for (const auto& [pid, name] : left)
        if (!lastOfPid.count(pid))
            warnings.push_back(fmt::format(
                "pid {} ({}) was still running when memtool run stopped waiting and had not "
                "connected: it is not in the trace",
                pid, name));
    for (const auto& c : listener.connections()) {
        if (c.get() == launched || !c->isStream()) continue;
        const int64_t pid = c->aggregator().handshake()->pid;
        // memtool reaped it (an orphan), or its parent did and said so in its stream:
        // then memtool knows how it ended.
        ProcessOutcome o;
        if (lastOfPid[pid] == c.get()) {
            o = target.orphanOutcome(static_cast<pid_t>(pid));
            if (auto r = reaped.find(pid); !o.exitCode && !o.exitSignal && r != reaped.end())
                o.setExitStatus(r->second);
        }
        o.durationS = c->connectedS();
        o.recoveredRecords = c->recoveredRecords();
        o.streamError = lostReason(*c);
        if (o.streamError.empty())
            o.streamError =
                c->open() ? unwaitedReason(options.waitChildrenS, target.isOutside()) : c->error();
        trace.processes.push_back(bodies.take(*c, o, &rendered.emplace_back()));
        events.add(trace.processes.back(), *c);
    }
    // By pid after the first, each with its text.
    std::vector<size_t> order(trace.processes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin() + 1, order.end(), [&](size_t a, size_t b) {
        return trace.processes[a].pid < trace.processes[b].pid;
    });
    std::vector<core::ProcessTrace> sorted;
    std::vector<const reporters::RenderedBody*> sortedText;
    sorted.reserve(order.size());
    for (size_t i : order) {
        sorted.push_back(std::move(trace.processes[i]));
        sortedText.push_back(rendered[i]);
    }
    trace.processes = std::move(sorted);
    rendered = std::move(sortedText);
    // The processes' working directory: memtool run's, which its program started
    // in; a process running already has its own.
    char cwd[4096];
    const ssize_t n =
        target.isOutside()
            ? readlink(fmt::format("/proc/{}/cwd", target.pid()).c_str(), cwd, sizeof cwd - 1)
            : -1;
    if (n > 0) cwd[n] = '\0';
    if (n > 0 || getcwd(cwd, sizeof cwd))
        for (auto& p : trace.processes) p.cwd = cwd;
    // Its processes ran here (a collector connects over a Unix socket).
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0)
        for (auto& p : trace.processes) p.host = host;
    // Everything memtool run did up to here (reading the streams, symbolizing,
    // building the trace); writing trace.json comes after.
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    trace.cliMaxRssBytes = ownPeakRssBytes(self);
    trace.cliCpuS = cpuSecondsOf(self);
    return trace;
}

// -o as one process's file would be named (%p and %r stand for a pid or a rank):
// what is checked before the program starts.
std::string sampleOutputPath(const std::string& pattern) {
    if (!isPerProcessPattern(pattern)) return expandOutputPattern(pattern, {});  // %% is a %
    core::ProcessTrace sample;
    sample.pid = getpid();
    return expandOutputPattern(pattern, sample);
}

// -o /dev/null (or a link to it): the run is for its control or its live view,
// and its trace is not wanted. Known by the device, so that no rename of a
// temporary file ever lands on the null device.
bool discardsTrace(const std::string& output) {
    struct stat st {};
    return stat(output.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
           minor(st.st_rdev) == 3;
}

// Writes the trace where -o said (stdout for "-"); returns how to name where it
// went. Should that fail now (the disk filled, the directory went), the trace is
// kept in the temporary directory, and the error says where.
std::string writeTrace(const core::Trace& trace, const std::string& output,
                       std::span<const reporters::RenderedBody* const> rendered = {}) {
    // In pieces: the bodies rendered ahead are written from where they are.
    const reporters::TextPieces text = reporters::traceToPieces(trace, rendered);
    const std::vector<std::string_view> pieces = text.views();
    if (output == kStdoutPath) {
        for (std::string_view piece : pieces) std::cout << piece;
        std::cout << std::flush;
        if (!std::cout) throw core::Error(core::kExitRunFailed, "cannot write the trace to stdout");
        return "the trace to stdout";
    }
    try {
        core::replaceFile(output, pieces, core::kExitRunFailed);
        return output;
    } catch (const core::Error& e) {
        const char* tmp = std::getenv("TMPDIR");
        const std::string kept =
            fmt::format("{}/memtool-{}.trace.json", tmp && *tmp ? tmp : "/tmp", getpid());
        core::replaceFile(kept, pieces, core::kExitRunFailed);
        throw core::Error(core::kExitRunFailed,
                          std::string(e.what()) + "; the trace was written to " + kept);
    }
}

}  // namespace

// The tracked process's command line, from /proc (memtool ctl list shows it).
std::vector<std::string> commandOf(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> words;
    size_t start = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] != '\0') continue;
        words.push_back(bytes.substr(start, i - start));
        start = i + 1;
    }
    if (start < bytes.size()) words.push_back(bytes.substr(start));
    if (words.empty()) words.push_back(fmt::format("pid {}", pid));
    return words;
}

// memtool.track's companion: the process must be this user's and alive, and
// memtool run's own options that launch nothing are refused.
void checkTrackable(const RunOptions& options) {
    if (!options.command.empty())
        throw core::Error(core::kExitBadInput,
                          "run: --track PID profiles a process already running; give no command");
    if (options.output == kStdoutPath)
        throw core::Error(core::kExitBadInput,
                          "run: --track writes the trace to a file: -o - is not available");
    if (options.live) throw core::Error(core::kExitBadInput, "run: --track has no live view");
    if (options.serve && isPerProcessPattern(options.output))
        throw core::Error(core::kExitBadInput, "run: --serve names each block's file on stdin");
    if (kill(options.trackPid, 0) != 0)
        throw core::Error(core::kExitBadInput,
                          fmt::format("run: --track {}: no such process of yours ({})",
                                      options.trackPid, std::strerror(errno)));
}

// memtool.track's stdin. A plain track's block ends when it does; a serving
// companion's blocks each get "trace PATH" before and "end" after, and stdin's end
// ends the last.
class TrackInput {
public:
    TrackInput(EventLoop& loop, TargetProcess& target, bool serve)
        : loop_(loop), target_(target), serve_(serve) {
        loop.watch(STDIN_FILENO, [this] { readable(); });
    }
    bool ended() const { return eof_; }
    // The path the block that just ended named; empty when it named none.
    std::string takePath() {
        if (paths_.empty()) return {};
        std::string path = std::move(paths_.front());
        paths_.pop_front();
        return path;
    }

private:
    void readable() {
        char bytes[4096];
        const ssize_t n = read(STDIN_FILENO, bytes, sizeof bytes);
        if (n < 0 && errno == EINTR) return;
        if (n <= 0) {
            eof_ = true;
            loop_.unwatch(STDIN_FILENO);
            target_.markDone();
            return;
        }
        if (!serve_) return;
        pending_.append(bytes, static_cast<size_t>(n));
        for (size_t eol; (eol = pending_.find('\n')) != std::string::npos;) {
            const std::string line = pending_.substr(0, eol);
            pending_.erase(0, eol + 1);
            if (line.starts_with("trace ")) paths_.push_back(line.substr(6));
            if (line == "end") target_.markDone();
        }
    }

    EventLoop& loop_;
    TargetProcess& target_;
    bool serve_;
    bool eof_ = false;
    std::string pending_;
    std::deque<std::string> paths_;
};

// What the tracked process's collector needs, on stdout as one JSON line: the
// variables memtool run would give a program it launches, and the collector.
void announceTrack(const std::vector<EnvVariable>& env, const std::string& collector) {
    nlohmann::json vars = nlohmann::json::object();
    for (const EnvVariable& v : env) vars[v.name] = v.value;
    const nlohmann::json line{{"collector", collector}, {"environment", vars}};
    std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n'
              << std::flush;
    if (!std::cout) throw core::Error(core::kExitRunFailed, "run: --track: stdout is closed");
}

// The event log of `trace`, beside `path`. The run is not lost when it cannot be
// written: the trace says why, and names none.
void writeEvents(const RunEvents& events, core::Trace& trace, const std::string& path) {
    if (!events.any()) return;
    try {
        events.write(trace, path);
    } catch (const core::Error& e) {
        trace.processes.front().warnings.push_back(
            std::string("the event log could not be written: ") + e.what());
        for (core::ProcessTrace& p : trace.processes) p.events.reset();
    }
}

// The trace of what the listener holds, written to `output` (one file, or with %p or
// %r in its name one per process or rank; nothing when `discard`), and the summary.
// `amend`: what the caller adds to the trace before it is written.
void writeRun(CollectorListener& listener, const TargetProcess& target, const RunOptions& options,
              const std::string& output, const CudaPlan& cuda, PreparedBodies& bodies, bool discard,
              const std::function<void(core::Trace&)>& amend = nullptr) {
    std::vector<const reporters::RenderedBody*> rendered;
    RunEvents events;
    core::Trace trace = assembleTrace(listener, target, options, cuda, bodies, rendered, events);
    if (amend) amend(trace);
    // Every frame is named: the object files the symbolizers hold can go, and the
    // spare descriptor too, so that the sources and the trace can be opened.
    listener.closeObjectFiles();
    FileLimit::releaseSpare();
    std::vector<std::string> files;  // none: discarded
    if (!discard) {
        // The code its reports show, as it is now: an archived trace shows it as it was.
        reporters::recordSources(trace);
        // One file: the trace itself (a copy of it took ~2 ms for a fork pool's).
        if (!isPerProcessPattern(output)) {
            const std::string path = expandOutputPattern(output, {});
            writeEvents(events, trace, path);
            files.push_back(writeTrace(trace, path, rendered));
        } else {
            for (auto& [path, part] : splitByOutputPattern(trace, output)) {
                writeEvents(events, part, path);
                files.push_back(writeTrace(part, path));
            }
        }
    }
    if (!options.quiet) std::cerr << runSummary(trace, files);
}

// A serving companion's block that ended: its trace, where its "trace PATH" said,
// and "written" (or "failed WHY") on stdout for the tracker waiting on it.
void serveBlock(TrackInput& input, CollectorListener& listener, const TargetProcess& target,
                const RunOptions& options, const CudaPlan& cuda, PreparedBodies& bodies) {
    const std::string output = input.takePath();
    try {
        if (output.empty())
            throw core::Error(core::kExitBadInput, "run: --serve: the block named no trace file");
        checkOutputPattern(output, core::kExitBadInput);
        writeRun(listener, target, options, output, cuda, bodies, discardsTrace(output));
        std::cout << "written\n" << std::flush;
    } catch (const core::Error& e) {
        std::cout << "failed " << e.what() << '\n' << std::flush;
    }
}

// memtool attach's injection, from what memtool run would give a program it launches.
InjectionPlan injectionPlan(pid_t pid, const std::vector<EnvVariable>& env,
                            const std::string& collector) {
    InjectionPlan plan;
    plan.pid = pid;
    plan.collector = collector;
    plan.pythonPackage = locatePythonPackage(collector);
    for (const EnvVariable& v : env) {
        if (v.name == core::kEnvSocket) plan.socket = v.value;
        if (v.name == core::kEnvOptions) plan.options = v.value;
        if (v.name == core::kEnvBackupDir) plan.backupDir = v.value;
    }
    return plan;
}

RunResult runCommand(const RunOptions& given) {
    const bool tracking = given.trackPid != 0;
    if (given.attach) {
        if (given.output == kStdoutPath)
            throw core::Error(core::kExitBadInput,
                              "attach: the trace goes to a file: -o - is not available");
        checkAttachable(given.trackPid);
    } else if (tracking) {
        checkTrackable(given);
    }
    if (given.serve && !tracking)
        throw core::Error(core::kExitBadInput,
                          "run: --serve is memtool.track's (with --track PID)");
    RunOptions options = given;
    if (tracking) options.command = commandOf(given.trackPid);
    if (!tracking && options.command.empty())
        throw core::Error(core::kExitBadInput, "run: no command given (memtool run -- CMD ...)");
    // Everything that can refuse the run does so before the program starts: a run
    // is never thrown away at the end for a path that could not have worked.
    const bool discard = discardsTrace(options.output);
    if (options.output != kStdoutPath && !discard) {
        checkOutputPattern(options.output, core::kExitBadInput);
        core::checkReplaceable(sampleOutputPath(options.output), core::kExitRunFailed);
    }
    if (options.events.on() && (options.output == kStdoutPath || discard))
        throw core::Error(core::kExitBadInput,
                          "run: --events writes its log beside the trace file: give -o a file");
    if (options.events.all) {
        const std::string sample = sampleOutputPath(options.output);
        const size_t slash = sample.rfind('/');
        options.events.spillDir = slash == std::string::npos ? "." : sample.substr(0, slash + 1);
    }
    std::optional<policy::Policy> runPolicy;
    if (!options.policyFile.empty()) runPolicy = policy::readPolicyFile(options.policyFile);
    const std::string collector = locateCollector();
    const CudaPlan cuda = planCuda(options.cuda, collector, options.quiet);
    FileLimit::raise();  // descriptors for hundreds of processes; the program keeps its own limit
    CollectorListener listener;
    listener.keepEvents(options.events);
    ControlServer control(listener, options.command, options.siteMode);
    const std::string backups = backupDirectory(options.backupDir);
    SignalRouter signals;
    // Before the live view, which unwatches its keys when it goes.
    EventLoop loop;
    // The panel is made room for before the program prints anything.
    std::unique_ptr<LiveView> live =
        options.live
            ? LiveView::open(std::cerr, options.siteMode, reporters::commandLine(options.command))
            : nullptr;
    const std::vector<EnvVariable> environment = targetEnvironment(
        options, collector, cuda, listener.socketPath(), backups, control.socketPath());
    TargetProcess target =
        tracking ? TargetProcess::outside(options.trackPid, TargetProcess::Clock::now())
                 : launchTarget(options.command, environment, signals.forChild());
    std::unique_ptr<TrackInput> input;
    if (tracking && !options.attach) {
        announceTrack(environment, collector);
        input = std::make_unique<TrackInput>(loop, target, options.serve);
    }

    // Connections are accepted (and their peers' descent checked) before SIGCHLD
    // reaps anyone: a descendant that connected and exited stays a zombie, its
    // parent chain readable, until memtool or its parent reaps it.
    listener.attach(loop, target.pid());
    signals.attach(loop, target);
    control.expectProgram(target.pid());
    if (options.attach) control.markAttached();
    control.attach(loop);
    policy::PolicyRunner policies(listener, control, policy::systemUsage(target.pid(), backups));
    control.setPolicyHandler([&policies](pid_t pid, const nlohmann::json& request,
                                         const std::vector<std::string>& tags) {
        return policies.command(pid, request, tags);
    });
    policies.attach(loop);
    if (runPolicy) policies.setRunPolicy(*runPolicy);
    if (options.pollMs) policies.setPollInterval(options.pollMs);
    if (live) live->setPolledLines([&policies] { return policies.liveLines(); });
    if (live) live->attach(loop);
    // While the program starts, not before: a collector that connects meanwhile
    // waits in the listen queue.
    listener.removeDeadRuns();
    // The collector it injects connects at once: the listener accepts from here on.
    std::unique_ptr<AttachSession> attach =
        options.attach
            ? std::make_unique<AttachSession>(loop, listener, control, target,
                                              injectionPlan(target.pid(), environment, collector),
                                              options.durationS, options.quiet)
            : nullptr;
    for (;;) {
        PreparedBodies bodies(options.siteMode);
        collectStreams(loop, listener, target, live.get(), options.waitChildrenS, options.quiet,
                       bodies);
        target.waitForExit();  // a no-op: the loop only ends after the target
        if (live) live->finish(listener);
        if (attach && attach->failure()) throw *attach->failure();
        if (!options.serve) {
            // An attached process's trace says what was there before memtool came.
            writeRun(listener, target, options, options.output, cuda, bodies, discard,
                     [&](core::Trace& t) {
                         policies.describe(t);
                         for (core::ProcessTrace& p : t.processes)
                             if (attach && p.attached && p.pid == target.pid())
                                 attach->describeBefore(p);
                     });
            break;
        }
        serveBlock(*input, listener, target, options, cuda, bodies);
        if (input->ended()) break;
        control.forgetEndedStreams();
        listener.forgetEnded();
        target.resumeOutside();
    }

    const ProcessOutcome outcome = target.outcome();
    return RunResult{outcome.exitCode.value_or(0), outcome.exitSignal.value_or(0)};
}

std::string runSummary(const core::Trace& trace, const std::vector<std::string>& files) {
    const core::ProcessTrace& p = trace.processes[0];
    // The program's peaks; a wrapper's (a shell that ran python as a child) are its
    // first child's that allocated, named by pid.
    const core::ProcessTrace* shown = &p;
    if (p.devices.empty())
        for (const core::ProcessTrace& q : trace.processes)
            if (!q.devices.empty()) {
                shown = &q;
                break;
            }
    bool tracked = false;
    for (const core::ProcessTrace& q : trace.processes) tracked |= q.tracked;
    std::string peaks;
    if (shown != &p) peaks = fmt::format(", pid {}", shown->pid);
    if (shown->devices.empty() && tracked) peaks = ", nothing allocated";
    for (const auto& [name, d] : shown->devices)
        peaks += fmt::format(", {} peak {}", name, core::formatBytes(d.peakBytes));
    // Where another process (a worker) held more on a device, say which, so
    // that a small main process does not stand for the run.
    std::map<std::string, const core::ProcessTrace*> largest;
    for (const core::ProcessTrace& q : trace.processes)
        for (const auto& [name, d] : q.devices) {
            const core::ProcessTrace*& top = largest[name];
            if (!top || d.peakBytes > top->devices.at(name).peakBytes) top = &q;
        }
    std::string others;
    for (const auto& [name, q] : largest) {
        const uint64_t peak = q->devices.at(name).peakBytes;
        const auto own = shown->devices.find(name);
        if (q == shown || (own != shown->devices.end() && own->second.peakBytes >= peak)) continue;
        others += fmt::format("{}{} {} in pid {}", others.empty() ? "; largest: " : ", ", name,
                              core::formatBytes(peak), q->pid);
    }
    peaks += others;
    const std::string written = files.empty() ? "no trace (-o /dev/null)"
                                : files.size() == 1
                                    ? files[0]
                                    : fmt::format("{} files ({} ...)", files.size(), files[0]);
    std::string incomplete = p.complete ? "" : ", INCOMPLETE: " + p.incompleteReason;
    for (const core::ProcessTrace& q : trace.processes)
        if (&q != &p && !q.complete)
            incomplete += fmt::format("; pid {} INCOMPLETE: {}", q.pid, q.incompleteReason);
    std::string summary =
        fmt::format("memtool: wrote {} ({} process{}{}{})\n", written, trace.processes.size(),
                    trace.processes.size() == 1 ? "" : "es", peaks, incomplete);
    // Untracked, the program is the trace's one process.
    if (const std::string why = core::collectorUnloadable(p); !why.empty())
        summary += "memtool: nothing was measured: " + why + "\n";
    else if (!tracked)
        summary +=
            "memtool: nothing was measured: the program loaded no allocator memtool "
            "tracks (PyTorch's libc10, CUDA); does it import torch, under a python that "
            "has it?\n";
    return summary;
}

}  // namespace memtool::cli
