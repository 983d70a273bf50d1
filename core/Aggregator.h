#pragma once
// Folds one collector stream into per-device totals and per-stack statistics as
// records arrive. Memory is proportional to live blocks and distinct stacks, never
// to the number of events.
//
// Peak consumers (what each stack held at the moment of its device's peak) cost
// O(1) per event: each stack keeps a snapshot of its live bytes stamped with the
// device's peak version, refreshed lazily before the stack's next change.

#include <tsl/robin_map.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/StreamDecoder.h"
#include "core/Timeline.h"

namespace memtool::core {

// Bytes of a paused region's blocks are live but not resident: they leave
// currentBytes (which peaks follow: physical memory held) for pausedBytes while
// paused, and come back on resume. Leaked = current + paused at the end.
struct DeviceState {
    uint64_t currentBytes = 0;  // resident live bytes
    uint64_t pausedBytes = 0;   // live bytes of paused blocks
    uint64_t peakBytes = 0;
    uint64_t allocatedBytes = 0;
    uint64_t freedBytes = 0;
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    uint64_t peakTimeNs = 0;
    uint64_t peakVersion = 0;  // bumped each time peakBytes rises
    // At the program's end (Aggregator::programEnd): live bytes, resident or
    // paused, then; and what was freed after it (teardown).
    uint64_t liveAtProgramEnd = 0;
    // Of liveAtProgramEnd, the blocks the program's globals still reached
    // (ProgramEnd::reachableKnown); the rest is what nothing reachable held.
    uint64_t heldAtProgramEnd = 0;
    // Of heldAtProgramEnd, the bytes each global held ("" for addresses sent
    // without a name).
    std::map<std::string, uint64_t> heldBy;
    uint64_t teardownFreedBytes = 0;
    uint64_t teardownFreeCount = 0;
    // currentBytes over time: one sample after every event that changed it.
    Timeline timeline;
};

// One private pool of PyTorch's caching allocator (a CUDA graph's, a MemPool's),
// from the keys of cuda:N.graphs and cuda:N.graphs_active (core::graphPoolOfKey).
struct GraphPoolState {
    int ordinal = -1;            // its CUDA device
    uint64_t reservedBytes = 0;  // its segments' bytes now
    uint64_t reservedPeak = 0;
    uint64_t activeBytes = 0;  // its blocks' bytes now
    uint64_t activePeak = 0;
    // Bytes of blocks allocated into it, per stack (an index into stacks()): where
    // the graphs that captured into it ran.
    std::map<uint32_t, uint64_t> allocatedByStack;
    Timeline reservedTimeline, activeTimeline;  // the two over time
};

struct StackState {
    uint8_t device = kDeviceCpu;
    uint64_t nativeNode = 0;
    uint64_t pyNode = 0;
    uint64_t allocatedBytes = 0;
    uint64_t count = 0;
    uint64_t liveBytes = 0;    // resident
    uint64_t pausedBytes = 0;  // live but paused
    // Device bytes live right after the largest-footprint allocation from this stack:
    // the peak seen while any frame of this stack was executing.
    uint64_t maxDeviceBytesAtAlloc = 0;
    // Live bytes at the device's latest peak; valid when stamp == device peakVersion,
    // else liveBytes is (the stack has not changed since that peak).
    uint64_t liveAtPeak = 0;
    uint64_t stamp = 0;
    uint64_t liveAtProgramEnd = 0;  // resident or paused, at the program's end
    uint64_t heldAtProgramEnd = 0;  // of which reachable (DeviceState::heldAtProgramEnd)
};

class Aggregator : public RecordSink {
public:
    Aggregator() = default;
    // It keeps a pointer into its own device map (deviceState()): a copy's would
    // point into the original's, a move keeps the map's nodes where they are. As
    // with its other caches, one moved from is only to be destroyed or assigned.
    Aggregator(const Aggregator&) = delete;
    Aggregator& operator=(const Aggregator&) = delete;
    Aggregator(Aggregator&&) = default;
    Aggregator& operator=(Aggregator&&) = default;

