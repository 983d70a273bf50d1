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

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMTOOL_COLLECTOR_API_VERSION 2

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

#ifdef __cplusplus
}
#endif

// The symbol names, for dlsym.
#define MEMTOOL_SYM_API_VERSION "memtool_collector_api_version"
#define MEMTOOL_SYM_RECORD_ALLOC "memtool_record_alloc"
#define MEMTOOL_SYM_RECORD_FREE "memtool_record_free"
#define MEMTOOL_SYM_CUDA_ATTACH "memtool_cuda_attach"
#define MEMTOOL_SYM_CUDA_FALLBACK "memtool_cuda_fallback"
#define MEMTOOL_SYM_TORCH_BRIDGE_TRY "memtool_torch_bridge_try"
