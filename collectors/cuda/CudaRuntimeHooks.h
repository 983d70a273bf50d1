#pragma once
// The fallback route for CUDA memory: the CUDA runtime's allocation calls, hooked
// in the GOT of every module that imports them (PyTorch links libcudart
// dynamically). Used when CUPTI cannot be: the user's own CUDA_INJECTION64_PATH
// (nsys) holds the driver's one injection slot, or another CUPTI subscriber is
// active. It sees cudaMalloc & co. only, not driver calls made directly.

#include <cstddef>
#include <cstdint>

#include "collectors/preload/GotPatcher.h"

namespace memtool::collectors {

class Engine;
namespace control {
class Regions;
}  // namespace control

// Hands the hooks the engine they record into and the regions they serve
// (startCollector, before any slot is patched or the C surface can be called).
void bindCudaRuntimeHooks(Engine& engine, control::Regions& regions);

// Whether CUDA memory is recorded through these hooks (not CUPTI): from the
// options, or the CUDA injection's fallback. Read by the hooks and the module
// scan, which patches every module's slots once it is on.
void setCudaRuntimeRecording(bool on);
bool cudaRuntimeRecording();

// A reference to the VMM memory at `address` taken outside memtool: said once
// when it is a region's (memtool_cuda_memory_referenced).
void regionMemoryReferenced(uint64_t address);

// The hooks; each forwards to the runtime's own function (or, for a thread inside
// a pausable region, serves VMM memory) and records on success when the
// runtime-hook route is on (cudaRuntimeRecording()). Every module's slots are
// patched once that route is chosen.
const GotHook* cudaRuntimeHooks(size_t* count);
// The subset libc10_cuda.so is always patched with: its device allocations and
// frees, so that pausable regions work whichever route records CUDA memory.
const GotHook* cudaRegionHooks(size_t* count);

// The torch hook mode's allocator functions (memtool_cuda_malloc/free).
void* pluggableMalloc(size_t size, int device);
void pluggableFree(void* p);

// libcudart itself (its internal calls are not the program's) and memtool's own
// libraries are never patched.
bool skipForCudaRuntimeHooks(const char* path);

}  // namespace memtool::collectors
