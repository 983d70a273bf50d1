// The LD_PRELOAD front end: the library constructor and destructor, dlopen and
// _exit interposition, and the exported C surface (collectors/CollectorApi.h).
// Everything here calls the collector (Collector.h) and nothing else.

#include <dlfcn.h>

#include <cstring>

#include "collectors/CallerDlopen.h"
#include "collectors/Collector.h"
#include "collectors/CollectorApi.h"
#include "collectors/CudaRuntimeHooks.h"
#include "collectors/NativeUnwinder.h"
#include "collectors/TorchBridgeLoader.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/Regions.h"

namespace memtool::collectors {
namespace {

__attribute__((constructor)) void collectorStart() {
    if (startCollector()) refreshModules();
}

__attribute__((destructor)) void collectorStop() { finishCollector(core::ExitKind::Normal); }

}  // namespace
}  // namespace memtool::collectors

extern "C" {

// noinline: the return address must be the program's call site.
__attribute__((visibility("default"), noinline)) void* dlopen(const char* file, int mode) {
    void* handle = memtool::collectors::dlopenForCaller(file, mode, __builtin_return_address(0));
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

__attribute__((visibility("default"))) void memtool_record_alloc(uint8_t device, uint64_t key,
                                                                 uint64_t size) {
    memtool::collectors::engine().alloc(device, key, size);
}

__attribute__((visibility("default"))) void memtool_record_free(uint64_t key) {
    memtool::collectors::engine().free(key);
}

__attribute__((visibility("default"))) void memtool_record_oom(uint8_t device, uint64_t size,
                                                               int torch, uint64_t device_free,
                                                               uint64_t device_total) {
    memtool::collectors::engine().oom(
        device, size, torch ? memtool::core::OomSource::Torch : memtool::core::OomSource::Allocator,
        device_free, device_total);
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

__attribute__((visibility("default"))) int memtool_enabled(void) {
    return memtool::collectors::collectorConfigured() ? 1 : 0;
}

__attribute__((visibility("default"))) size_t memtool_collector_path(char* out, size_t size) {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void*>(&memtool_enabled), &info) || !info.dli_fname || !out ||
        size == 0)
        return 0;
    const size_t n = std::strlen(info.dli_fname);
    if (n + 1 > size) return 0;
    std::memcpy(out, info.dli_fname, n + 1);
    return n;
}

__attribute__((visibility("default"))) int memtool_region_enter(const char* tag, int backup,
                                                                char* out, size_t size) {
    using namespace memtool::collectors;
    control::Failure why;
    if (backup < 0 || backup > 2) {
        why.set("memtool_region_enter: the backup kind is 0 none, 1 host or 2 disk");
    } else if (!collectorConfigured()) {
        why.set("this process does not run under `memtool run`: regions are not available");
    } else if (!tag ? control::regions().enterNone(why)
                    : control::regions().enter(tag, static_cast<memtool::core::BackupKind>(backup),
                                               why)) {
        return 0;
    }
    if (out && size) {
        std::strncpy(out, why.text, size - 1);
        out[size - 1] = '\0';
    }
    return -1;
}

__attribute__((visibility("default"))) void memtool_region_exit(void) {
    memtool::collectors::control::regions().exit();
}

__attribute__((visibility("default"))) int memtool_pause(const char* tag, char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::regions().pause(tag, memtool::core::ControlOrigin::Api);
    if (out && size) r.toJson("pause", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_resume(const char* tag, char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::regions().resume(tag, memtool::core::ControlOrigin::Api);
    if (out && size) r.toJson("resume", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) size_t memtool_regions(char* out, size_t size) {
    return memtool::collectors::control::regions().describe(out, size);
}

__attribute__((visibility("default"))) int memtool_yield(int to_host, char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::courtesy().yieldHere(to_host ? memtool::core::BackupKind::Host
                                                                : memtool::core::BackupKind::Disk);
    if (out && size) r.toJson("yield", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) int memtool_restore(char* out, size_t size) {
    using namespace memtool::collectors;
    control::OpResult r = control::courtesy().restoreHere();
    if (out && size) r.toJson("restore", out, size);
    return r.ok ? 0 : 1;
}

__attribute__((visibility("default"))) void memtool_flush(void) {
    memtool::collectors::engine().flush();
}

__attribute__((visibility("default"))) void memtool_safe_point(void) {
    memtool::collectors::control::safePoint().reached();
}

__attribute__((visibility("default"))) void* memtool_cuda_malloc(size_t size, int device, void*) {
    return memtool::collectors::pluggableMalloc(size, device);
}

__attribute__((visibility("default"))) void memtool_cuda_free(void* ptr, size_t, int, void*) {
    memtool::collectors::pluggableFree(ptr);
}
}
