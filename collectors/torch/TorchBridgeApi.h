#pragma once
// The C surface between the preload collector and the torch bridge
// (libmemtool_torch_bridge.so). The bridge is built against one torch; the
// collector loads it only into a process whose libc10_cuda.so is that very build
// (same GNU build id), because it calls into torch's C++ ABI.

#include <stdint.h>

extern "C" {

// What the bridge records through: the collector's own tracker, so pool events
// share the process's stream and carry the caller's stacks.
struct MemtoolBridgeHost {
    uint32_t version;  // kMemtoolBridgeApiVersion
    void (*alloc)(uint8_t device, uint64_t key, uint64_t size);
    void (*free)(uint64_t key);
    void (*warn)(const char* text);
    // The caching allocator raised its out-of-memory error for `size` bytes on
    // `device` (a wire code) with `deviceFree` bytes free (version 2).
    void (*oom)(uint8_t device, uint64_t size, uint64_t deviceFree);
    // A note for the stream (version 3): core::kNoteGraphPool as a private pool
    // first appears.
    void (*note)(const char* key, const char* text);
};

// Results of memtool_torch_bridge_attach.
enum {
    kMemtoolBridgeAttached = 1,
    kMemtoolBridgeNotYet = 0,    // the caching allocator is not initialized yet; try again later
    kMemtoolBridgeRefused = -1,  // cannot attach (it said why through host->warn); do not try again
};

// Exported by the bridge.
// The hex GNU build id of the libc10_cuda.so the bridge was built against.
typedef const char* (*MemtoolBridgeBuildIdFn)(void);
// memtool_torch_bridge_torch_version: the version of that torch ("2.14.1"),
// for the warning when the process runs another (optional: older bridges lack it).
typedef const char* (*MemtoolBridgeTorchVersionFn)(void);
typedef int (*MemtoolBridgeAttachFn)(const MemtoolBridgeHost* host);
// memtool_torch_bridge_empty_cache: the caching allocator's emptyCache (optional:
// older bridges lack it).
typedef void (*MemtoolBridgeEmptyCacheFn)(void);
// memtool_torch_bridge_release_workspaces: lets cuBLAS's workspaces go (they are
// blocks of the caching allocator; the next cuBLAS call makes them again); 1 when
// it did, 0 when this torch has no way (optional: older bridges lack it).
typedef int (*MemtoolBridgeReleaseWorkspacesFn)(void);
}

inline constexpr uint32_t kMemtoolBridgeApiVersion = 3;