    void onHandshake(const Handshake& h) override;
    void onModule(const ModuleRecord& m) override;
    void onPyCode(const PyCodeRecord& r) override;
    void onNativeNode(const NativeNodeRecord& n) override;
    void onPyNode(const PyNodeRecord& n) override;
    void onAlloc(const AllocRecord& a) override;
    void onFree(const FreeRecord& f) override;
    void onShortLived(const AllocRecord& a, const FreeRecord& f) override;
    void onNote(const NoteRecord& n) override;
    void onRegion(const RegionRecord& r) override;
    void onControl(const ControlRecord& c) override;
    void onReply(const ReplyRecord& r) override;
    void onOom(const OomRecord& o) override;
    void onWindow(const WindowRecord& w) override;
    void onEnd(const EndFields& e) override;
    // A stream without End: the counts its process left beside its send buffer
    // (core::TailHeader) as an End record would carry them, which verify it in
    // End's place when they match what arrived.
    void onRecoveredCounts(const EndFields& counts) { recoveredCounts_ = counts; }
    IdCounts heldIds() const override { return held_; }

    // A stream that continues another (a fork child's) starts with that stream's
    // modules, nodes and code objects: `lookup` finds its aggregator, with every
    // record the continued stream sent before the fork, or null.
    using StreamLookup = std::function<const Aggregator*(const Handshake&)>;
    void setStreamLookup(StreamLookup lookup) { lookup_ = std::move(lookup); }
    // Why a continuation could not take over everything it claimed; empty when it did.
    const std::string& continuationProblem() const { return continuationProblem_; }
    // Live bytes of a stack at its device's peak.
    uint64_t liveAtPeak(const StackState& s) const;
    // The index into stacks() of (device, native node, Python node); UINT32_MAX
    // when no allocation came from it.
    uint32_t findStack(uint8_t device, uint64_t nativeNode, uint64_t pyNode) const {
        const auto& t = tables_[device];
        if (!t) return UINT32_MAX;
        const auto it = t->stackIds.find((nativeNode << 32) ^ pyNode);
        return it == t->stackIds.end() ? UINT32_MAX : it->second;
    }

    const std::optional<Handshake>& handshake() const { return handshake_; }
    const std::optional<EndFields>& end() const { return end_; }
    const std::map<uint8_t, DeviceState>& devices() const { return devices_; }
    // By the pool's number (the cuda.graph_pool notes name them).
    const std::map<uint32_t, GraphPoolState>& graphPools() const { return graphPools_; }
    const std::vector<StackState>& stacks() const { return stacks_; }
    const std::vector<SharedModule>& modules() const { return modules_; }
    // Index i holds node id i (entry 0 is the unused root).
    const std::vector<NativeNodeRecord>& nativeNodes() const { return nativeNodes_; }
    const std::vector<PyNodeRecord>& pyNodes() const { return pyNodes_; }
    const std::vector<PyCodeRecord>& pyCodes() const { return pyCodes_; }
    // Notes in arrival order (a key may repeat: each warning is one note).
    const std::vector<NoteRecord>& notes() const { return notes_; }
    // The moment the program's own code finished (the first kNoteProgramEnd note):
    // what was live then is what it leaked. Unset without one (os._exit, a kill).
    struct ProgramEnd {
        std::string how;      // kProgramEndPython, kProgramEndExit
        uint64_t timeNs = 0;  // the last event's time before it
        // A whole kNoteReachable list came before it: heldAtProgramEnd is known.
        bool reachableKnown = false;
    };
    const std::optional<ProgramEnd>& programEnd() const { return programEnd_; }
    // Pausable regions, by id, and every control event in arrival order.
    struct Region {
        RegionRecord record;
        uint64_t liveBytes = 0;    // blocks live now, resident or paused
        uint64_t pausedBytes = 0;  // of which paused
        uint64_t liveBlocks = 0;
    };
    const std::map<uint64_t, Region>& regions() const { return regions_; }
    const std::vector<ControlRecord>& controls() const { return controls_; }
    // Replies to requests, in arrival order (the CLI forwards them to `memtool ctl`).
    const std::vector<ReplyRecord>& replies() const { return replies_; }
    uint64_t lastTimeNs() const { return lastTimeNs_; }

