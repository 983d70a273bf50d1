#include "collectors/preload/AllocatorHooks.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "collectors/Collector.h"
#include "collectors/control/ControlChannel.h"
#include "collectors/control/PausedAccess.h"
#include "collectors/control/Regions.h"
#include "collectors/engine/ModuleName.h"

namespace memtool::collectors {

namespace {

// ---- the allocator's hooks: libc10's DefaultCPUAllocator ---------------------------
// It calls posix_memalign and free itself, through its own GOT: hooking exactly
// those slots sees every CPU storage of any torch, and no other allocation or free
// in the process.
//
// Inside a pausable region (memtool.region), storages come from the collector's
// own pages instead, which a pause can release while their addresses stay.
int hookPosixMemalign(void** out, size_t alignment, size_t size) noexcept {
    control::startIfWanted();
    control::Regions& regions = control::regions();
    if (regions.threadInRegionForCpu(size)) {
        control::Failure why;
        void* p = regions.serve(core::kDeviceCpu, size, alignment, why);
        if (!p) {  // torch raises its out-of-memory error
            engine().oom(core::kDeviceCpu, size, core::OomSource::Allocator);
            return ENOMEM;
        }
        control::installPausedAccessHandler(regions);
        *out = p;
        return 0;
    }
    int rc = posix_memalign(out, alignment, size);
    if (rc == 0)
        engine().alloc(core::kDeviceCpu, reinterpret_cast<uint64_t>(*out), size);
    else if (rc == ENOMEM)  // torch raises its out-of-memory error with this size
        engine().oom(core::kDeviceCpu, size, core::OomSource::Allocator);
    return rc;
}

void hookFree(void* p) noexcept {
    if (!p) return free(p);
    control::startIfWanted();
    const uint64_t address = reinterpret_cast<uint64_t>(p);
    if (control::regions().release(address)) return;  // recorded and released there
    engine().free(address);
    free(p);
}

const GotHook kAllocatorHooks[] = {
    MEMTOOL_GOT_HOOK(posix_memalign, &hookPosixMemalign),
    MEMTOOL_GOT_HOOK(free, &hookFree),
};

// ---- shared memory: PyTorch's MapAllocator (libtorch_cpu) --------------------------
// share_memory_(), DataLoader batches and both sharing strategies make a storage's
// memory with shm_open(O_CREAT | O_EXCL), ftruncate and mmap(MAP_SHARED) of that
// descriptor; the processes it is passed to map it again (a descriptor received,
// or the name opened without O_CREAT). Counting the mapping of a descriptor this
// process created, on the `shared` row, counts each storage once, in its creator.
// Descriptors are told apart from a reused number by their inode.
constexpr int kMaxShmFds = 4096;
std::atomic<uint64_t> gCreatedShm[kMaxShmFds];  // fd -> inode + 1 of a shm object made here
// One past the highest descriptor gCreatedShm ever noted: a fork child clears only
// that far. The table is 8 pages, untouched in most programs, and a child's write
// to each would be a page fault of its own, in every worker a pool or a DataLoader
// forks.
std::atomic<int> gCreatedShmEnd{0};

int hookShmOpen(const char* name, int oflag, mode_t mode) noexcept {
    const int fd = shm_open(name, oflag, mode);
    if (fd >= 0 && fd < kMaxShmFds) {
        struct stat st {};
        const bool created = (oflag & O_CREAT) && fstat(fd, &st) == 0;
        int end = gCreatedShmEnd.load(std::memory_order_relaxed);
        while (end <= fd && !gCreatedShmEnd.compare_exchange_weak(end, fd + 1)) {
        }
        gCreatedShm[fd].store(created ? static_cast<uint64_t>(st.st_ino) + 1 : 0);
    }
    return fd;
}

bool createdHere(int fd) {
    if (fd < 0 || fd >= kMaxShmFds) return false;
    const uint64_t inode = gCreatedShm[fd].load(std::memory_order_relaxed);
    struct stat st {};
    return inode != 0 && fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) + 1 == inode;
}

void* hookMmap64(void* address, size_t length, int prot, int flags, int fd,
                 off64_t offset) noexcept {
    void* p = mmap64(address, length, prot, flags, fd, offset);
    if (p != MAP_FAILED && (flags & MAP_SHARED) && createdHere(fd))
        engine().alloc(core::kDeviceShared, reinterpret_cast<uint64_t>(p), length);
    return p;
}

int hookMunmap(void* address, size_t length) noexcept {
    engine().free(reinterpret_cast<uint64_t>(address));  // before another mapping can take it
    return munmap(address, length);
}

const GotHook kSharedMemoryHooks[] = {
    MEMTOOL_GOT_HOOK(shm_open, &hookShmOpen),
    MEMTOOL_GOT_HOOK(mmap64, &hookMmap64),
    MEMTOOL_GOT_HOOK(mmap, &hookMmap64),
    MEMTOOL_GOT_HOOK(munmap, &hookMunmap),
};

}  // namespace

const GotHook* allocatorHooks(size_t* count) {
    *count = sizeof kAllocatorHooks / sizeof kAllocatorHooks[0];
    return kAllocatorHooks;
}

bool isAllocatorLibrary(const char* path) { return fileNameStartsWith(path, "libc10.so"); }

const GotHook* sharedMemoryHooks(size_t* count) {
    *count = sizeof kSharedMemoryHooks / sizeof kSharedMemoryHooks[0];
    return kSharedMemoryHooks;
}

bool isSharedMemoryLibrary(const char* path) { return fileNameStartsWith(path, "libtorch_cpu.so"); }

void forgetCreatedSharedMemory() {
    const int shmEnd = gCreatedShmEnd.load(std::memory_order_relaxed);
    for (int fd = 0; fd < shmEnd; ++fd) gCreatedShm[fd].store(0, std::memory_order_relaxed);
    gCreatedShmEnd.store(0, std::memory_order_relaxed);
}

const void* allocatorHookCode() { return reinterpret_cast<const void*>(&hookFree); }

}  // namespace memtool::collectors
