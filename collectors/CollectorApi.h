#pragma once
// The collector's exported C surface: what other code in the profiled process
// (the CUPTI injection, the torch bridge's host, the `memtool` Python package,
// a LibTorch program) may call in libmemtool_collector.so. Every caller finds
// these with dlsym(RTLD_DEFAULT, ...) in the running process, never by loading
// a second copy of the collector.
//
// Versioned: a caller checks memtool_collector_api_version() against the
// version it was built for. A change that an older caller would misuse bumps it.
// C only (no C++ types cross the boundary), so callers built with another
// compiler, standard library or ABI setting can use it.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMTOOL_COLLECTOR_API_VERSION 3

// The version of this surface the loaded collector implements.
int memtool_collector_api_version(void);
typedef int (*MemtoolCollectorApiVersionFn)(void);

// ---- allocation events (any thread, any time; cheap no-ops while not profiling)
// `device` is a wire device code (core/PROTOCOL.md); `key` an address or a key with
// the protocol's tag bits. Sizes in bytes.
void memtool_record_alloc(uint8_t device, uint64_t key, uint64_t size);
void memtool_record_free(uint64_t key);
typedef void (*MemtoolRecordAllocFn)(uint8_t device, uint64_t key, uint64_t size);
typedef void (*MemtoolRecordFreeFn)(uint64_t key);
// An allocation of `size` bytes on `device` that failed for want of memory, with
// the calling thread's stacks. `torch`: PyTorch's caching allocator raised its
// out-of-memory error (1) rather than the allocation call failing (0);
// `device_free`, `device_total`: the device's bytes then, 0 when unknown.
void memtool_record_oom(uint8_t device, uint64_t size, int torch, uint64_t device_free,
                        uint64_t device_total);
typedef void (*MemtoolRecordOomFn)(uint8_t device, uint64_t size, int torch, uint64_t device_free,
                                   uint64_t device_total);

// ---- the CUDA injection (collectors/cuda/CuptiInjection.cpp)
// CUPTI subscribed: CUDA memory is recorded from now on. 1 when the process is
// being profiled, 0 otherwise.
int memtool_cuda_attach(void);
typedef int (*MemtoolCudaAttachFn)(void);
// CUPTI could not subscribe (`why`): record CUDA memory through the runtime hooks.
void memtool_cuda_fallback(const char* why);
typedef void (*MemtoolCudaFallbackFn)(const char* why);
// Before each CUDA device allocation until settled: attach the torch bridge.
void memtool_torch_bridge_try(void);
typedef void (*MemtoolTorchBridgeTryFn)(void);
// Someone other than memtool took a reference to the VMM memory mapped at
// `address` (cuMemRetainAllocationHandle, as NCCL's buffer registration does):
// when it is a region's, the user is told once that a pause does not carry
// such a registration along.
void memtool_cuda_memory_referenced(uint64_t address);
typedef void (*MemtoolCudaMemoryReferencedFn)(uint64_t address);

// 1 when this process runs under `memtool run` (the collector is configured):
// regions and control are available. 0 when the library is merely loaded.
int memtool_enabled(void);
// ---- memtool.track (python/memtool/_track.py): profiling from inside -------------
// In a process memtool run did not start, with this library loaded by dlopen:
// starts a stream to the companion `memtool run --track PID` listening at
// `socket`, with `options` (MEMTOOL_OPTIONS' text) and the disk backups' directory
// (null: none), patching what is loaded now. 0 when recording began; 1 with the
// reason in `out` when not (a track already runs, the process runs under memtool
// run, nothing memtool tracks is loaded).
int memtool_track_start(const char* socket, const char* options, const char* backup_dir, char* out,
                        size_t size);
