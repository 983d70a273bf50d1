#pragma once
// The store of backup slots: each holds the content of one pause of one region
// (a DiskBackup or a HostBackup, Backups.h), opened for all of it up front. Each
// paused allocation points at its slot (Allocation::backup, slot + 1); a slot
// counts the allocations whose content it holds, and its content goes when the
// last of them is resumed or freed. A region paused twice, with resident memory
// added in between, holds two. The store also keeps the directory disk backups
// go to and the count that numbers their files.
//
// Locks are the owner's: slots are opened, used and let go under Regions'
// tableMu_; their content is read and written under opMu_ (a pause, a resume,
// readBackup) by the operation that holds the slot. The directory is set before
// the first region, or under opMu_.

#include <cstddef>
#include <cstdint>

#include "collectors/control/Backups.h"
#include "collectors/control/MemoryBackend.h"
#include "core/Protocol.h"

namespace memtool::collectors::control {

class BackupSlots {
public:
    static constexpr int kCapacity = 256;  // pauses held at once

    constexpr BackupSlots() = default;
    BackupSlots(const BackupSlots&) = delete;
    BackupSlots& operator=(const BackupSlots&) = delete;

    // Where disk backups go ("" until set: /tmp).
    void setDirectory(const char* directory);
    // Whether `directory` can hold disk backups: a directory this process can
    // write, with a path that fits; false, with the reason, when not.
    static bool checkDirectory(const char* directory, Failure& why);

    // A new slot holding `bytes` of content of the region `tag` on `device`
    // (`deviceName`: deviceText's); `host` serves a host backup (null: none
    // can be made). -1 (why) when it cannot be made.
    int open(const char* tag, uint8_t device, const char* deviceName, MemoryBackend* host,
             core::BackupKind kind, uint64_t bytes, Failure& why);
    // One paused allocation more (or a read of it) keeps the content of `slot`.
    void use(int slot) { ++slots_[slot].users; }
    // One less uses `slotPlusOne` - 1 (0: none, nothing to do); its content goes
    // with the last.
    void unuse(uint16_t slotPlusOne);
    uint32_t users(int slot) const { return slots_[slot].users; }
    core::BackupKind kind(int slot) const { return slots_[slot].kind; }
    Backup& content(int slot) { return slots_[slot].content(); }
    // The slot's order of opening (older slots have smaller numbers).
    uint64_t serial(int slot) const { return slots_[slot].serial; }
    // Pinned host memory the host backups hold now (a host budget's count).
    uint64_t hostBytes() const;
    // Moves a host backup's first `bytes` of content to a disk backup of its own
    // (the region `tag` on `device`, as open() names it), then lets the pinned
    // memory go; false (why), the host backup kept, when the disk one cannot be
    // made or written. Under the owner's operation lock, the slot's region busy.
    bool toDisk(int slot, const char* tag, const char* deviceName, uint64_t bytes, Failure& why);
    // Touches what a first pause writes of the store (a slot, a path), so that
    // the pause grows the process by nothing (Regions::warmLocked).
    void warm();

private:
    // A disk backup for `slot`'s content (its file named after the process, the
    // region and a count): false (why) when it cannot be made.
    bool openDisk(int slot, const char* tag, const char* deviceName, uint64_t bytes, Failure& why);

    struct Slot {
        bool used;
        core::BackupKind kind;
        uint32_t users;   // paused allocations whose content it holds
        uint64_t serial;  // when it was opened (opened_)
        DiskBackup disk;
        HostBackup host;
        Backup& content() {
            return kind == core::BackupKind::Disk ? static_cast<Backup&>(disk) : host;
        }
    };

    Slot slots_[kCapacity] = {};
    // The backups' file paths (DiskBackup's messages), apart from slots_: each
    // slot holds vtable pointers, which the loader writes into this static table
    // at every process start, whether or not a region is ever used; with 4 KiB of
    // path inside each slot, that wrote (and copied) 256 pages, 1 MiB, ~4 ms a
    // process here. Packed, the slots take 5 pages, and paths only the pages used.
    // Page-aligned: each path is one page, so warming the first (warm) is
    // warming all a first pause writes of it.
    alignas(4096) char paths_[kCapacity][DiskBackup::kPathBytes] = {};
    char directory_[3072] = "";
    uint64_t pauses_ = 0;  // numbers backup files
    uint64_t opened_ = 0;  // numbers slots in the order they were opened
};

}  // namespace memtool::collectors::control