    // An out-of-memory moment: the failed request, and what was live then. The
    // consumers are every stack that held bytes on `heldDevice` (largest first);
    // they add up to liveBytes exactly. For CUDA, heldDevice is cuda:N.active when
    // the torch bridge reports PyTorch's blocks (tensors), else cuda:N.
    struct OomEvent {
        OomRecord record;
        uint32_t stack = 0;  // the request's stack (stacks()[stack]; it may own no bytes)
        uint8_t heldDevice = kDeviceCpu;
        uint64_t liveBytes = 0;
        std::vector<std::pair<uint32_t, uint64_t>> consumers;  // stack index, live bytes
    };
    static constexpr size_t kMaxOomEvents = 16;  // kept in full; the rest are counted
    const std::vector<OomEvent>& ooms() const { return ooms_; }
    uint64_t oomCount() const { return oomCount_; }

    // The live blocks of a device now, by address (or key): size and stack.
    struct LiveBlock {
        uint64_t size;
        uint32_t stack;
        uint32_t region;  // 0: none
        bool paused;
    };
    // Addresses and packed node ids have their information in the high and middle
    // bits; the tables index by the low ones. Fibonacci hashing: the product's top
    // bits are well mixed, and the byte swap brings them down (one instruction).
    struct MixHash {
        size_t operator()(uint64_t x) const {
            return static_cast<size_t>(__builtin_bswap64(x * 0x9e3779b97f4a7c15ULL));
        }
    };
    using LiveBlockMap = tsl::robin_map<uint64_t, LiveBlock, MixHash>;
    const LiveBlockMap& liveBlocks(uint8_t device) const;

    // Records received before End (the handshake included).
    uint64_t recordsReceived() const { return records_; }
    uint64_t allocsReceived() const { return allocs_; }
    uint64_t freesReceived() const { return frees_; }
    // Events that did not pair up: a free of an address not live, an alloc over a live one.
    uint64_t unmatchedFrees() const { return unmatchedFrees_; }
    uint64_t doubleAllocs() const { return doubleAllocs_; }

    // True when End arrived, or a killed process left its counts behind
    // (onRecoveredCounts), and they equal what was received.
    bool streamVerified() const;

private:
    // A loop allocates from one stack, or a few in turn, over and over: recent
    // answers first, inline, each in the slot its key hashes to.
    uint32_t stackIndex(uint8_t device, uint64_t nativeNode, uint64_t pyNode) {
        // Node ids are dense and below 2^32 in any real stream; pack both into one key.
        const uint64_t key = (nativeNode << 32) ^ pyNode;
        const RecentStack& r = recentStacks_[recentSlot(key)];
        if (r.index != UINT32_MAX && r.key == key && r.device == device) return r.index;
        return lookUpStack(device, key, nativeNode, pyNode);
    }
    static constexpr unsigned kRecentStackBits = 3;
    static size_t recentSlot(uint64_t key) {
        return MixHash{}(key) & ((size_t{1} << kRecentStackBits) - 1);
    }
    uint32_t lookUpStack(uint8_t device, uint64_t key, uint64_t nativeNode, uint64_t pyNode);
    // devices_[code], the last one asked for without a map lookup: every record
    // needs its device, and a stream's records are nearly always on one.
    DeviceState& deviceState(uint8_t code) {
        if (lastDevice_.state == nullptr || lastDevice_.code != code)
            lastDevice_ = {code, &devices_[code]};
        return *lastDevice_.state;
    }
    void touch(StackState& s, const DeviceState& d);
    // An allocation counted on its device and stack (no live block of its address).
    struct Admitted {
        DeviceState& device;
        StackState& stack;
        uint32_t index;  // of the stack
    };
    Admitted admit(const AllocRecord& a);
    // An allocation arrived over a live block of `address`: that block is retired.
    void retireOverwritten(uint8_t device, uint64_t address, uint64_t timeNs);
    // A block of `size` leaves its device and stack.
    void retire(DeviceState& d, StackState& s, uint64_t size, bool paused);
    // `frees` blocks of `bytes` in all freed on `d` (and in its teardown, after the
    // program's end).
    void countFreed(DeviceState& d, uint64_t frees, uint64_t bytes) const;
    // The device it left; null when the address was not live (nothing changed).
    DeviceState* release(uint8_t device, uint64_t address, uint64_t timeNs, bool counted);
    // A region's blocks leave (pause) or rejoin (resume) the resident bytes; each
    // device whose bytes changed gets a timeline sample.
    void setPaused(uint64_t region, bool paused, uint64_t timeNs);
    void addResident(DeviceState& d, StackState& s, uint64_t size, uint64_t timeNs);
    // Takes what is live now as what the program leaked.
    void markProgramEnd(const std::string& how);
    // A kNoteReachable piece: its hex addresses (and the names after them) join
    // reachable_ (a malformed word spoils the list). A kNoteReachableEnd: the list
    // is whole if the counts agree.
    void addReachable(const std::string& text);
    void endReachable(const std::string& text);
    // Splits what is live now by reachable_ into each device's and stack's held bytes.
    void countHeld();

