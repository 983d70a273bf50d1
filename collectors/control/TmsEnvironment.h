#pragma once
// torch_memory_saver's start-up environment, read as that library reads it, for
// programs that use it through memtool (python/memtool/torch_memory_saver.py):
//   TMS_INIT_ENABLE                 every thread starts inside the "default" region
//                                   (device memory only: CUDA allocations made outside
//                                   an explicit region are pausable)
//   TMS_INIT_ENABLE_CPU_BACKUP      ... kept in host memory while paused
//   TMS_INIT_ENABLE_DISK_BACKUP     ... kept on disk while paused (not both)
//   TMS_INIT_CPU_BACKUP_BACKEND     "pinned" or "mmap": either is memtool's host backup
//   TMS_DISK_BACKUP_CHUNK_MB        the chunk CUDA disk backups stream in, in MiB (1 to
//                                   4096; 0 is torch_memory_saver's default, 256)
// Booleans as torch_memory_saver takes them: 1 true TRUE yes YES, 0 false FALSE no
// NO; unset is false. Where torch_memory_saver ends the process on a value it does
// not take, memtool says so in one line and leaves TMS_INIT_ENABLE off.

#include <cstddef>
#include <cstdint>

#include "core/Protocol.h"

namespace memtool::collectors::control {

struct TmsInit {
    bool enable = false;  // TMS_INIT_ENABLE
    core::BackupKind backup = core::BackupKind::None;
    uint64_t diskChunkBytes = 0;  // TMS_DISK_BACKUP_CHUNK_MB; 0: unset (memtool's 64 MiB)
};

// Reads the variables through `lookup` (getenv, or a test's). False, with a
// one-line reason in `why` (at most `size` bytes), when one has a value
// torch_memory_saver refuses; `init` is then left disabled.
bool readTmsInit(const char* (*lookup)(const char*), TmsInit* init, char* why, size_t size);

}  // namespace memtool::collectors::control
