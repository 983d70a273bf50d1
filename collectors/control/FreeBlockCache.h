#pragma once
// The blocks the program freed inside a region, kept mapped for the next
// allocation of the same mapped size in the same region (a caching allocator's
// free list, PyTorch's BlockPool): a training loop's activations come and go at
// the same sizes, and mapping fresh pages each time would fault every page in
// again. At most kCapacityBytes are kept; a pause lets go of its regions' blocks
// first (nothing of theirs to back up).
//
// Owns the lists' heads, one list per (region, mapped size), and the mapped bytes
// on them. The lists are threaded through the table's Allocation::nextFree (slot
// + 1, 0 ends one), every allocation on them State::Cached. Guarded by the owner's lock
// (Regions' tableMu_); each call is handed the table it works on.

#include <cstdint>

#include "collectors/control/AllocationTable.h"
#include "collectors/engine/MappedTable.h"

namespace memtool::collectors::control {

class MemoryBackend;

class FreeBlockCache {
public:
    static constexpr uint64_t kCapacityBytes = 256ull << 20;  // mapped bytes kept, at most

    constexpr FreeBlockCache() = default;
    FreeBlockCache(const FreeBlockCache&) = delete;
    FreeBlockCache& operator=(const FreeBlockCache&) = delete;

    // A cached block of exactly `mapped` bytes in `region`, taken off its list
    // (still State::Cached: the caller makes it Resident); UINT32_MAX when none.
    uint32_t take(AllocationTable& table, int region, uint64_t mapped);
    // Keeps the freed block at `slot` (made State::Cached) when `backend` (its
    // memory's; null: none) keeps freed memory and there is room; false otherwise.
    bool put(AllocationTable& table, uint32_t slot, const MemoryBackend* backend);
    // Takes every cached block of the regions marked in `regions` off the cache,
    // handing each to `taken(slot, allocation)` before its slot is freed; the
    // lists of what stays (other regions') are then rebuilt.
    template <typename Taken>
    void takeRegions(AllocationTable& table, const bool* regions, Taken&& taken);
    // Mapped bytes kept now.
    uint64_t bytes() const { return bytes_; }
    // Forgets every list (a fork child, which frees its inherited blocks itself).
    void clear() {
        heads_.clear();
        bytes_ = 0;
    }

private:
    static uint64_t key(int region, uint64_t mapped) {
        return mapped * 512 + static_cast<uint64_t>(region) + 1;
    }
    void rebuild(AllocationTable& table);

    PointerMap heads_;  // key -> first cached slot + 1 (list via nextFree)
    uint64_t bytes_ = 0;
};

template <typename Taken>
void FreeBlockCache::takeRegions(AllocationTable& table, const bool* regions, Taken&& taken) {
    bool any = false;
    for (uint32_t i = 0; i < table.size(); ++i) {
        Allocation& a = table[i];
        if (a.state != Allocation::State::Cached || !regions[a.region]) continue;
        taken(i, static_cast<const Allocation&>(a));
        bytes_ -= a.mapped;
        table.freeSlot(i);
        any = true;
    }
    if (any) rebuild(table);
}

}  // namespace memtool::collectors::control
