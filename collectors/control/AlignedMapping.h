#pragma once
// An anonymous mapping whose start is a multiple of `alignment`: where that is
// more than a page, `alignment` more is mapped and the slack on either side given
// back. For CPU region memory asked for with a large alignment, and for pinned
// host buffers aligned to 2 MiB so that each of their pages can be a huge one.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace memtool::collectors::control {

// MAP_FAILED (errno set) when the kernel refuses.
inline void* mapAligned(uint64_t bytes, uint64_t alignment, int prot, int flags) {
    static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t extra = alignment > page ? alignment : 0;
    void* p = mmap(nullptr, bytes + extra, prot, flags, -1, 0);
    if (p == MAP_FAILED || !extra) return p;
    const uint64_t start = reinterpret_cast<uint64_t>(p);
    const uint64_t aligned = (start + alignment - 1) / alignment * alignment;
    if (aligned > start) munmap(p, aligned - start);
    const uint64_t tail = start + bytes + extra - (aligned + bytes);
    if (tail) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    return reinterpret_cast<void*>(aligned);
}

}  // namespace memtool::collectors::control
