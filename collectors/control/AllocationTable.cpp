#include "collectors/control/AllocationTable.h"

namespace memtool::collectors::control {

uint32_t AllocationTable::newSlot() {
    if (freeSlot_) {
        const uint32_t slot = freeSlot_ - 1;
        freeSlot_ = slots_[slot].nextFree;
        return slot;
    }
    if (!slots_.push(Allocation{})) return UINT32_MAX;
    return static_cast<uint32_t>(slots_.size() - 1);
}

void AllocationTable::freeSlot(uint32_t slot) {
    slots_[slot].state = Allocation::State::Free;
    slots_[slot].nextFree = freeSlot_;
    freeSlot_ = slot + 1;
}

bool AllocationTable::find(uint64_t address, uint32_t* slot) const {
    uint64_t slotPlusOne = 0;
    if (!index_.find(address, &slotPlusOne)) return false;
    *slot = static_cast<uint32_t>(slotPlusOne - 1);
    return true;
}

long AllocationTable::slotContaining(uint64_t address) const {
    for (size_t i = 0; i < slots_.size(); ++i) {
        const Allocation& a = slots_[i];
        if ((a.state == Allocation::State::Resident || a.state == Allocation::State::Paused) &&
            address >= a.address && address - a.address < a.mapped)
            return static_cast<long>(i);
    }
    return -1;
}

}  // namespace memtool::collectors::control
