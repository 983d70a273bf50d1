#include "collectors/control/CpuPagesBackend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "collectors/control/AlignedMapping.h"
#include "core/Checksum.h"

namespace memtool::collectors::control {

uint64_t CpuPagesBackend::granularity(uint8_t) {
    static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    return page;
}

bool CpuPagesBackend::reserve(uint8_t, uint64_t bytes, uint64_t alignment, uint64_t* address,
                              Failure& why) {
    // Storages ask for 64-byte alignment; pages give more.
    void* p = mapAligned(bytes, alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    if (p == MAP_FAILED) {
        why.set("cannot reserve addresses: ", std::strerror(errno));
        return false;
    }
    *address = reinterpret_cast<uint64_t>(p);
    return true;
}

bool CpuPagesBackend::map(uint8_t, uint64_t address, uint64_t bytes, Failure& why) {
    // Pages come back zero-filled on first touch; copyIn fills them when backed up.
    if (mprotect(reinterpret_cast<void*>(address), bytes, PROT_READ | PROT_WRITE) != 0) {
        why.set("cannot map pages: ", std::strerror(errno));
        return false;
    }
    return true;
}

bool CpuPagesBackend::unmap(uint8_t, uint64_t address, uint64_t bytes, Failure& why) {
    void* p = reinterpret_cast<void*>(address);
    // Access is refused first, so that a stray touch during the release faults
    // instead of bringing a page back.
    if (mprotect(p, bytes, PROT_NONE) != 0 || madvise(p, bytes, MADV_DONTNEED) != 0) {
        why.set("cannot release pages: ", std::strerror(errno));
        return false;
    }
    return true;
}

void CpuPagesBackend::release(uint8_t, uint64_t address, uint64_t bytes) {
    munmap(reinterpret_cast<void*>(address), bytes);
}

bool CpuPagesBackend::copyOut(uint8_t, uint64_t address, uint64_t bytes, Backup& to,
                              uint64_t offset, Failure& why) {
    return to.write(offset, reinterpret_cast<const void*>(address), bytes, why);
}

bool CpuPagesBackend::copyIn(uint8_t, uint64_t address, uint64_t bytes, Backup& from,
                             uint64_t offset, Failure& why) {
    return from.read(offset, reinterpret_cast<void*>(address), bytes, why);
}

bool CpuPagesBackend::checksum(uint8_t, uint64_t address, uint64_t bytes, uint64_t* sum, Failure&) {
    *sum = core::checksumWords(reinterpret_cast<const uint64_t*>(address), bytes / 8);
    return true;
}

bool CpuPagesBackend::freeze(uint8_t, uint64_t address, uint64_t bytes, Failure& why) {
    if (mprotect(reinterpret_cast<void*>(address), bytes, PROT_READ) != 0) {
        why.set("cannot make pages read-only: ", std::strerror(errno));
        return false;
    }
    return true;
}

bool CpuPagesBackend::mapFilled(uint8_t, uint64_t address, uint64_t bytes, Backup& from,
                                uint64_t offset, Failure& why) {
    void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fresh == MAP_FAILED) {
        why.set("cannot map pages: ", std::strerror(errno));
        return false;
    }
    // Faulting the pages in as the reads land in them bound a restore to about
    // 1 GiB/s here, where dd read up to 2; in 2 MiB pages (where the kernel allows)
    // it ran at 1.5-1.7 GiB/s. A hint: refused, the pages are small ones.
    madvise(fresh, bytes, MADV_HUGEPAGE);
    if (!from.read(offset, fresh, bytes, why)) {
        munmap(fresh, bytes);
        return false;
    }
    // Replaces the reserved range [address, address + bytes) whole.
    if (mremap(fresh, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED,
               reinterpret_cast<void*>(address)) == MAP_FAILED) {
        why.set("cannot move restored pages into place: ", std::strerror(errno));
        munmap(fresh, bytes);
        return false;
    }
    return true;
}

}  // namespace memtool::collectors::control