// Ends the track: the stream's end is sent, its control thread is gone, and the
// hooks are taken out (unless regions still hold memory, which `out` then says),
// or with `keep_hooks` left in place, idle, for the next track (block after block:
// pytest's tests) until memtool_track_unhook. 0 when a track ended; 1 when none ran.
int memtool_track_stop(int keep_hooks, char* out, size_t size);
// No track runs: the hooks a memtool_track_stop(1, ...) left come out. 0 when they
// did; 1 (the reason in `out`) when a track runs.
int memtool_track_unhook(char* out, size_t size);

// ---- memtool attach (cli/attach): profiling a process already running ---------
// Called by `memtool attach` on the process's main thread, which it stopped with
// ptrace at any point, with this library just loaded by dlopen: starts a track
// as memtool_track_start does (the same arguments but the reason), with Python
// tracking from the main thread's next bytecode on (a pending call); memtool's
// Python package, for `memtool ctl PID tensors`, is loaded from `python_package`
// (the directory holding memtool/) when first needed. The track ends when memtool
// attach sends "detach" down the stream. Returns 0 when recording began; 1 a
// track or attach runs already; 2 the process runs under memtool run; 3 the
// socket path cannot be used; 4 nothing memtool tracks is loaded.
int memtool_attach_start(const char* socket, const char* options, const char* backup_dir,
                         const char* python_package);

// The collector library's own path (for torch's pluggable allocator, which loads
// allocator functions by file name). Returns its length; 0 when unknown.
size_t memtool_collector_path(char* out, size_t size);

// ---- nn.Module scopes (python/memtool/_modules.py; collectors/stacks/ModuleScopes.h)
// A scope's id for `label` ("layer1.0.conv1 (Conv2d)") in `phase` (1 forward, 2
// backward); 0 when there is no room for more (the process's first 65,535 only).
uint32_t memtool_module_scope(const char* label, int phase);
// The calling thread's allocations are in scope `id` from now on (0: none): their
// Python stacks end in a frame naming it, while scopes are on.
void memtool_module_scope_set(uint32_t id);
// Scopes on (1: from now on, what threads set before counts no more) or off (0).
void memtool_module_scopes_on(int on);

// ---- pausable regions (python/memtool; collectors/control/Regions.h) --------------
// backup: 0 none (content discarded on pause), 1 host (pinned host memory; CUDA
// memory only), 2 disk. Errors and results are written into `out` (NUL-terminated,
// at most `size` bytes): a one-line reason, or a JSON object.
//
// Enters the region `tag` on the calling thread: its allocations, until the
// matching exit, are served from pausable memory, each kept with `backup` while
// paused (one tag may hold several kinds). backup | MEMTOOL_REGION_DEVICE_ONLY: CPU
// allocations pass the region by, as torch_memory_saver's regions do. A NULL tag
// enters "no region": allocations until the matching exit are the program's own,
// inside a region too. 0 on success, -1 with the reason in `out`.
#define MEMTOOL_REGION_DEVICE_ONLY 0x100
// backup | MEMTOOL_REGION_VERIFY: the tag's pauses checksum each backed-up
// allocation and its resumes check it (memtool run --verify, for every tag); a
// mismatch fails the resume, naming the allocation.
#define MEMTOOL_REGION_VERIFY 0x200
int memtool_region_enter(const char* tag, int backup, char* out, size_t size);
void memtool_region_exit(void);
// Pause or resume every allocation of `tag` (NULL: every tag). Returns 0 when it
// worked (or there was nothing to do: the JSON's "changed" says), 1 when it failed
// (the JSON's "message" says why and what was left as it was). The JSON has ok,
// changed, bytes, regions, allocations, seconds, message.
int memtool_pause(const char* tag, char* out, size_t size);
int memtool_resume(const char* tag, char* out, size_t size);
// Where disk backups go from now on (`memtool run --backup-dir` until then): a
// directory this process can write. 0 on success, -1 with the reason in `out`.
int memtool_set_backup_dir(const char* directory, char* out, size_t size);
// Host backups' pinned memory that a resume keeps for the next pause: at most
// `max_bytes` from now on (UINT64_MAX: every buffer, `memtool run --host-pool`'s
// default), what is kept beyond it freed now. Returns the bytes kept.
uint64_t memtool_set_host_pool(uint64_t max_bytes);
// The most pinned host memory host backups and the host pool may hold from now
// on (UINT64_MAX: no budget, the default; `memtool run --host-budget`): a pause
// whose region's host backup would go beyond it puts that region on disk.
void memtool_set_host_budget(uint64_t bytes);
// Device memory a new CUDA region allocation must leave free (0: none): one
// that would leave less fails as out of memory (torch_memory_saver's
// memory_margin_bytes).
void memtool_set_memory_margin(uint64_t bytes);
// Copies `bytes` of a paused region's memory at `address` (a paused tensor's
// data) from its backup, disk or host, into `dst`; the region stays paused.
// 0 on success, -1 with the reason in `out` (not region memory, not paused,
// paused without a backup, past its allocation's end).
int memtool_read_backup(uint64_t address, void* dst, uint64_t bytes, char* out, size_t size);
// The regions as a JSON array (tag, device, bytes, resident_bytes, paused_bytes,
// state, backup). Returns its length, or 0 when it does not fit in `size`.
size_t memtool_regions(char* out, size_t size);

