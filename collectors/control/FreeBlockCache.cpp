#include "collectors/control/FreeBlockCache.h"

#include "collectors/control/MemoryBackend.h"

namespace memtool::collectors::control {

uint32_t FreeBlockCache::take(AllocationTable& table, int region, uint64_t mapped) {
    uint64_t head = 0;
    if (!heads_.find(key(region, mapped), &head)) return UINT32_MAX;
    const uint32_t slot = static_cast<uint32_t>(head - 1);
    const uint32_t next = table[slot].nextFree;
    uint64_t dropped;
    if (next)
        heads_.insert(key(region, mapped), next);
    else
        heads_.erase(key(region, mapped), &dropped);
    bytes_ -= mapped;
    return slot;
}

bool FreeBlockCache::put(AllocationTable& table, uint32_t slot, const MemoryBackend* backend) {
    Allocation& a = table[slot];
    if (!backend || !backend->keepsFreedMemory() || bytes_ + a.mapped > kCapacityBytes)
        return false;
    uint64_t head = 0;
    const uint64_t k = key(a.region, a.mapped);
    a.nextFree = heads_.find(k, &head) ? static_cast<uint32_t>(head) : 0;
    if (!heads_.insert(k, slot + 1ull)) return false;
    a.state = Allocation::State::Cached;
    bytes_ += a.mapped;
    return true;
}

void FreeBlockCache::rebuild(AllocationTable& table) {
    heads_.clear();
    for (uint32_t i = 0; i < table.size(); ++i) {
        Allocation& a = table[i];
        if (a.state != Allocation::State::Cached) continue;
        uint64_t head = 0;
        const uint64_t k = key(a.region, a.mapped);
        a.nextFree = heads_.find(k, &head) ? static_cast<uint32_t>(head) : 0;
        heads_.insert(k, i + 1ull);
    }
}

}  // namespace memtool::collectors::control
