#pragma once
// The hooks patched into PyTorch's own imports: libc10's CPU allocator
// (posix_memalign/free) and libtorch_cpu's shared memory (shm_open/mmap/munmap).
// They are the collector's hot path: no heap, no exceptions, a free reported
// before the real free. Nothing calls them but the patched slots, so they reach
// the engine and the pausable regions through the composition root's accessors
// (engine(), control::regions(), Collector.h); the preload library is linked with
// LTO, where those inline to the static objects' addresses.

#include <cstddef>

#include "collectors/preload/GotPatcher.h"

namespace memtool::collectors {

// libc10's posix_memalign and free, for its slots (libc10.so only).
const GotHook* allocatorHooks(size_t* count);
bool isAllocatorLibrary(const char* path);

// libtorch_cpu's shm_open, mmap, mmap64 and munmap, for its slots.
const GotHook* sharedMemoryHooks(size_t* count);
bool isSharedMemoryLibrary(const char* path);

// A fork child's: the shared memory its parent created is the parent's, mapped
// in the child or not. Only the child's thread runs.
void forgetCreatedSharedMemory();

// An address in the hooks' code: the collector's own frames are cut from stacks.
const void* allocatorHookCode();

}  // namespace memtool::collectors
