#pragma once
// memtool run --events: one stream's records passed to its Aggregator, and its
// allocations, frees and refused requests kept as they pass, in order (the last
// N in a ring, and the last N up to the first refused request; or all of them compressed as they
// come: trace/EventLogFile.h). The stack of each is the aggregator's (its index), so a free carries
// the size and stack of the block it freed, looked up before the aggregator lets it go.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/Aggregator.h"
#include "trace/EventLogFile.h"

namespace memtool::cli {

class Symbolizer;

// What --events asked for: off (limit 0, not all), the last `limit`, or all.
struct EventsOption {
    bool all = false;
    uint64_t limit = 0;
    // Where a log of every event is compressed to as it comes (a file no name
    // points to, on the trace's file system rather than in memory).
    std::string spillDir;
    bool on() const { return all || limit > 0; }
};

// The most a ring may keep (32 bytes an event in memory); --events all has no limit.
inline constexpr uint64_t kMaxEventRing = uint64_t{1} << 26;

class EventRecorder : public core::RecordSink {
public:
    EventRecorder(core::Aggregator& aggregator, const EventsOption& option);

    void onHandshake(const core::Handshake& h) override { agg_.onHandshake(h); }
    void onModule(const core::ModuleRecord& m) override { agg_.onModule(m); }
    void onPyCode(const core::PyCodeRecord& r) override { agg_.onPyCode(r); }
    void onNativeNode(const core::NativeNodeRecord& n) override { agg_.onNativeNode(n); }
    void onPyNode(const core::PyNodeRecord& n) override { agg_.onPyNode(n); }
    void onAlloc(const core::AllocRecord& a) override;
    void onFree(const core::FreeRecord& f) override;
    void onShortLived(const core::AllocRecord& a, const core::FreeRecord& f) override;
    void onNote(const core::NoteRecord& n) override { agg_.onNote(n); }
    void onRegion(const core::RegionRecord& r) override { agg_.onRegion(r); }
    void onControl(const core::ControlRecord& c) override { agg_.onControl(c); }
    void onReply(const core::ReplyRecord& r) override { agg_.onReply(r); }
    void onOom(const core::OomRecord& o) override;
    void onWindow(const core::WindowRecord& w) override;
    void onEnd(const core::EndFields& e) override { agg_.onEnd(e); }
    core::IdCounts heldIds() const override { return agg_.heldIds(); }

    uint64_t seen() const { return seen_; }
    // The log's entry for this stream, once it has ended (or as of now, for a
    // trace taken while it runs): its events, the blocks live at its end and the
    // stacks they name, symbolized by `symbolizer`. Once; the recorder is done then.
    const reporters::EventSection& section(Symbolizer& symbolizer);

private:
    void keep(const core::Event& e);
    std::vector<core::Event> ringInOrder() const;
    // The log's id of the aggregator's stack `index` (UINT32_MAX: none): 0 for none.
    uint32_t stackId(uint32_t index);
    uint32_t allocStack(uint8_t device, uint64_t nativeNode, uint64_t pyNode) {
        return stackId(agg_.findStack(device, nativeNode, pyNode));
    }

    core::Aggregator& agg_;
    EventsOption option_;
    std::vector<core::Event> ring_;  // --events N: the last N, oldest at next_ once full
    size_t next_ = 0;
    // A ring's last N up to the first refused request (it included), kept whole;
    // afterOom_: the events seen by then.
    std::vector<core::Event> beforeOom_;
    uint64_t afterOom_ = 0;
    std::unique_ptr<reporters::CompressedEvents> all_;  // --events all
    uint64_t seen_ = 0, folded_ = 0;
    uint64_t lastNs_ = 0;              // the last event's time
    std::vector<uint32_t> idOf_;       // aggregator stack index -> log id (0: none yet)
    std::vector<uint32_t> stackOfId_;  // log id -> aggregator stack index (entry 0 unused)
    std::unique_ptr<reporters::EventSection> section_;
};

}  // namespace memtool::cli
