#include "collectors/control/PausedIndex.h"

namespace memtool::collectors::control {

uint32_t PausedIndex::add(uint64_t start, uint64_t bytes, uint16_t region) {
    for (size_t n = 0; n < kCapacity; ++n) {
        const size_t slot = (hint_ + n) % kCapacity;
        Range& p = ranges_[slot];
        if (p.start.load(std::memory_order_relaxed) != 0) continue;
        p.region.store(region, std::memory_order_relaxed);
        p.end.store(start + bytes, std::memory_order_relaxed);
        p.start.store(start, std::memory_order_release);
        hint_ = (slot + 1) % kCapacity;
        return static_cast<uint32_t>(slot);
    }
    return kCapacity;
}

void PausedIndex::remove(uint32_t entry) {
    if (entry < kCapacity) ranges_[entry].start.store(0, std::memory_order_release);
}

bool PausedIndex::find(uint64_t address, uint16_t* region) const {
    for (const Range& p : ranges_) {
        const uint64_t start = p.start.load(std::memory_order_acquire);
        if (start == 0 || address < start || address >= p.end.load(std::memory_order_relaxed))
            continue;
        *region = p.region.load(std::memory_order_relaxed);
        return true;
    }
    return false;
}

}  // namespace memtool::collectors::control
