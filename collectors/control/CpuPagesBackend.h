#pragma once
// CPU memory as pages of the collector's own mappings: reserved with mmap,
// released with madvise(MADV_DONTNEED) and made inaccessible with mprotect, so
// that a paused storage keeps its address and a touch of it faults (PausedAccess
// turns that fault into a message naming the region).

#include "collectors/control/MemoryBackend.h"

namespace memtool::collectors::control {

class CpuPagesBackend final : public MemoryBackend {
public:
    const char* name() const override { return "cpu-pages"; }
    uint64_t granularity(uint8_t device) override;
    // Host backup is refused: the content already is host memory; back it up to disk.
    bool supports(core::BackupKind kind) const override { return kind != core::BackupKind::Host; }
    // libc10's CPU allocator caches nothing: storages come and go at the same sizes.
    bool keepsFreedMemory() const override { return true; }

    bool reserve(uint8_t device, uint64_t bytes, uint64_t alignment, uint64_t* address,
                 Failure& why) override;
    bool map(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) override;
    bool unmap(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) override;
    void release(uint8_t device, uint64_t address, uint64_t bytes) override;

    bool synchronize(uint8_t, Failure&) override { return true; }
    bool copyOut(uint8_t device, uint64_t address, uint64_t bytes, Backup& to, uint64_t offset,
                 Failure& why) override;
    bool copyIn(uint8_t device, uint64_t address, uint64_t bytes, Backup& from, uint64_t offset,
                Failure& why) override;
    // Of the pages as they are (readable: resident or frozen).
    bool checksum(uint8_t device, uint64_t address, uint64_t bytes, uint64_t* sum,
                  Failure& why) override;
    bool checksumsOnHost() const override { return true; }
    // Read-only pages (mprotect).
    bool freeze(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) override;
    // The content is read into fresh pages elsewhere (advised to be huge pages),
    // which mremap then moves over the paused range in one step: a thread that
    // touches it meanwhile faults (PausedAccess) instead of reading pages not yet
    // filled.
    bool mapFilled(uint8_t device, uint64_t address, uint64_t bytes, Backup& from, uint64_t offset,
                   Failure& why) override;
};

}  // namespace memtool::collectors::control
