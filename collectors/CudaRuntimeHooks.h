#pragma once
// The fallback route for CUDA memory: the CUDA runtime's allocation calls, hooked
// in the GOT of every module that imports them (PyTorch links libcudart
// dynamically). Used when CUPTI cannot be: the user's own CUDA_INJECTION64_PATH
// (nsys) holds the driver's one injection slot, or another CUPTI subscriber is
// active. It sees cudaMalloc & co. only, not driver calls made directly.

#include <cstddef>

#include "collectors/GotPatcher.h"

namespace memtool::collectors {

// The hooks; each forwards to the runtime's own function and records on success.
// Slots are patched only once the runtime-hook route is chosen, so a hook that
// runs is always meant to record.
const GotHook* cudaRuntimeHooks(size_t* count);

// libcudart itself (its internal calls are not the program's) and memtool's own
// libraries are never patched.
bool skipForCudaRuntimeHooks(const char* path);

}  // namespace memtool::collectors
