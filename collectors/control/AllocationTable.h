#pragma once
// The region allocations' table: one Allocation per slot (address, sizes,
// region, state), the index from an allocation's address to its slot, and the
// free list of slots no allocation holds. A slot's number is stable while it is
// in use (work lists and the free-block cache's lists name slots); slots are
// reused, never given back.
//
// Invariants: every slot on the free list is Free (linked through
// Allocation::nextFree, slot + 1, 0 ends it); the index holds the
// address of every Resident, Paused and Inherited allocation, and no Cached or
// Free one. Guarded by the owner's lock (Regions' tableMu_).

#include <cstddef>
#include <cstdint>

#include "collectors/control/Allocation.h"
#include "collectors/engine/MappedTable.h"

namespace memtool::collectors::control {

class AllocationTable {
public:
    constexpr AllocationTable() = default;
    AllocationTable(const AllocationTable&) = delete;
    AllocationTable& operator=(const AllocationTable&) = delete;

    // Slots made so far, in use or free.
    size_t size() const { return slots_.size(); }
    Allocation& operator[](size_t slot) { return slots_[slot]; }
    const Allocation& operator[](size_t slot) const { return slots_[slot]; }

    // A slot off the free list, or a new one; UINT32_MAX when memory ran out.
    uint32_t newSlot();
    // Puts `slot` back on the free list (its state becomes Free).
    void freeSlot(uint32_t slot);

    // Indexes `address` as the allocation at `slot`; false when memory ran out.
    bool index(uint64_t address, uint32_t slot) { return index_.insert(address, slot + 1ull); }
    // The slot of the allocation indexed at `address`; false when none is.
    bool find(uint64_t address, uint32_t* slot) const;
    void unindex(uint64_t address) {
        uint64_t dropped;
        index_.erase(address, &dropped);
    }
    // The slot of the Resident or Paused allocation whose mapping contains
    // `address`, or -1 (a scan of the table).
    long slotContaining(uint64_t address) const;

private:
    MappedArray<Allocation> slots_;
    PointerMap index_;       // address -> slot + 1
    uint32_t freeSlot_ = 0;  // head of the free list, slot + 1
};

}  // namespace memtool::collectors::control