    void takeOver(const Aggregator& from, const StreamContinuation& c);
    void countRecord();

    StreamLookup lookup_;
    IdCounts held_;                // of a continued stream's ids, those taken over
    bool execEndPending_ = false;  // the last record was an end before an exec
    bool idsExact_ = true;  // every id the stream used is held (false: a continuation fell short)
    std::string continuationProblem_;
    std::optional<Handshake> handshake_;
    // Storage addresses (kNoteReachable) and the global each was reached from, as sent.
    std::vector<std::pair<uint64_t, std::string>> reachable_;
    bool reachableSpoiled_ = false;  // a malformed piece came
    bool reachableWhole_ = false;    // kNoteReachableEnd agreed with the list
    std::optional<EndFields> end_;
    std::optional<EndFields> recoveredCounts_;
    std::map<uint8_t, DeviceState> devices_;  // never erased from: deviceState() points in
    std::map<uint32_t, GraphPoolState> graphPools_;
    // A block or segment of a private pool came (bytes > 0, from stack `stack`) or
    // went (< 0).
    void countGraphPool(uint8_t device, uint64_t key, int64_t bytes, uint64_t timeNs,
                        uint32_t stack = UINT32_MAX);
    struct {
        uint8_t code = 0;
        DeviceState* state = nullptr;
    } lastDevice_;
    std::vector<StackState> stacks_;
    // Per device code, made on its first record: a stream uses one or two of
    // the 256, and a run keeps every process's aggregator to its end.
    struct DeviceTables {
        tsl::robin_map<uint64_t, uint32_t, MixHash> stackIds;  // (native, py) -> index
        LiveBlockMap live;                                     // address -> block
    };
    std::unique_ptr<DeviceTables> tables_[256];
    DeviceTables& tables(uint8_t device) {
        if (!tables_[device]) tables_[device] = std::make_unique<DeviceTables>();
        return *tables_[device];
    }
    struct RecentStack {
        uint64_t key = 0;
        uint8_t device = 0;
        uint32_t index = UINT32_MAX;  // none yet
    };
    RecentStack recentStacks_[size_t{1} << kRecentStackBits];  // stackIndex's recent answers
    std::unordered_map<uint64_t, std::unordered_map<uint64_t, uint8_t>>
        regionBlocks_;  // region -> address -> device
    std::vector<SharedModule> modules_;
    std::vector<NativeNodeRecord> nativeNodes_{1};
    std::vector<PyNodeRecord> pyNodes_{1};
    std::vector<PyCodeRecord> pyCodes_{1};
    std::vector<NoteRecord> notes_;
    std::optional<ProgramEnd> programEnd_;
    std::map<uint64_t, Region> regions_;
    std::vector<ControlRecord> controls_;
    std::vector<ReplyRecord> replies_;
    std::vector<OomEvent> ooms_;
    uint64_t oomCount_ = 0;
    uint64_t lastTimeNs_ = 0;
    uint64_t records_ = 0;
    uint64_t allocs_ = 0;
    uint64_t frees_ = 0;
    uint64_t unmatchedFrees_ = 0;
    uint64_t doubleAllocs_ = 0;
};

}  // namespace memtool::core
