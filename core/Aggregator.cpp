#include "core/Aggregator.h"

#include <algorithm>
#include <bitset>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace memtool::core {

void Aggregator::onHandshake(const Handshake& h) {
    if (handshake_) throw ProtocolError("second handshake in one stream");
    handshake_ = h;
    countRecord();
    if (!h.continues) return;
    const Aggregator* from = lookup_ ? lookup_(h) : nullptr;
    if (from && from->idsExact_) {
        takeOver(*from, *h.continues);
    } else {
        continuationProblem_ = from ? "the stream it continues lost some of its stacks"
                                    : "the stream it continues was not received";
    }
    idsExact_ = held_.nativeNodes == h.continues->nativeNodes &&
                held_.pyCodes == h.continues->pyCodes && held_.pyNodes == h.continues->pyNodes;
    if (!idsExact_ && continuationProblem_.empty())
        continuationProblem_ = "the stream it continues ended before all its stacks arrived";
}

void Aggregator::takeOver(const Aggregator& from, const StreamContinuation& c) {
    auto prefix = [](const auto& all, uint64_t n) {
        // Entry 0 is the unused root: ids 1..n are entries 1..n.
        const size_t count = std::min<uint64_t>(n + 1, all.size());
        return std::vector(all.begin(), all.begin() + static_cast<ptrdiff_t>(count));
    };
    nativeNodes_ = prefix(from.nativeNodes_, c.nativeNodes);
    pyCodes_ = prefix(from.pyCodes_, c.pyCodes);
    pyNodes_ = prefix(from.pyNodes_, c.pyNodes);
    held_ = IdCounts{nativeNodes_.size() - 1, pyCodes_.size() - 1, pyNodes_.size() - 1};
    for (const SharedModule& m : from.modules_)
        if (m->id <= c.modules) modules_.push_back(m);
}

void Aggregator::onModule(const ModuleRecord& m) {
    modules_.push_back(std::make_shared<const ModuleRecord>(m));
    countRecord();
}

void Aggregator::onPyCode(const PyCodeRecord& r) {
    pyCodes_.push_back(r);
    countRecord();
}

void Aggregator::onNativeNode(const NativeNodeRecord& n) {
    nativeNodes_.push_back(n);
    countRecord();
}

void Aggregator::onPyNode(const PyNodeRecord& n) {
    pyNodes_.push_back(n);
    countRecord();
}

void Aggregator::onNote(const NoteRecord& n) {
    notes_.push_back(n);
    countRecord();
    if (n.key == kNoteProgramEnd) markProgramEnd(n.text);
    if (programEnd_) return;  // a list after the moment describes nothing
    if (n.key == kNoteReachable) addReachable(n.text);
    if (n.key == kNoteReachableEnd) endReachable(n.text);
}

void Aggregator::addReachable(const std::string& text) {
    const char* p = text.c_str();
    while (*p) {
        if (*p == ' ') {
            ++p;
            continue;
        }
        char* end = nullptr;
        errno = 0;
        const unsigned long long address = std::strtoull(p, &end, 16);
        const char* name = end;
        const char* nameEnd = end;
        if (*end == '@') {
            name = end + 1;
            nameEnd = std::strchr(name, ' ');
            if (!nameEnd) nameEnd = name + std::strlen(name);
        }
        if (end == p || errno != 0 || (*nameEnd != ' ' && *nameEnd != '\0') || *p == '-' ||
            *p == '+' ||
            (*end == '@' &&
             (nameEnd == name || nameEnd - name > static_cast<ptrdiff_t>(kMaxReachableName)))) {
            reachableSpoiled_ = true;
            return;
        }
        reachable_.emplace_back(address, std::string(name, nameEnd));
        p = nameEnd;
    }
}

void Aggregator::endReachable(const std::string& text) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long count = std::strtoull(text.c_str(), &end, 10);
    reachableWhole_ = !text.empty() && *end == '\0' && errno == 0 && !reachableSpoiled_ &&
                      count == reachable_.size();
}

