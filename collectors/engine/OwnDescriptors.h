#pragma once
// The descriptors the collector keeps open in the program (its socket, its shared
// send buffer, paused regions' disk backups). A program that closes what it
// believes are its own (a daemon's os.closerange(3, ...), python-daemon closing
// every descriptor, a loop of os.close) would cut the stream off or lose a
// backup: the preload library's close, close_range and closefrom leave these
// open and say they closed them. (A descriptor the program dup2()s over, or
// closes by a raw system call, is still found taken over where it is used.)
//
// Lock-free, allocation-free: the hooks run in vfork children, which share this
// memory with their parent, and only read it.

#include <unistd.h>

#include <atomic>
#include <cstddef>

namespace memtool::collectors::own {

inline constexpr size_t kMaxOwnDescriptors = 64;
// fd + 1 in each slot in use, 0 in a free one (so the table starts zeroed).
inline constinit std::atomic<int> gOwnSlots[kMaxOwnDescriptors] = {};

// From now on `fd` is the collector's (no-op for -1 or when the table is full).
inline void keep(int fd) {
    if (fd < 0) return;
    for (auto& slot : gOwnSlots) {
        int free = 0;
        if (slot.compare_exchange_strong(free, fd + 1)) return;
    }
}

// Before the collector closes `fd` itself.
inline void letGo(int fd) {
    if (fd < 0) return;
    for (auto& slot : gOwnSlots) {
        int held = fd + 1;
        if (slot.compare_exchange_strong(held, 0)) return;
    }
}

// The collector closes `fd`, its own: let go of, then closed (no-op for -1).
inline void release(int fd) {
    if (fd < 0) return;
    letGo(fd);
    ::close(fd);
}

inline bool owned(int fd) {
    if (fd < 0) return false;
    for (const auto& slot : gOwnSlots)
        if (slot.load(std::memory_order_relaxed) == fd + 1) return true;
    return false;
}

// The collector's descriptors in [first, last], ascending, into `out` (room for
// kMaxOwnDescriptors); how many.
inline size_t ownedIn(unsigned first, unsigned last, int* out) {
    size_t n = 0;
    for (const auto& slot : gOwnSlots) {
        const int v = slot.load(std::memory_order_relaxed);
        if (v == 0) continue;
        const unsigned fd = static_cast<unsigned>(v - 1);
        if (fd < first || fd > last) continue;
        size_t at = n++;
        for (; at > 0 && static_cast<unsigned>(out[at - 1]) > fd; --at) out[at] = out[at - 1];
        out[at] = static_cast<int>(fd);
    }
    return n;
}

}  // namespace memtool::collectors::own
