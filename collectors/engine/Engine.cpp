#include "collectors/engine/Engine.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "collectors/engine/MonotonicClock.h"
#include "collectors/engine/Warn.h"
#include "core/DecimalPair.h"

namespace memtool::collectors {

namespace {

// The live table packs the device into the top byte of the size.
constexpr uint64_t kSizeMask = (1ull << 56) - 1;

}  // namespace

bool Engine::configure(const EngineOptions& options, const char** why) {
    options_ = options;
    if (options_.nativeStacks && !capture_.load(why)) {
        options_.nativeStacks = false;
        return false;
    }
    return true;
}

bool Engine::connect(Sink& sink, const StreamIdentity& id) {
    RecursionGuard guard;
    LockGuard lock(mu_);
    if (active_.load()) return true;
    // What the stream continues: the ids the stream before it ended with, which
    // the CLI holds (a fork child's parent's stream, flushed before the fork).
    core::StreamContinuation from;
    const bool continues = continuable_;
    if (continues) {
        from.pid = streamPid_.load();
        from.startUnixNs = streamStartNs_;
        from.nativeNodes = interner_.nativeCount();
        from.pyCodes = pyCodes_;
        from.pyNodes = interner_.pythonCount();
        from.modules = moduleIds_;
    } else {
        interner_.reset();
        streamGeneration_.store(interner_.generation());
        pyCodes_ = 0;
        moduleIds_ = 0;
    }
    sink_ = &sink;
    streamPid_.store(id.pid);
    streamStartNs_ = id.startUnixNs;
    lastClockNs_ = monotonicNs();
    writer_.open(&sink, lastClockNs_,
                 options_.pausableAll ? RecordWriter::Folding::Never
                                      : static_cast<RecordWriter::Folding>(options_.fold));
    clearLiveLocked();
    counters_ = core::EndFields{};
    unseenFrees_ = 0;
    missedEvents_.store(0);
    mu_.resetCounts();  // the stream's own: counted in its End's note

    // argv as /proc/self/cmdline has it: NUL-terminated arguments (the last one
    // may lack its NUL when the buffer cut it short).
    size_t argc = 0;
    for (size_t i = 0; i < id.commandBytes; ++i) argc += id.command[i] == '\0';
    if (id.commandBytes > 0 && id.command[id.commandBytes - 1] != '\0') ++argc;
    size_t envBytes = 0;
    for (size_t i = 0; i < 2 * id.environmentCount; ++i) envBytes += std::strlen(id.environment[i]);
    const uint64_t flags = (options_.nativeStacks ? core::kHandshakeNativeStacks : 0) |
                           (options_.pythonStacks ? core::kHandshakePythonStacks : 0) |
                           (continues ? core::kHandshakeContinues : 0) |
                           (id.forked ? core::kHandshakeForked : 0);
    uint8_t* p =
        writer_.reserve(core::handshakeBytes(argc, id.commandBytes, id.environmentCount, envBytes));
    if (!p) {
        if (debugLogOn()) DebugLine().add("stream not opened: no room for the handshake");
        return false;
    }
    p = core::encodeHandshakeHead(p, id.pid, id.ppid, id.startUnixNs, flags, argc);
    size_t start = 0;
    for (size_t i = 0; i < id.commandBytes; ++i) {
        if (id.command[i] != '\0') continue;
        p = core::putString(p, id.command + start, i - start);
        start = i + 1;
    }
    if (start < id.commandBytes)
        p = core::putString(p, id.command + start, id.commandBytes - start);
    p = core::encodeHandshakeEnvCount(p, id.environmentCount);
    for (size_t i = 0; i < 2 * id.environmentCount; ++i)
        p = core::putString(p, id.environment[i], std::strlen(id.environment[i]));
    if (continues) p = core::encodeHandshakeContinuation(p, from);
    writer_.commit(p);
    continuable_ = true;
    continuesIds_.store(continues);
    active_.store(true, std::memory_order_release);
    writer_.flush();
    const bool healthy = healthyLocked();
    if (debugLogOn()) {
        DebugLine line;
        line.add(healthy ? "stream open" : "stream open, then failed");
        if (continues) line.add(", continuing the ids of pid ").add(uint64_t{from.pid});
        line.add(id.forked ? ", a fork child" : "")
            .add(", native stacks ")
            .add(options_.nativeStacks ? "on" : "off")
            .add(", python stacks ")
            .add(options_.pythonStacks ? "on" : "off");
    }
    return healthy;
}

bool Engine::reopen() {
    if (!reopenWanted_.load(std::memory_order_relaxed) || !reopener_ || RecursionGuard::active)
        return false;
    RecursionGuard guard;
    reopener_();
    return active();
}

void Engine::free(uint64_t key) {
    if (OwnDeviceCalls::active) return;
    if (!active()) return suspendedMiss();
    if (RecursionGuard::active) return missed();
    RecursionGuard guard;
    freeGuarded(guard, key);
}

void Engine::internLocked(Stacks& s, uint64_t* nativeNode, uint64_t* pyNode) {
    // A new stream began while this thread read its stacks (a fork child
    // reconnecting): its Python frames' code ids are the old stream's.
    if (s.hasPython && s.python->generation != interner_.generation()) s.hasPython = false;
    *nativeNode = s.thread && s.ips ? interner_.native(*s.thread, s.ips + s.firstIp, s.depth,
                                                       s.walkSerial, writer_)
                                    : 0;
    *pyNode = s.hasPython ? interner_.python(*s.python, s.firstStale, writer_) : 0;
}

void Engine::allocCaptured(const RecursionGuard&, Stacks& stacks, uint8_t device, uint64_t key,
                           uint64_t size, FlushPolicy flush, uint32_t region) {
    LockGuard lock(mu_);
    if (!active_.load(std::memory_order_relaxed)) return;
    core::AllocFields a;
    a.device = device;
    a.address = key;
    a.size = size;
    internLocked(stacks, &a.nativeNode, &a.pyNode);  // node records first
    const uint64_t tag = writer_.prepareEvent();
    LiveEntry replaced{};
    const int put = live_.put(
        key, {(static_cast<uint64_t>(device) << 56) | (size & kSizeMask), tag}, &replaced);
    if (put == decltype(live_)::kFailed) {
        deactivateLocked("out of memory for the table of live blocks; profiling stopped");
        return;
    }
    if (put == decltype(live_)::kReplaced) {
        // Its free never came (the reader retires it when this Alloc arrives, and
        // says so): its bytes leave as they do there, and no window hides this.
        liveBytes_[replaced.deviceSize >> 56] -= replaced.deviceSize & kSizeMask;
        writer_.foldNothingBuffered();
    }
    liveBytes_[device] += size;
    const bool newHigh = liveBytes_[device] > highBytes_[device];
    if (newHigh) highBytes_[device] = liveBytes_[device];
    a.timeDeltaNs = clockDeltaLocked(/*coarse=*/!newHigh);
    a.region = region;
    if (region == 0 && !(key & core::kKeyGraphPool)) {
        // Its free, if next, makes a ShortLived record of it.
        writer_.deferAlloc(a, liveBytes_[device]);
    } else if (uint8_t* p = writer_.reserve(core::kMaxFixedRecordBytes)) {
        if (region != 0)
            writer_.stopFolding();  // a region's bytes leave the reader's count when paused
        writer_.commitAlloc(core::encodeAlloc(p, a), a, liveBytes_[device]);
        // A private pool's block goes as its record: the reader counts each pool
        // apart by the key's number, which a window does not carry. They are
        // few (a graph's capture, a MemPool's use).
        if (region == 0) writer_.foldNothingBuffered();
    }
    ++counters_.allocCount;
    counters_.allocatedBytes += size;
    publishCountsLocked();
    writer_.flushIfDue(lastClockNs_, flush);
    healthyLocked();
}

void Engine::oom(uint8_t device, uint64_t size, core::OomSource source, uint64_t deviceFree,
                 uint64_t deviceTotal) {
    if (OwnDeviceCalls::active || (!active() && !reopen())) return;
    if (RecursionGuard::active) return missed();
    RecursionGuard guard;
    Stacks stacks;
    captureStacks(stacks);
    LockGuard lock(mu_);
    if (!active_.load(std::memory_order_relaxed)) return;
    core::OomFields o;
    o.device = device;
    o.size = size;
    internLocked(stacks, &o.nativeNode, &o.pyNode);
    o.timeDeltaNs = clockDeltaLocked();
    o.source = source;
    o.deviceFree = deviceFree;
    o.deviceTotal = deviceTotal;
    sendNowLocked(
        core::kMaxFixedRecordBytes, [&](uint8_t* p) { return core::encodeOom(p, o); },
        o.timeDeltaNs);
    healthyLocked();
}

void Engine::freeGuarded(const RecursionGuard&, uint64_t key) {
    LockGuard lock(mu_);
    if (!active_.load(std::memory_order_relaxed)) return;
    LiveEntry entry;
    if (!live_.erase(key, &entry)) {  // not ours: nothing to say, only counted
        ++unseenFrees_;
        return;
    }
    core::FreeFields f;
    f.device = static_cast<uint8_t>(entry.deviceSize >> 56);
    liveBytes_[f.device] -= entry.deviceSize & kSizeMask;
    f.address = key;
    f.timeDeltaNs = clockDeltaLocked(/*coarse=*/true);
    const uint64_t liveAfter = liveBytes_[f.device];
    core::AllocFields a;
    uint64_t liveAfterAlloc = 0;
    if (writer_.takeDeferred(f.device, key, &a, &liveAfterAlloc)) {
        // Its Alloc is the last record and still held back: both go as one.
        if (uint8_t* p = writer_.reserve(core::kMaxFixedRecordBytes))
            writer_.commitShortLived(core::encodeShortLived(p, a, f.timeDeltaNs), a, f.timeDeltaNs,
                                     liveAfterAlloc, liveAfter);
    } else if (uint8_t* p = writer_.reserve(core::kMaxFixedRecordBytes)) {
        writer_.commitFree(core::encodeFree(p, f), f, liveAfter, entry.tag);
        if (key & core::kKeyGraphPool) writer_.foldNothingBuffered();  // as at its Alloc
    }
    ++counters_.freeCount;
    counters_.freedBytes += entry.deviceSize & kSizeMask;
    publishCountsLocked();
    writer_.flushIfDue(lastClockNs_, FlushPolicy::WhenFull);
    healthyLocked();
}

template <typename Encode>
void Engine::sendNowLocked(size_t bytes, Encode encode, uint64_t deltaNs) {
    if (!active_.load(std::memory_order_relaxed)) return;
    if (uint8_t* p = writer_.reserve(bytes)) writer_.commit(encode(p), deltaNs);
    writer_.flush();
    healthyLocked();
}

void Engine::note(const char* key, const char* text) {
    if (!active() || RecursionGuard::active) return;
    RecursionGuard guard;
    const size_t keyBytes = std::strlen(key), textBytes = std::strlen(text);
    LockGuard lock(mu_);
    // Notes are rare (a handful per process) and say things worth sending now.
    sendNowLocked(core::noteBytes(keyBytes, textBytes),
                  [&](uint8_t* p) { return core::encodeNote(p, key, keyBytes, text, textBytes); });
}

uint64_t Engine::liveBytesOn(uint8_t device) {
    LockGuard lock(mu_);
    return liveBytes_[device];
}

void Engine::region(uint32_t id, const char* tag, uint8_t device, core::BackupKind backup) {
    if (!active()) return;
    RecursionGuard guard;
    const size_t tagBytes = std::strlen(tag);
    LockGuard lock(mu_);
    if (!active_.load(std::memory_order_relaxed)) return;
    writer_.stopFolding();  // its blocks leave the reader's live bytes when paused
    writer_.keepResident();
    if (uint8_t* p = writer_.reserve(core::regionBytes(tagBytes)))
        writer_.commit(core::encodeRegion(p, id, tag, tagBytes, device, backup));
    healthyLocked();
}

void Engine::control(core::ControlFields fields, const char* message) {
    if (!active()) return;
    RecursionGuard guard;
    const size_t messageBytes = std::strlen(message);
    LockGuard lock(mu_);
    fields.timeDeltaNs = clockDeltaLocked();
    writer_.stopFolding();
    sendNowLocked(
        core::controlBytes(messageBytes),
        [&](uint8_t* p) { return core::encodeControl(p, fields, message, messageBytes); },
        fields.timeDeltaNs);
}

void Engine::reply(uint64_t requestId, core::ReplyStatus status, const char* body,
                   size_t bodyBytes) {
    if (!active()) return;
    RecursionGuard guard;
    LockGuard lock(mu_);
    sendNowLocked(core::replyBytes(bodyBytes), [&](uint8_t* p) {
        return core::encodeReply(p, requestId, status, body, bodyBytes);
    });
}

uint32_t Engine::pyCode(const char* file, size_t fileBytes, const char* name, size_t nameBytes,
                        uint64_t firstLine) {
    // A fork child's first new code object starts its stream: the id must be sent.
    if (!active()) reopen();
    RecursionGuard guard;
    LockGuard lock(mu_);
    const uint32_t id = ++pyCodes_;
    if (!active_.load(std::memory_order_relaxed)) {
        continuable_ = false;  // an id no stream received
        return id;
    }
    if (uint8_t* p = writer_.reserve(core::pyCodeBytes(fileBytes, nameBytes)))
        writer_.commitDefinition(
            core::encodePyCode(p, file, fileBytes, name, nameBytes, firstLine));
    healthyLocked();
    return id;
}

void Engine::announceModule(const ModuleInfo& m) {
    if (m.rangeCount == 0) return;
    RecursionGuard guard;
    LockGuard lock(mu_);
    if (!active_.load(std::memory_order_relaxed)) return;
    uint8_t* p = writer_.reserve(core::moduleBytes(m.pathBytes, m.rangeCount));
    if (!p) return (void)healthyLocked();
    p = core::encodeModuleHead(p, ++moduleIds_, m.path, m.pathBytes, m.loadBias, m.rangeCount);
    for (size_t r = 0; r < m.rangeCount; ++r)
        p = core::encodeModuleRange(p, m.ranges[r][0], m.ranges[r][1] - m.ranges[r][0]);
    writer_.commitDefinition(p);
    if (debugLogOn()) DebugLine().add("module ").add(moduleIds_).add(": ").add(m.path);
}

void Engine::finish(core::ExitKind kind, int exitStatus) {
    RecursionGuard guard;
    LockGuard lock(mu_);
    reopenWanted_.store(false);
    suspended_.store(false);
    if (!active_.load()) return;
    active_.store(false, std::memory_order_release);
    commitLockCountsLocked();
    if (kind == core::ExitKind::Detach) commitUnseenFreesLocked();
    writer_.flush();  // folded first: End counts the records as they travel
    counters_.recordCount = writer_.records();  // every record before End
    counters_.missedEvents = missedEvents_.load();
    counters_.exitKind = static_cast<uint64_t>(kind);
    // The status as wait() reports it (its low byte), plus one: 0 is "not known".
    counters_.exitStatus = exitStatus >= 0 ? static_cast<uint64_t>(exitStatus & 0xff) + 1 : 0;
    if (uint8_t* p = writer_.reserve(core::kMaxFixedRecordBytes))
        writer_.commit(core::encodeEnd(p, counters_));
    writer_.flush();
    writer_.detach();
    sink_->close();
    if (debugLogOn())
        DebugLine()
            .add("stream end: ")
            .add(counters_.recordCount)
            .add(" records, ")
            .add(counters_.missedEvents)
            .add(" events missed");
}

void Engine::flushIfStale() {
    if (!active()) return;
    RecursionGuard guard;
    LockGuard lock(mu_);
    if (!active_.load(std::memory_order_relaxed) || !writer_.stale(monotonicNs())) return;
    writer_.flush();
    healthyLocked();
}

void Engine::flush() {
    RecursionGuard guard;
    LockGuard lock(mu_);
    if (!active_.load()) return;
    writer_.flush();
    healthyLocked();
}

void Engine::prepareFork() {
    mu_.lock();
    if (!active_.load(std::memory_order_relaxed)) return;
    RecursionGuard guard;
    writer_.flush();
    healthyLocked();
}

void Engine::parentAfterFork() { mu_.unlock(); }

void Engine::childAfterFork() {
    // Only this thread runs in the child, holding the lock since prepareFork().
    active_.store(false, std::memory_order_release);
    writer_.leaveParentsBuffer();  // first: the buffer it inherited is its parent's, shared
    writer_.detach();
    if (sink_) sink_->abandon();
    sink_ = nullptr;
    clearLiveLocked();
    missedEvents_.store(0);
    mu_.unlock();
}

void Engine::suspendForExec() {
    RecursionGuard guard;
    LockGuard lock(mu_);
    if (!active_.load()) return;
    active_.store(false, std::memory_order_release);
    suspended_.store(true);
    commitLockCountsLocked();
    writer_.flush();  // folded first: End counts the records as they travel
    core::EndFields end = counters_;
    end.recordCount = writer_.records();
    end.missedEvents = missedEvents_.load();
    end.exitKind = static_cast<uint64_t>(core::ExitKind::Exec);
    if (uint8_t* p = writer_.reserve(core::kMaxFixedRecordBytes))
        writer_.commit(core::encodeEnd(p, end));
    writer_.flush();
    healthyLocked();
    if (debugLogOn()) DebugLine().add("exec: the stream says the image ends");
}

void Engine::resumeAfterFailedExec() {
    RecursionGuard guard;
    LockGuard lock(mu_);
    if (!suspended_.exchange(false) || !writer_.isOpen()) return;
    active_.store(true, std::memory_order_release);
}

void Engine::commitLockCountsLocked() {
    char text[core::kDecimalPairBytes];
    const char* counts = core::decimalPair(text, mu_.contended(), mu_.waits());
    const size_t keyBytes = std::strlen(core::kNoteCollectorLock);
    const size_t textBytes = std::strlen(counts);
    if (uint8_t* p = writer_.reserve(core::noteBytes(keyBytes, textBytes)))
        writer_.commit(core::encodeNote(p, core::kNoteCollectorLock, keyBytes, counts, textBytes));
}

void Engine::commitUnseenFreesLocked() {
    // The pair's first number alone: "COUNT".
    char text[core::kDecimalPairBytes];
    const char* count = core::decimalPair(text, unseenFrees_, 0);
    const size_t textBytes = std::strcspn(count, " ");
    const size_t keyBytes = std::strlen(core::kNoteEarlierFrees);
    if (uint8_t* p = writer_.reserve(core::noteBytes(keyBytes, textBytes)))
        writer_.commit(core::encodeNote(p, core::kNoteEarlierFrees, keyBytes, count, textBytes));
}

void Engine::forgetStream() {
    RecursionGuard guard;
    LockGuard lock(mu_);
    continuable_ = false;
}

void Engine::deactivateLocked(const char* why) {
    continuable_ = false;  // records may have been lost on the way
    const bool wasActive = active_.exchange(false);
    writer_.detach();
    if (sink_) sink_->close();
    if (wasActive) warn(why);
}

bool Engine::healthyLocked() {
    if (writer_.isOpen()) return true;
    deactivateLocked(sink_ ? sink_->failure() : "no stream");
    return false;
}

void Engine::clearLiveLocked() {
    live_.clear();
    std::fill(std::begin(liveBytes_), std::end(liveBytes_), 0);
    std::fill(std::begin(highBytes_), std::end(highBytes_), 0);
}

uint64_t Engine::clockDeltaLocked(bool coarse) {
    // CLOCK_MONOTONIC_COARSE is CLOCK_MONOTONIC as of the last tick: behind it,
    // never ahead, so the delta below is 0 for a free within a tick of the
    // record before it.
    const uint64_t now = monotonicNs(coarse ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC);
    const uint64_t delta = now > lastClockNs_ ? now - lastClockNs_ : 0;
    lastClockNs_ += delta;
    return delta;
}

}  // namespace memtool::collectors
