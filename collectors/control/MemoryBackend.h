#pragma once
// The one seam between pausable regions and a kind of memory. Region logic
// (tags, states, backups, accounting: Regions.h) is written once above it; each
// backend is one file that alone calls its vendor's API: CPU pages (mmap,
// mprotect, madvise), CUDA's virtual-memory API (cuMemAddressReserve, cuMemCreate,
// cuMemMap, ...). An Ascend NPU backend would fill the same seam with
// aclrtReserveMemAddress / aclrtMallocPhysical / aclrtMapMem / aclrtUnmapMem.
//
// Life of one allocation: reserve (addresses only) + map (physical memory behind
// them, accessible) when served; on pause copyOut (if backed up) + unmap (physical
// memory released, addresses kept, access refused); on resume map + copyIn; when
// freed unmap (if mapped) + release (addresses returned). Sizes are multiples of
// granularity().

#include <cstddef>
#include <cstdint>

#include "core/Protocol.h"

namespace memtool::collectors::control {

// A reason, for the one line the user reads.
struct Failure {
    char text[256] = "";
    void set(const char* a, const char* b = "", const char* c = "", const char* d = "");
};

// Where a pause puts a region's content: a file, or (CUDA) pinned host memory.
// Offsets and sizes are multiples of the backend's granularity.
class Backup {
public:
    virtual ~Backup() = default;
    // Host memory at `offset` that a device copy may write into (or read from)
    // directly, or null when content must go through write()/read().
    virtual void* directView(uint64_t offset, uint64_t bytes) { return nullptr; }
    virtual bool write(uint64_t offset, const void* data, uint64_t bytes, Failure& why) = 0;
    virtual bool read(uint64_t offset, void* data, uint64_t bytes, Failure& why) = 0;
    // Drops the content (after a resume, or when a pause could not complete).
    virtual void discard() = 0;
    // The content is still there to be read (a disk backup whose descriptor the
    // program took over is not).
    virtual bool intact() const { return true; }
};

class MemoryBackend {
public:
    virtual ~MemoryBackend() = default;
    virtual const char* name() const = 0;
    // Sizes are rounded up to this (bytes).
    virtual uint64_t granularity(uint8_t device) = 0;
    // Which backups its memory can have (BackupKind::None always).
    virtual bool supports(core::BackupKind kind) const = 0;
    // Whether freed memory may be kept mapped for reuse (Regions' cache): yes for
    // memory no one else caches; no where a caching allocator sits above (CUDA:
    // torch.cuda.empty_cache() must give memory back to the device).
    virtual bool keepsFreedMemory() const { return false; }

    virtual bool reserve(uint8_t device, uint64_t bytes, uint64_t alignment, uint64_t* address,
                         Failure& why) = 0;
    virtual bool map(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) = 0;
    virtual bool unmap(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) = 0;
    virtual void release(uint8_t device, uint64_t address, uint64_t bytes) = 0;

    // Waits until no work of the device can still touch its memory.
    virtual bool synchronize(uint8_t device, Failure& why) = 0;
    virtual bool copyOut(uint8_t device, uint64_t address, uint64_t bytes, Backup& to,
                         uint64_t offset, Failure& why) = 0;
    virtual bool copyIn(uint8_t device, uint64_t address, uint64_t bytes, Backup& from,
                        uint64_t offset, Failure& why) = 0;
    // A yield's first step: the memory stays readable but refuses writes until
    // unmap() (or map(), when the yield is called off), so that its backup is
    // what the memory holds. Threads that write meanwhile fault and wait
    // (PausedAccess). The default does nothing: a device whose own work cannot be
    // stopped this way is synchronized instead.
    virtual bool freeze(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) {
        return true;
    }
    // A resume with content: map() then copyIn(), where a backend that can makes
    // the memory accessible only once it is whole, so that no thread reads it half
    // restored.
    virtual bool mapFilled(uint8_t device, uint64_t address, uint64_t bytes, Backup& from,
                           uint64_t offset, Failure& why) {
        return map(device, address, bytes, why) &&
               copyIn(device, address, bytes, from, offset, why);
    }

    // core::Checksum.h's checksum of [address, address + bytes), computed where
    // the memory is (a device's in the stream its copies use, after them), for
    // a verified pause and its resume. False (why) where the backend cannot.
    virtual bool checksum(uint8_t device, uint64_t address, uint64_t bytes, uint64_t* sum,
                          Failure& why) {
        why.set(name(), " cannot checksum its memory");
        return false;
    }
    // checksum() reads the memory on the CPU, and may run beside a copyOut of
    // the same memory (a thread of its own: Regions::copyOutChecked).
    virtual bool checksumsOnHost() const { return false; }

    // Host memory for BackupKind::Host of `device`'s memory (pinned, for fast
    // device copies) of at least *bytes, which becomes its size (a reused buffer
    // may be larger: freeHost takes that size back); null where the backend has none.
    virtual void* allocateHost(uint8_t device, uint64_t* bytes, Failure& why) {
        why.set("this memory cannot be backed up to host memory");
        return nullptr;
    }
    virtual void freeHost(uint8_t device, void* p, uint64_t bytes) {}
    // Host memory freed by a resume may be kept for the next pause (pinning is
    // slow): at most `bytes` of it from now on, what is kept beyond it freed now.
    virtual void setHostPoolLimit(uint64_t bytes) {}
    // What is kept so, now, and the limit.
    virtual uint64_t hostPoolBytes() { return 0; }
    virtual uint64_t hostPoolLimit() { return 0; }

    // The device's free and total memory (all of its users'), where the backend
    // can tell; false otherwise.
    virtual bool deviceMemory(uint8_t device, uint64_t* free, uint64_t* total) { return false; }
};

}  // namespace memtool::collectors::control