void Aggregator::countHeld() {
    // An address sent twice (two tensors' storages cannot share one, but a hostile
    // stream can) counts once, under its first name.
    std::stable_sort(reachable_.begin(), reachable_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    reachable_.erase(std::unique(reachable_.begin(), reachable_.end(),
                                 [](const auto& a, const auto& b) { return a.first == b.first; }),
                     reachable_.end());
    for (auto& [code, d] : devices_) {
        // A storage inside a block holds all of it, once: a CUDA tensor lies in a
        // segment the caching allocator took from the driver (at its start or not).
        std::vector<std::pair<uint64_t, const LiveBlock*>> blocks;
        for (const auto& [address, block] : liveBlocks(code)) blocks.emplace_back(address, &block);
        std::sort(blocks.begin(), blocks.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        const LiveBlock* last = nullptr;  // reachable_ is by address: a block's come together
        for (const auto& [address, name] : reachable_) {
            auto it = std::upper_bound(blocks.begin(), blocks.end(), address,
                                       [](uint64_t a, const auto& b) { return a < b.first; });
            if (it == blocks.begin()) continue;
            const auto& [start, block] = *--it;
            // A storage not from a tracked allocation, or one counted already.
            if (address - start >= block->size || block == last) continue;
            last = block;
            d.heldAtProgramEnd += block->size;
            d.heldBy[name] += block->size;
            if (block->stack < stacks_.size())
                stacks_[block->stack].heldAtProgramEnd += block->size;
        }
    }
}

void Aggregator::markProgramEnd(const std::string& how) {
    if (programEnd_) return;  // the first moment counts (python3's main returns later)
    if (how != kProgramEndPython && how != kProgramEndExit) return;
    programEnd_ = ProgramEnd{how, lastTimeNs_};
    // Once per stream: O(devices + stacks).
    for (auto& [code, d] : devices_) d.liveAtProgramEnd = d.currentBytes + d.pausedBytes;
    for (StackState& s : stacks_) s.liveAtProgramEnd = s.liveBytes + s.pausedBytes;
    // Only Python's moment has a list; a C or C++ program's split is unknown.
    if (how == kProgramEndPython && reachableWhole_) {
        programEnd_->reachableKnown = true;
        countHeld();
    }
    reachable_ = {};
}

void Aggregator::onRegion(const RegionRecord& r) {
    regions_[r.id].record = r;
    countRecord();
}

void Aggregator::onControl(const ControlRecord& c) {
    controls_.push_back(c);
    countRecord();
    if (!c.f.ok) return;  // nothing changed
    const bool pause = c.f.action == ControlAction::Pause || c.f.action == ControlAction::Yield;
    setPaused(c.f.region, pause, c.timeNs);
    lastTimeNs_ = c.timeNs;
}

void Aggregator::onReply(const ReplyRecord& r) {
    replies_.push_back(r);
    countRecord();
}

void Aggregator::onOom(const OomRecord& o) {
    countRecord();
    lastTimeNs_ = o.timeNs;
    if (oomCount_++ >= kMaxOomEvents) return;
    OomEvent e;
    e.record = o;
    e.stack = stackIndex(o.f.device, o.f.nativeNode, o.f.pyNode);
    e.heldDevice = o.f.device;
    // On CUDA, PyTorch's blocks say which tensors held the device, when the bridge
    // reports them; the driver-level row holds whole segments.
    const int ordinal = cudaOrdinal(o.f.device);
    if (ordinal >= 0) {
        const uint8_t active = cudaDevice(ordinal, DevicePool::Active);
        if (!liveBlocks(active).empty()) e.heldDevice = active;
    }
    for (uint32_t i = 0; i < stacks_.size(); ++i)
        if (stacks_[i].device == e.heldDevice && stacks_[i].liveBytes > 0)
            e.consumers.emplace_back(i, stacks_[i].liveBytes);
    std::sort(e.consumers.begin(), e.consumers.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    auto d = devices_.find(e.heldDevice);
    e.liveBytes = d == devices_.end() ? 0 : d->second.currentBytes;
    ooms_.push_back(std::move(e));
}

void Aggregator::onEnd(const EndFields& e) {
    // An earlier end before an exec that failed was one more record of the stream.
    if (execEndPending_) ++records_;
    end_ = e;
    execEndPending_ = e.exitKind == static_cast<uint64_t>(ExitKind::Exec);
}

void Aggregator::countRecord() {
    if (execEndPending_) {
        // Records after an end before an exec: the exec failed and the stream went
        // on; that end was one more record of it, not its end.
        execEndPending_ = false;
        end_.reset();
        ++records_;
    }
    ++records_;
}

bool Aggregator::streamVerified() const {
    const std::optional<EndFields>& e = end_ ? end_ : recoveredCounts_;
    return e && e->recordCount == records_ && e->allocCount == allocs_ && e->freeCount == frees_ &&
           e->missedEvents == 0;
}

uint32_t Aggregator::lookUpStack(uint8_t device, uint64_t key, uint64_t nativeNode,
                                 uint64_t pyNode) {
    auto [it, inserted] =
        tables(device).stackIds.try_emplace(key, static_cast<uint32_t>(stacks_.size()));
    recentStacks_[recentSlot(key)] = {key, device, it->second};
    if (inserted) {
        StackState s;
        s.device = device;
        s.nativeNode = nativeNode;
        s.pyNode = pyNode;
        s.stamp = deviceState(device).peakVersion;
        stacks_.push_back(s);
    }
    return it->second;
}

void Aggregator::touch(StackState& s, const DeviceState& d) {
    if (s.stamp != d.peakVersion) {
        s.liveAtPeak = s.liveBytes;  // unchanged since the latest peak
        s.stamp = d.peakVersion;
    }
}

uint64_t Aggregator::liveAtPeak(const StackState& s) const {
    auto it = devices_.find(s.device);
    if (it == devices_.end()) return 0;
    return s.stamp == it->second.peakVersion ? s.liveAtPeak : s.liveBytes;
}

const Aggregator::LiveBlockMap& Aggregator::liveBlocks(uint8_t device) const {
    static const LiveBlockMap kNone;
    return tables_[device] ? tables_[device]->live : kNone;
}

DeviceState* Aggregator::release(uint8_t device, uint64_t address, uint64_t timeNs, bool counted) {
    DeviceTables* t = tables_[device].get();
    auto it = t ? t->live.find(address) : LiveBlockMap::iterator{};
    if (!t || it == t->live.end()) {
        if (counted) ++unmatchedFrees_;
        return nullptr;
    }
    const LiveBlock& b = it->second;
    DeviceState& d = deviceState(device);
    retire(d, stacks_[b.stack], b.size, b.paused);
    countGraphPool(device, address, -static_cast<int64_t>(b.size), timeNs);
    if (b.region) {
        Region& r = regions_[b.region];
        r.liveBytes -= b.size;
        if (b.paused) r.pausedBytes -= b.size;
        --r.liveBlocks;
        regionBlocks_[b.region].erase(address);
    }
    t->live.erase(it);
    lastTimeNs_ = timeNs;
    return &d;
}

void Aggregator::countGraphPool(uint8_t device, uint64_t key, int64_t bytes, uint64_t timeNs,
                                uint32_t stack) {
    const uint32_t number = graphPoolOfKey(key);
    const DevicePool pool = devicePool(device);
    if (number == 0 || (pool != DevicePool::Graphs && pool != DevicePool::GraphsActive)) return;
    GraphPoolState& g = graphPools_[number];
    g.ordinal = cudaOrdinal(device);
    uint64_t& now = pool == DevicePool::Graphs ? g.reservedBytes : g.activeBytes;
    uint64_t& peak = pool == DevicePool::Graphs ? g.reservedPeak : g.activePeak;
    // A hostile stream's frees cannot take it below nothing.
    now = bytes >= 0 ? now + static_cast<uint64_t>(bytes)
                     : now - std::min(now, static_cast<uint64_t>(-bytes));
    peak = std::max(peak, now);
    (pool == DevicePool::Graphs ? g.reservedTimeline : g.activeTimeline).record(timeNs, now);
    if (bytes > 0 && pool == DevicePool::GraphsActive && stack != UINT32_MAX)
        g.allocatedByStack[stack] += static_cast<uint64_t>(bytes);
}

void Aggregator::retire(DeviceState& d, StackState& s, uint64_t size, bool paused) {
    touch(s, d);
    if (paused) {
        s.pausedBytes -= size;
        d.pausedBytes -= size;
    } else {
        s.liveBytes -= size;
        d.currentBytes -= size;
    }
    countFreed(d, 1, size);
}

void Aggregator::countFreed(DeviceState& d, uint64_t frees, uint64_t bytes) const {
    d.freedBytes += bytes;
    d.freeCount += frees;
    if (programEnd_) {
        d.teardownFreedBytes += bytes;
        d.teardownFreeCount += frees;
    }
}

Aggregator::Admitted Aggregator::admit(const AllocRecord& a) {
    ++allocs_;
    const uint8_t dev = a.f.device;
    const uint32_t idx = stackIndex(dev, a.f.nativeNode, a.f.pyNode);
    DeviceState& d = deviceState(dev);
    StackState& s = stacks_[idx];
    touch(s, d);
    s.allocatedBytes += a.f.size;
    ++s.count;
    d.allocatedBytes += a.f.size;
    ++d.allocCount;
    addResident(d, s, a.f.size, a.timeNs);
    d.timeline.record(a.timeNs, d.currentBytes);
    if (d.currentBytes > s.maxDeviceBytesAtAlloc) s.maxDeviceBytesAtAlloc = d.currentBytes;
    lastTimeNs_ = a.timeNs;
    return {d, s, idx};
}

void Aggregator::retireOverwritten(uint8_t device, uint64_t address, uint64_t timeNs) {
    // The free of the previous block never arrived; retire it so the address
    // can be reused, and say so in the trace.
    ++doubleAllocs_;
    release(device, address, timeNs, false);
}

void Aggregator::onAlloc(const AllocRecord& a) {
    countRecord();
    const uint8_t dev = a.f.device;
    const uint32_t region = static_cast<uint32_t>(a.f.region);
    // One probe of the table: the block's entry, filled in once its stack is known.
    auto& live = tables(dev).live;
    const LiveBlock block{a.f.size, 0, region, false};
    auto [it, inserted] = live.try_emplace(a.f.address, block);
    if (!inserted) {
        retireOverwritten(dev, a.f.address, a.timeNs);
        it = live.try_emplace(a.f.address, block).first;
    }
    const Admitted admitted = admit(a);  // touches no live-block table: `it` stays valid
    it.value().stack = admitted.index;
    countGraphPool(dev, a.f.address, static_cast<int64_t>(a.f.size), a.timeNs, admitted.index);
    if (region) {
        Region& r = regions_[region];
        r.liveBytes += a.f.size;
        ++r.liveBlocks;
        regionBlocks_[region].emplace(a.f.address, dev);
    }
}

void Aggregator::onShortLived(const AllocRecord& a, const FreeRecord& f) {
    // The Alloc and the Free it stands for, in one record: the block never
    // enters the table of live ones.
    countRecord();
    if (liveBlocks(a.f.device).count(a.f.address))
        retireOverwritten(a.f.device, a.f.address, a.timeNs);
    const Admitted admitted = admit(a);
    ++frees_;
    countGraphPool(a.f.device, a.f.address, static_cast<int64_t>(a.f.size), a.timeNs,
                   admitted.index);
    retire(admitted.device, admitted.stack, a.f.size, false);
    countGraphPool(a.f.device, a.f.address, -static_cast<int64_t>(a.f.size), f.timeNs);
    admitted.device.timeline.record(f.timeNs, admitted.device.currentBytes);
    lastTimeNs_ = f.timeNs;
}

void Aggregator::addResident(DeviceState& d, StackState& s, uint64_t size, uint64_t timeNs) {
    s.liveBytes += size;
    d.currentBytes += size;
    if (d.currentBytes > d.peakBytes) {
        d.peakBytes = d.currentBytes;
        d.peakTimeNs = timeNs;
        ++d.peakVersion;  // every stack's snapshot is now stale: live == at peak
    }
}

void Aggregator::setPaused(uint64_t regionId, bool paused, uint64_t timeNs) {
    auto blocks = regionBlocks_.find(regionId);
    if (blocks == regionBlocks_.end()) return;
    Region& r = regions_[regionId];
    std::bitset<256> changed;
    for (const auto& [address, device] : blocks->second) {
        LiveBlock& b = tables(device).live.at(address);
        if (b.paused == paused) continue;
        DeviceState& d = devices_[device];
        StackState& s = stacks_[b.stack];
        touch(s, d);
        b.paused = paused;
        changed.set(device);
        if (paused) {
            s.liveBytes -= b.size;
            d.currentBytes -= b.size;
            s.pausedBytes += b.size;
            d.pausedBytes += b.size;
            r.pausedBytes += b.size;
        } else {
            s.pausedBytes -= b.size;
            d.pausedBytes -= b.size;
            r.pausedBytes -= b.size;
            addResident(d, s, b.size, timeNs);
        }
    }
    for (size_t device = 0; device < changed.size(); ++device) {
        if (!changed.test(device)) continue;
        DeviceState& d = devices_[static_cast<uint8_t>(device)];
        d.timeline.record(timeNs, d.currentBytes);
    }
}

void Aggregator::onFree(const FreeRecord& f) {
    countRecord();
    ++frees_;
    if (DeviceState* d = release(f.f.device, f.f.address, f.timeNs, true))
        d->timeline.record(f.timeNs, d->currentBytes);
}

void Aggregator::onWindow(const WindowRecord& w) {
    // What the window's records would have done one by one, in a few steps: the
    // collector summed them, and the blocks allocated before it that it freed
    // are looked up here, where their stacks are known.
    countRecord();
    std::vector<uint32_t> index(w.stacks.size());
    for (size_t i = 0; i < w.stacks.size(); ++i)
        index[i] = stackIndex(w.stacks[i].device, w.stacks[i].nativeNode, w.stacks[i].pyNode);
    struct Change {
        uint64_t added = 0;        // bytes of its blocks allocated in the window, live at its end
        uint64_t freed = 0;        // bytes of its blocks from before, freed in it
        uint64_t freedEarly = 0;   // of those, freed before its device's last new peak
        uint64_t addedAtPeak = 0;  // bytes of its window blocks live at that peak
    };
    tsl::robin_map<uint32_t, Change> changes;
    for (size_t i = 0; i < w.stacks.size(); ++i)
        changes[index[i]].addedAtPeak += w.stacks[i].liveAtPeak;
    for (const WindowRecord::Block& b : w.blocks) {
        changes[index[b.stack]].added += b.size;
        countGraphPool(w.stacks[b.stack].device, b.address, static_cast<int64_t>(b.size), w.endNs,
                       index[b.stack]);
    }
    for (const WindowRecord::OldFree& f : w.oldFrees) {
        ++frees_;
        DeviceTables* t = tables_[f.device].get();
        auto it = t ? t->live.find(f.address) : LiveBlockMap::iterator{};
        if (!t || it == t->live.end()) {
            ++unmatchedFrees_;
            continue;
        }
        const LiveBlock b = it->second;
        if (b.region || b.paused) {  // never folded by a collector: taken as a Free
            release(f.device, f.address, w.endNs, true);
            continue;
        }
        t->live.erase(it);
        countGraphPool(f.device, f.address, -static_cast<int64_t>(b.size), w.endNs);
        Change& c = changes[b.stack];
        c.freed += b.size;
        if (f.beforePeak) c.freedEarly += b.size;
        countFreed(deviceState(f.device), 1, b.size);
    }
    // Every stack that changes keeps what it held at the device's peaks so far.
    for (const auto& [i, c] : changes) touch(stacks_[i], deviceState(stacks_[i].device));
    for (const WindowRecord::Device& wd : w.devices) {
        DeviceState& d = deviceState(wd.device);
        d.allocCount += wd.allocs;
        d.allocatedBytes += wd.allocatedBytes;
        countFreed(d, wd.frees, wd.freedBytes);
        allocs_ += wd.allocs;
        frees_ += wd.frees;
        if (wd.peakBytes != 0) {
            d.peakBytes = wd.peakBytes;
            d.peakTimeNs = wd.peakTimeNs;
            ++d.peakVersion;
        }
        for (const auto& [time, bytes] : wd.points) d.timeline.record(time, bytes);
    }
    for (const auto& [i, c] : changes) {
        StackState& s = stacks_[i];
        DeviceState& d = deviceState(s.device);
        if (s.stamp != d.peakVersion) {  // a new peak in the window
            s.liveAtPeak = s.liveBytes + c.addedAtPeak - c.freedEarly;
            s.stamp = d.peakVersion;
        }
        s.liveBytes += c.added - c.freed;
        d.currentBytes += c.added - c.freed;
    }
    for (size_t i = 0; i < w.stacks.size(); ++i) {
        StackState& s = stacks_[index[i]];
        s.count += w.stacks[i].allocs;
        s.allocatedBytes += w.stacks[i].allocatedBytes;
        s.maxDeviceBytesAtAlloc =
            std::max(s.maxDeviceBytesAtAlloc, w.stacks[i].maxDeviceBytesAtAlloc);
    }
    for (const WindowRecord::Block& b : w.blocks) {
        const uint8_t device = w.stacks[b.stack].device;
        auto& live = tables(device).live;
        const LiveBlock block{b.size, index[b.stack], 0, false};
        if (!live.try_emplace(b.address, block).second) {  // not from a collector
            retireOverwritten(device, b.address, w.endNs);
            tables(device).live.try_emplace(b.address, block);
        }
    }
    lastTimeNs_ = w.endNs;
}

}  // namespace memtool::core
