// The LD_PRELOAD front end: the library constructor and destructor, dlopen and
// _exit interposition, and the exported C surface (collectors/CollectorApi.h).
// Everything here calls the collector (Collector.h) and nothing else.

#include <dlfcn.h>

#include "collectors/Collector.h"
#include "collectors/CollectorApi.h"
#include "collectors/NativeUnwinder.h"
#include "collectors/TorchBridgeLoader.h"

namespace memtool::collectors {
namespace {

__attribute__((constructor)) void collectorStart() {
    if (startCollector()) refreshModules();
}

__attribute__((destructor)) void collectorStop() { finishCollector(core::ExitKind::Normal); }

}  // namespace
}  // namespace memtool::collectors

extern "C" {

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
    void* handle = memtool::collectors::realDlopen(file, mode);
    if (handle) memtool::collectors::refreshModules();
    return handle;
}

// os._exit() and friends skip destructors; end the stream first so that the trace
// is complete and nothing buffered is lost.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    using Fn = void (*)(int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "_exit"));
    memtool::collectors::finishCollector(memtool::core::ExitKind::Immediate);
    real(status);
    __builtin_unreachable();
}

__attribute__((visibility("default"))) int memtool_collector_api_version(void) {
    return MEMTOOL_COLLECTOR_API_VERSION;
}

__attribute__((visibility("default"))) void memtool_record_alloc(uint8_t device, uint64_t key, uint64_t size) {
    memtool::collectors::engine().alloc(device, key, size);
}

__attribute__((visibility("default"))) void memtool_record_free(uint64_t key) {
    memtool::collectors::engine().free(key);
}

__attribute__((visibility("default"))) int memtool_cuda_attach(void) {
    return memtool::collectors::attachCuda() ? 1 : 0;
}

__attribute__((visibility("default"))) void memtool_cuda_fallback(const char* why) {
    memtool::collectors::fallBackToCudaRuntimeHooks(why);
}

__attribute__((visibility("default"))) void memtool_torch_bridge_try(void) {
    memtool::collectors::tryAttachTorchBridge();
}
}
