#pragma once
// Ascend NPU memory as the ACL runtime (libascendcl.so) hands it out: the
// allocation calls a program makes, recorded on npu:N with their stacks, and
// served from pausable regions for a thread inside one (NPU VMM memory,
// control/AclVmmBackend.h). Two routes reach the hooks, both needed for
// torch_npu: its caching allocator frees with aclrtFree through its own import
// (a GOT slot, patched like libc10's), but allocates with aclrtMallocAlign32
// obtained from dlopen("libascendcl.so") + dlsym(handle, ...), which LD_PRELOAD
// cannot override. So every module's dlsym slot is patched too, once the runtime
// is loaded: a lookup of a served name that finds libascendcl's function gets
// the hook, any other lookup goes to the C library's dlsym untouched (RTLD_NEXT
// and RTLD_DEFAULT through a tail jump, so that it sees its real caller).

#include <cstddef>
#include <cstdint>

#include "collectors/preload/GotPatcher.h"

namespace memtool::collectors {

class Engine;
namespace control {
class Regions;
}  // namespace control

// Hands the hooks the engine they record into and the regions they serve
// (startCollector, before any slot is patched).
void bindAclHooks(Engine& engine, control::Regions& regions);

// The hooks for modules that import the runtime's allocation functions
// (patched where a module needs libascendcl), and the dlsym hook (every module,
// once the runtime is loaded).
const GotHook* aclImportHooks(size_t* count);
const GotHook* aclDlsymHook();

// Whether `path` is the runtime itself, and the modules never patched for it
// (the runtime's internal calls are not the program's; memtool's own; the
// loader and C library, which implement dlsym).
bool isAclRuntime(const char* path);
bool skipForAclHooks(const char* path);

// The torch hook mode's allocator functions for torch_npu's NPUPluggableAllocator
// (memtool_npu_malloc/free): its callbacks' signatures.
void* aclPluggableMalloc(size_t size, int device, void* stream);
void aclPluggableFree(void* p, size_t size, int device, void* stream);

}  // namespace memtool::collectors