// ---- courtesy (collectors/control/Courtesy.h) ----------------------------------------
// Yields every region's memory at this point of the program's choosing (CPU memory
// to disk; CUDA memory to host when to_host, else disk), whatever each region's own
// backup says; the program must not touch it until memtool_restore. JSON results
// as memtool_pause's; 0 when it worked (or there was nothing to do), 1 when not.
int memtool_yield(int to_host, char* out, size_t size);
int memtool_restore(char* out, size_t size);
// Sends the records the collector holds to `memtool run` now: a program that asks
// memtool run about itself (memtool.snapshot, memtool.report_tensors) calls it
// first, so that the answer covers everything it did until then.
void memtool_flush(void);
// A safe point the program offers (programs without a Python interpreter: call it
// in the main loop, between steps). While `memtool ctl PID yield` waits for one,
// the call parks here until `memtool ctl PID restore`. Cheap otherwise.
void memtool_safe_point(void);

// PyTorch's pluggable-allocator functions (torch.cuda.memory.CUDAPluggableAllocator
// with this library's path), for the `torch` hook mode: a MemPool per region
// whose segments come from pausable memory. `stream` is a cudaStream_t. Outside a
// region they fall back to cudaMalloc/cudaFree.
void* memtool_cuda_malloc(size_t size, int device, void* stream);
void memtool_cuda_free(void* ptr, size_t size, int device, void* stream);
// The same for torch_npu (torch_npu.npu.memory.NPUPluggableAllocator): `stream` is
// an aclrtStream; outside a region they fall back to aclrtMalloc/aclrtFree.
void* memtool_npu_malloc(size_t size, int device, void* stream);
void memtool_npu_free(void* ptr, size_t size, int device, void* stream);

#ifdef __cplusplus
}
#endif

// The symbol names, for dlsym.
#define MEMTOOL_SYM_API_VERSION "memtool_collector_api_version"
#define MEMTOOL_SYM_RECORD_ALLOC "memtool_record_alloc"
#define MEMTOOL_SYM_RECORD_FREE "memtool_record_free"
#define MEMTOOL_SYM_RECORD_OOM "memtool_record_oom"
#define MEMTOOL_SYM_CUDA_ATTACH "memtool_cuda_attach"
#define MEMTOOL_SYM_CUDA_FALLBACK "memtool_cuda_fallback"
#define MEMTOOL_SYM_TORCH_BRIDGE_TRY "memtool_torch_bridge_try"
#define MEMTOOL_SYM_CUDA_MEMORY_REFERENCED "memtool_cuda_memory_referenced"
