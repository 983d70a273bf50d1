#include "cli/stream/EventRecorder.h"

#include <algorithm>

#include "core/FrameTable.h"
#include "trace/TraceBuilder.h"

namespace memtool::cli {

EventRecorder::EventRecorder(core::Aggregator& aggregator, const EventsOption& option)
    : agg_(aggregator), option_(option), stackOfId_(1) {
    if (option_.all)
        all_ = std::make_unique<reporters::CompressedEvents>(option_.spillDir);
    else
        ring_.reserve(option_.limit);
}

uint32_t EventRecorder::stackId(uint32_t index) {
    if (index == UINT32_MAX) return 0;
    if (index >= idOf_.size()) idOf_.resize(index + 1, 0);
    if (idOf_[index] == 0) {
        idOf_[index] = static_cast<uint32_t>(stackOfId_.size());
        stackOfId_.push_back(index);
    }
    return idOf_[index];
}

void EventRecorder::keep(const core::Event& e) {
    ++seen_;
    lastNs_ = e.timeNs;
    if (all_) return all_->add(e);
    if (ring_.size() < option_.limit) {
        ring_.push_back(e);
    } else {
        ring_[next_] = e;
        next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
    }
    if (e.kind != core::EventKind::Oom || !beforeOom_.empty()) return;
    // The first refused request: the ring up to it is kept whole, and the ring
    // starts again for what follows (the program's handling of it, its end).
    beforeOom_ = ringInOrder();
    ring_.clear();
    next_ = 0;
    afterOom_ = seen_;
}

std::vector<core::Event> EventRecorder::ringInOrder() const {
    std::vector<core::Event> events;
    events.reserve(ring_.size());
    for (size_t i = 0; i < ring_.size(); ++i) events.push_back(ring_[(next_ + i) % ring_.size()]);
    return events;
}

void EventRecorder::onAlloc(const core::AllocRecord& a) {
    agg_.onAlloc(a);
    keep({a.timeNs, a.f.address, a.f.size, allocStack(a.f.device, a.f.nativeNode, a.f.pyNode),
          core::EventKind::Alloc, a.f.device});
}

void EventRecorder::onFree(const core::FreeRecord& f) {
    core::Event e{f.timeNs, f.f.address, 0, 0, core::EventKind::Free, f.f.device};
    const auto& live = agg_.liveBlocks(f.f.device);
    if (const auto it = live.find(f.f.address); it != live.end()) {
        e.size = it->second.size;
        e.stack = stackId(it->second.stack);
    }
    agg_.onFree(f);
    keep(e);
}

void EventRecorder::onShortLived(const core::AllocRecord& a, const core::FreeRecord& f) {
    agg_.onShortLived(a, f);
    const uint32_t stack = allocStack(a.f.device, a.f.nativeNode, a.f.pyNode);
    keep({a.timeNs, a.f.address, a.f.size, stack, core::EventKind::Alloc, a.f.device});
    keep({f.timeNs, a.f.address, a.f.size, stack, core::EventKind::Free, a.f.device});
}

void EventRecorder::onOom(const core::OomRecord& o) {
    agg_.onOom(o);
    keep({o.timeNs, 0, o.f.size, allocStack(o.f.device, o.f.nativeNode, o.f.pyNode),
          core::EventKind::Oom, o.f.device});
}

void EventRecorder::onWindow(const core::WindowRecord& w) {
    agg_.onWindow(w);
    for (const core::WindowRecord::Device& d : w.devices) folded_ += d.allocs + d.frees;
    folded_ += w.oldFrees.size();
}

const reporters::EventSection& EventRecorder::section(Symbolizer& symbolizer) {
    if (section_) return *section_;
    section_ = std::make_unique<reporters::EventSection>();
    reporters::EventSection& s = *section_;
    core::ProcessEvents& p = s.process;
    if (const auto& h = agg_.handshake()) {
        p.pid = h->pid;
        p.startUnixS = static_cast<double>(h->startUnixNs) / 1e9;
    }
    p.mode = all_ ? core::kEventsAll : core::kEventsLast;
    p.limit = option_.limit;
    p.seen = seen_;
    p.folded = folded_;
    if (!all_) {
        all_ = std::make_unique<reporters::CompressedEvents>();
        for (const core::Event& e : beforeOom_) all_->add(e);
        // Events between those before the refused request and the last N were not kept.
        if (!beforeOom_.empty() && seen_ - afterOom_ > ring_.size()) p.gapAt = beforeOom_.size();
        for (const core::Event& e : ringInOrder()) all_->add(e);
        ring_ = {};
        beforeOom_ = {};
    }
    s.eventCount = all_->count();
    // After every event (end blocks are encoded as allocations, and times only grow).
    const uint64_t endNs = std::max(agg_.lastTimeNs(), lastNs_);
    for (const auto& [device, state] : agg_.devices())
        for (const auto& [address, block] : agg_.liveBlocks(device))
            all_->add(
                {endNs, address, block.size, stackId(block.stack), core::EventKind::Alloc, device});
    all_->finish();
    s.events = all_.get();
    core::FrameTable frames;
    for (size_t id = 1; id < stackOfId_.size(); ++id) {
        std::vector<uint32_t> ids;
        for (const core::Frame& f : stackFrames(agg_, symbolizer, agg_.stacks()[stackOfId_[id]]))
            ids.push_back(frames.intern(f));
        p.stacks.push_back(std::move(ids));
    }
    p.frames = std::move(frames).release();
    return s;
}

}  // namespace memtool::cli
