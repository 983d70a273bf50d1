#pragma once
// The two places a paused region's content can go. Each pause of a region gets
// one, sized for all of its content up front, so that a pause that cannot
// complete (disk full, no pinned memory) fails before anything is released.

#include <sys/types.h>

#include <cstdint>

#include "collectors/control/MemoryBackend.h"

namespace memtool::collectors::control {

// A file of its own in the backup directory, unnamed from the start (O_TMPFILE;
// where the file system has none, made under a random name and unlinked at once),
// gone when the region is resumed, the pause fails or the process ends. Written and
// read with O_DIRECT where the filesystem allows it: content goes from the
// region's pages to the disk without passing through the page cache (which
// would keep a second copy in memory, the opposite of what a pause is for).
class DiskBackup final : public Backup {
public:
    DiskBackup() = default;
    DiskBackup(const DiskBackup&) = delete;
    DiskBackup& operator=(const DiskBackup&) = delete;
    ~DiskBackup() override { discard(); }

    // Creates the file (mode 0600, only the descriptor names it: nothing is left
    // behind when the process dies) and reserves `bytes` on disk. `name` (the
    // process and the region) is for messages, and the named fallback's prefix.
    // `pathBuffer` (kPathBytes) holds the file's path, for messages, until
    // discard(): the caller's, so that a table of backups need not hold 4 KiB
    // apiece (see BackupSlots::paths_).
    static constexpr size_t kPathBytes = 4096;
    bool open(const char* directory, const char* name, uint64_t bytes, char* pathBuffer,
              Failure& why);
    // open()'s way where the file system has no unnamed files: a random name after
    // `name` (mkostemp: exclusive, never through a file or link someone else put
    // there), unlinked before anything is written.
    bool openNamed(const char* directory, const char* name, uint64_t bytes, char* pathBuffer,
                   Failure& why);
    bool write(uint64_t offset, const void* data, uint64_t bytes, Failure& why) override;
    bool read(uint64_t offset, void* data, uint64_t bytes, Failure& why) override;
    void discard() override;
    bool intact() const override { return stillOurs(); }
    const char* path() const { return path_ ? path_ : ""; }
    bool direct() const { return direct_; }

private:
    // Reads the chunks of [offset, offset + bytes) whose index is `parity` modulo
    // `stride` (stride 1: all of it).
    bool readChunks(uint64_t offset, char* data, uint64_t bytes, uint64_t parity, uint64_t stride,
                    Failure& why) const;
    // Reserves `bytes` of disk for the open file; discards it when there is no room.
    bool claim(uint64_t bytes, Failure& why);
    // The descriptor still holds the file claim() saw (same device and inode):
    // a program can dup2() a file of its own over it, or close it by a raw
    // system call and open another that takes its number.
    bool stillOurs() const;
    bool checkOurs(Failure& why) const;  // false, saying so, where it does not

    int fd_ = -1;
    dev_t device_ = 0;
    ino_t inode_ = 0;
    bool direct_ = false;
    char* path_ = nullptr;
};

// Pinned host memory from the backend (a reused pool on CUDA): device copies go
// straight into it.
class HostBackup final : public Backup {
public:
    HostBackup() = default;
    HostBackup(const HostBackup&) = delete;
    HostBackup& operator=(const HostBackup&) = delete;
    ~HostBackup() override { discard(); }

    bool open(MemoryBackend& backend, uint8_t device, uint64_t bytes, Failure& why);
    void* directView(uint64_t offset, uint64_t) override {
        return static_cast<char*>(memory_) + offset;
    }
    bool write(uint64_t offset, const void* data, uint64_t bytes, Failure& why) override;
    bool read(uint64_t offset, void* data, uint64_t bytes, Failure& why) override;
    void discard() override;
    // The pinned buffer's size (0: none held).
    uint64_t bytes() const { return memory_ ? bytes_ : 0; }

private:
    MemoryBackend* backend_ = nullptr;
    uint8_t device_ = 0;
    void* memory_ = nullptr;
    uint64_t bytes_ = 0;  // the buffer's whole size (a reused one may be larger than asked)
};

}  // namespace memtool::collectors::control
