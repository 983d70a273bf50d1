#pragma once
// Ascend NPU memory through the ACL runtime's virtual-memory API, the NPU twin of
// CudaVmmBackend: a region allocation is an address range (aclrtReserveMemAddress)
// with physical memory mapped behind it (aclrtMallocPhysical, aclrtMapMem). A
// pause unmaps and frees the physical memory and keeps the range, so a tensor's
// data_ptr() is the same after resume; sizes round up to the allocation
// granularity (aclrtMemGetAllocationGranularity; 2 MiB on current NPUs).
//
// Backups: host backup goes into pinned host memory (aclrtMallocHost), copied in
// one aclrtMemcpyAsync on the backend's own stream per device; disk backup
// streams through one pinned staging buffer, chunk by chunk (copy, then write).
// No pinned pool is kept after a resume (the CUDA backend's): its buffer is
// freed. The runtime is found in the process (libascendcl.so, loaded by
// torch_npu), never linked; MEMTOOL_ACL_LIBRARY names another library for tests
// (tests/fakes/FakeAscendCl.cpp emulates the API with host mappings).
//
// This is the only file that calls the ACL runtime's memory API (the hooks in
// collectors/ascend/ call the allocation functions they stand in for).

#include <cstdint>

#include "collectors/control/MemoryBackend.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/Mutex.h"

namespace memtool::collectors::control {

class AclVmmBackend final : public MemoryBackend {
public:
    // Disk backups stream in chunks this big, through one pinned buffer.
    static constexpr uint64_t kChunkBytes = 64ull << 20;

    constexpr AclVmmBackend() = default;

    // Finds the runtime; false (why) when the process has none.
    bool load(Failure& why);
    bool loaded() const { return api_ != nullptr; }

    const char* name() const override { return "acl-vmm"; }
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

    void* allocateHost(uint8_t device, uint64_t* bytes, Failure& why) override;
    void freeHost(uint8_t device, void* p, uint64_t bytes) override;
    bool deviceMemory(uint8_t device, uint64_t* free, uint64_t* total) override;

    struct Api;  // the runtime's functions (AclVmmBackend.cpp)

private:
    static constexpr int kMaxDevices = 16;

    // Makes `device`'s default context current on this thread for the scope.
    class DeviceScope;
    bool enter(int ordinal, Failure& why);
    bool stream(int ordinal, void** out, Failure& why);
    // One copy on the backend's stream, waited for (kind: an aclrtMemcpyKind).
    bool copyOnStream(void* to, const void* from, uint64_t bytes, int kind, void* stream,
                      Failure& why);
    // The pinned buffer disk backups stream through, made on first use (under stagingMu_).
    bool staging(Failure& why);

    Api* api_ = nullptr;
    Mutex mu_;  // everything below
    uint64_t granularity_[kMaxDevices] = {};
    void* contexts_[kMaxDevices] = {};
    void* streams_[kMaxDevices] = {};
    PointerMap handles_;       // mapped address -> physical memory handle
    void* staging_ = nullptr;  // kChunkBytes, pinned
    Mutex stagingMu_;          // one streamed copy at a time
};

}  // namespace memtool::collectors::control
