#pragma once
// One region allocation's record (PyTorch's Block): its addresses, its sizes, its
// region, its state and, while paused, where its content is. Plain data, copied
// freely; AllocationTable holds one per slot, and its free list of unused slots
// and the free-block cache's lists are threaded through nextFree.

#include <cstdint>

namespace memtool::collectors::control {

struct Allocation {
    // Cached: freed by the program, kept mapped for the next allocation of its size
    // in its region (FreeBlockCache). Not live; released on a pause.
    // Inherited: a fork child's copy of an allocation of its parent's.
    enum class State : uint8_t { Free = 0, Resident = 1, Paused = 2, Cached = 3, Inherited = 4 };

    uint64_t address;
    uint64_t size;    // as requested (what the trace counts)
    uint64_t mapped;  // rounded to the backend's granularity
    uint64_t backupOffset;
    uint64_t
        checksum;  // while paused with `verified`: its content's (core/Checksum.h) at the pause
    uint32_t nextFree;    // list link (slot + 1; 0 ends it) while State::Free or State::Cached
    uint32_t pausedSlot;  // its entry in the PausedIndex while State::Paused
    uint16_t backup;      // its backup slot + 1 while paused with a backup; 0: none
    uint16_t region;
    State state;
    bool pausedInParent;  // Inherited: it was paused (pausedSlot, backup still hold)
    bool verified;        // paused with a checksum its resume checks
};

}  // namespace memtool::collectors::control
