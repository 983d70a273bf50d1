// CUDA_INJECTION64_PATH entry point. The CUDA driver loads this library and calls
// InitializeInjection() when it initializes; from then on CUPTI calls back,
// synchronously on the calling thread, around every driver memory call, so the
// allocation's stack is still the caller's. This is the only file with raw CUPTI
// calls; what a callback says is CuptiCallbackDecoder's business, what a call means
// DriverCallTranslator's, and recording is the preload collector's (reached through
// its exported memtool_* surface, so both share one stream per process).
//
// Driver calls are seen whether the program calls the driver or the runtime, and
// also when it calls driver functions through pointers it looked up at run time
// (as PyTorch does), which LD_PRELOAD could not see.

#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "collectors/CollectorApi.h"
#include "collectors/cuda/CuptiCallbackDecoder.h"
#include "collectors/cuda/DriverCallTranslator.h"
#include "collectors/engine/NoDestroy.h"
#include "collectors/engine/Warn.h"

namespace memtool::collectors {
namespace {

MemtoolRecordAllocFn recordAlloc = nullptr;
MemtoolRecordFreeFn recordFree = nullptr;
MemtoolRecordOomFn recordOom = nullptr;
MemtoolTorchBridgeTryFn bridgeTry = nullptr;
MemtoolCudaMemoryReferencedFn memoryReferenced = nullptr;
// Callbacks come until the process is gone, static destruction included.
NoDestroy<DriverCallTranslator> translator;

struct CollectorSink : AllocationSink {
    void alloc(uint8_t device, uint64_t key, uint64_t size) override {
        recordAlloc(device, key, size);
    }
    void free(uint64_t key) override { recordFree(key); }
    void oom(uint8_t device, uint64_t size, bool torch, uint64_t deviceFree) override {
        if (recordOom) recordOom(device, size, torch ? 1 : 0, deviceFree, 0);
    }
};

void CUPTIAPI onDriverCall(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                           const void* data) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    uint32_t ordinal = 0;
    const int device = cb->context && cuptiGetDeviceId(cb->context, &ordinal) == CUPTI_SUCCESS
                           ? static_cast<int>(ordinal)
                           : -1;
    const std::optional<DriverCall> decoded = decodeDriverCallback(id, *cb, device);
    if (!decoded) return;
    const DriverCall& call = *decoded;
    // Before the process's device allocations (until it is settled): the torch
    // bridge attaches to PyTorch's caching allocator, whose request this is, so the
    // segment it is about to get is traced.
    if (!call.exit && bridgeTry &&
        (call.api == DriverApi::MemAlloc || call.api == DriverApi::MemCreate ||
         call.api == DriverApi::MemAllocAsync))
        bridgeTry();
    CollectorSink sink;
    translator.value.translate(call, sink);
    // A reference to mapped memory taken by someone (NCCL registering a buffer):
    // the collector says so when it is a region's.
    if (call.api == DriverApi::MemRetain && call.exit && call.result == CUDA_SUCCESS &&
        memoryReferenced)
        memoryReferenced(call.pointer);
}

}  // namespace
}  // namespace memtool::collectors

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    using namespace memtool::collectors;
    // The collector's C surface, in this process (memtool run preloads it).
    auto version = reinterpret_cast<MemtoolCollectorApiVersionFn>(
        dlsym(RTLD_DEFAULT, MEMTOOL_SYM_API_VERSION));
    if (!version || version() != MEMTOOL_COLLECTOR_API_VERSION) {
        warn(
            "the CUDA injection needs the memtool collector of the same version (use memtool run); "
            "CUDA memory "
            "is not tracked");
        return 1;  // the program runs on either way
    }
    auto attach =
        reinterpret_cast<MemtoolCudaAttachFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_CUDA_ATTACH));
    recordAlloc =
        reinterpret_cast<MemtoolRecordAllocFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_RECORD_ALLOC));
    recordFree =
        reinterpret_cast<MemtoolRecordFreeFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_RECORD_FREE));
    recordOom = reinterpret_cast<MemtoolRecordOomFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_RECORD_OOM));
    auto fallback =
        reinterpret_cast<MemtoolCudaFallbackFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_CUDA_FALLBACK));
    bridgeTry = reinterpret_cast<MemtoolTorchBridgeTryFn>(
        dlsym(RTLD_DEFAULT, MEMTOOL_SYM_TORCH_BRIDGE_TRY));
    memoryReferenced = reinterpret_cast<MemtoolCudaMemoryReferencedFn>(
        dlsym(RTLD_DEFAULT, MEMTOOL_SYM_CUDA_MEMORY_REFERENCED));
    if (!attach || !recordAlloc || !recordFree || !fallback) {
        warn(
            "the CUDA injection needs the memtool collector (use memtool run); CUDA memory is not "
            "tracked");
        return 1;
    }
    CUpti_SubscriberHandle subscriber;
    CUptiResult rc = cuptiSubscribe(&subscriber, onDriverCall, nullptr);
    if (rc != CUPTI_SUCCESS) {
        // Another subscriber (torch.profiler, nsys, a second tool) holds CUPTI: the
        // runtime API hooks take over, which see cudaMalloc & co. but not driver
        // calls made directly.
        const char* what = nullptr;
        cuptiGetResultString(rc, &what);
        char why[256];
        std::snprintf(
            why, sizeof why,
            "CUPTI is not available (%s): CUDA memory is recorded through runtime API hooks "
            "(cudaMalloc & co.; direct driver calls are not seen)",
            rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                ? "another subscriber is active"
                : (what ? what : "cuptiSubscribe failed"));
        warn(why);
        fallback(why);
        return 1;
    }
    for (CUpti_CallbackId id : kDecodedDriverCallbacks)
        cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    attach();
    return 1;
}
