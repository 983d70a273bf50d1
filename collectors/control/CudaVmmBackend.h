#pragma once
// CUDA device memory through the driver's virtual-memory API: a region
// allocation is an address range (cuMemAddressReserve) with physical memory
// mapped behind it (cuMemCreate, cuMemMap, cuMemSetAccess). A pause unmaps and
// releases the physical memory and keeps the range, so a tensor's data_ptr()
// is the same after resume; sizes round up to the allocation granularity. The
// owning device and its peers (cuDeviceCanAccessPeer) get read/write access.
//
// Backups: host backup goes into pinned host memory from a reused pool (kept
// after a resume up to a limit, setHostPoolLimit: by default every buffer); disk
// backup streams through two pinned staging buffers, the device copy of one
// chunk overlapping the file write of the other. Copies run on a stream of the
// backend's own per device. The driver is found in the process (libcuda.so.1,
// loaded by the CUDA runtime), never linked; MEMTOOL_CUDA_DRIVER names another
// library for tests (tests/fakes/FakeCudaDriver.cpp emulates the API with host
// mappings).
//
// This is the only file besides the CUPTI injection that calls the driver.

#include <cstdint>

#include "collectors/control/MemoryBackend.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/Mutex.h"

namespace memtool::collectors::control {

class CudaVmmBackend final : public MemoryBackend {
public:
    // Disk backups stream in chunks this big, through two pinned buffers.
    static constexpr uint64_t kChunkBytes = 64ull << 20;
    // Another chunk size (torch_memory_saver's TMS_DISK_BACKUP_CHUNK_MB), set before
    // the first disk backup: a whole number of MiB.
    void setChunkBytes(uint64_t bytes) { chunkBytes_ = bytes; }

    constexpr CudaVmmBackend() = default;

    // Finds the driver; false (why) when the process has none.
    bool load(Failure& why);
    bool loaded() const { return api_ != nullptr; }

    const char* name() const override { return "cuda-vmm"; }
    uint64_t granularity(uint8_t device) override;
    bool supports(core::BackupKind) const override { return true; }

    bool reserve(uint8_t device, uint64_t bytes, uint64_t alignment, uint64_t* address,
                 Failure& why) override;
    bool map(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) override;
    bool unmap(uint8_t device, uint64_t address, uint64_t bytes, Failure& why) override;
    void release(uint8_t device, uint64_t address, uint64_t bytes) override;

    bool synchronize(uint8_t device, Failure& why) override;
    bool copyOut(uint8_t device, uint64_t address, uint64_t bytes, Backup& to, uint64_t offset,
                 Failure& why) override;
    bool copyIn(uint8_t device, uint64_t address, uint64_t bytes, Backup& from, uint64_t offset,
                Failure& why) override;

    // On the device, in the copies' stream, after them: the checksum kernel
    // (collectors/cuda/ChecksumKernel.cu, loaded from its PTX at the first call).
    bool checksum(uint8_t device, uint64_t address, uint64_t bytes, uint64_t* sum,
                  Failure& why) override;

    void* allocateHost(uint8_t device, uint64_t* bytes, Failure& why) override;
    void freeHost(uint8_t device, void* p, uint64_t bytes) override;
    void setHostPoolLimit(uint64_t bytes) override;
    uint64_t hostPoolBytes() override;
    uint64_t hostPoolLimit() override;
    bool deviceMemory(uint8_t device, uint64_t* free, uint64_t* total) override;

    struct Api;  // the driver's functions (CudaVmmBackend.cpp)

private:
    static constexpr int kMaxDevices = 64;
    static constexpr int kPoolSize = 64;
    struct PooledBuffer {
        void* memory;
        uint64_t bytes;
        uint8_t device;  // whose context it was pinned in (portable: any will do to free it)
    };

    // Makes `device`'s primary context current on this thread for the scope.
    class DeviceScope;
    struct CopyScope;
    bool enter(int ordinal, Failure& why);
    bool stream(int ordinal, void** out, Failure& why);
    bool staging(Failure& why);
    bool checksumKernel(int ordinal, Failure& why);
    // The devices (bits by ordinal) that can reach `ordinal`'s memory, asked once.
    uint64_t peersOf(int ordinal);
    // Frees a host backup's pinned memory (allocateHost's) now, in `device`'s context.
    void freePinned(uint8_t device, void* p, uint64_t bytes);
    uint64_t pooledLocked() const;

    Api* api_ = nullptr;
    Mutex mu_;  // everything below
    uint64_t granularity_[kMaxDevices] = {};
    uint64_t peers_[kMaxDevices] = {};
    uint64_t peersKnown_ = 0;  // bits by ordinal: peers_ holds the answer
    void* contexts_[kMaxDevices] = {};
    void* streams_[kMaxDevices] = {};
    PointerMap handles_;  // mapped address -> physical allocation handle
    PooledBuffer pool_[kPoolSize] = {};
    uint64_t poolLimit_ = UINT64_MAX;
    void* staging_[2] = {};  // chunkBytes_ each, pinned
    uint64_t chunkBytes_ = kChunkBytes;
    Mutex stagingMu_;                          // one streamed copy at a time
    bool kernelApi_ = false;                   // the driver has what the checksum kernel needs
    void* kernels_[kMaxDevices] = {};          // the checksum kernel per device (under mu_)
    uint64_t checksumSums_[kMaxDevices] = {};  // its result word per device
    Mutex checksumMu_;                         // one checksum at a time
};

}  // namespace memtool::collectors::control
