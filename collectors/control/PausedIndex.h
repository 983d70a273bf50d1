#pragma once
// The paused allocations' address ranges, for the fault handler: which region's
// paused memory holds an address. Written under the owner's lock (Regions'
// tableMu_), read lock-free from a signal handler. Past its capacity a fault in
// paused memory is still reported, without its tag.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memtool::collectors::control {

class PausedIndex {
public:
    static constexpr size_t kCapacity = 65536;

    constexpr PausedIndex() = default;
    PausedIndex(const PausedIndex&) = delete;
    PausedIndex& operator=(const PausedIndex&) = delete;

    // `bytes` at `start` paused in `region`; under the owner's lock. Returns the
    // entry used (kCapacity when full: not indexed).
    uint32_t add(uint64_t start, uint64_t bytes, uint16_t region);
    // The range at `entry` (add's answer) resident or freed; under the owner's lock.
    void remove(uint32_t entry);
    // The region of the paused range holding `address`; lock-free and
    // async-signal-safe.
    bool find(uint64_t address, uint16_t* region) const;
    // Touches the first entry's page, so that a first pause grows the process by
    // nothing (Regions::warmLocked).
    void warm() { ranges_[0].start.store(ranges_[0].start.load()); }

private:
    // start == 0: a free entry. Published by storing start last (release).
    struct Range {
        std::atomic<uint64_t> start;
        std::atomic<uint64_t> end;
        std::atomic<uint16_t> region;
    };
    Range ranges_[kCapacity] = {};
    size_t hint_ = 0;  // where add looks first: past the entry it took last
};

}  // namespace memtool::collectors::control
