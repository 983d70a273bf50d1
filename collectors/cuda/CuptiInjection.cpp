// CUDA_INJECTION64_PATH entry point. The CUDA driver loads this library and calls
// InitializeInjection() when it initializes; from then on CUPTI calls back,
// synchronously on the calling thread, around every driver memory call, so the
// allocation's stack is still the caller's. This is the only file with raw CUPTI
// calls; what a call means is DriverCallTranslator's business, and recording is
// the preload collector's (reached through its exported memtool_* surface, so
// both share one stream per process).
//
// Driver calls are seen whether the program calls the driver or the runtime, and
// also when it calls driver functions through pointers it looked up at run time
// (as PyTorch does), which LD_PRELOAD could not see.

#include <cuda.h>
#include <cupti.h>  // with generated_cuda_meta.h: the driver calls' parameter structs
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "collectors/CollectorApi.h"
#include "collectors/Warn.h"
#include "collectors/cuda/DriverCallTranslator.h"

namespace memtool::collectors {
namespace {

MemtoolRecordAllocFn recordAlloc = nullptr;
MemtoolRecordFreeFn recordFree = nullptr;
MemtoolTorchBridgeTryFn bridgeTry = nullptr;

struct CollectorSink : AllocationSink {
    void alloc(uint8_t device, uint64_t key, uint64_t size) override { recordAlloc(device, key, size); }
    void free(uint64_t key) override { recordFree(key); }
};

const CUpti_CallbackId kCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
};

template <typename P>
const P& params(const CUpti_CallbackData* cb) {
    return *static_cast<const P*>(cb->functionParams);
}

// Fills `call` from the callback; false for a callback id this file does not handle.
bool describe(CUpti_CallbackId id, const CUpti_CallbackData* cb, DriverCall& call) {
    const bool exit = call.exit;
    switch (id) {
        case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
            const auto& p = params<cuMemAlloc_v2_params>(cb);
            call.api = DriverApi::MemAlloc;
            call.size = p.bytesize;
            if (exit) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
            const auto& p = params<cuMemAllocPitch_v2_params>(cb);
            call.api = DriverApi::MemAllocPitch;
            if (exit) {
                call.pointer = *p.dptr;
                call.size = static_cast<uint64_t>(*p.pPitch) * p.Height;
            }
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
            const auto& p = params<cuMemAllocManaged_params>(cb);
            call.api = DriverApi::MemAllocManaged;
            call.size = p.bytesize;
            if (exit) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
            // The _ptsz variant has the same leading fields.
            const auto& p = params<cuMemAllocAsync_params>(cb);
            call.api = DriverApi::MemAllocAsync;
            call.size = p.bytesize;
            if (exit) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
            const auto& p = params<cuMemAllocFromPoolAsync_params>(cb);
            call.api = DriverApi::MemAllocFromPoolAsync;
            call.size = p.bytesize;
            if (exit) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
            const auto& p = params<cuMemHostAlloc_params>(cb);
            call.api = DriverApi::MemHostAlloc;
            call.size = p.bytesize;
            if (exit) call.pointer = reinterpret_cast<uint64_t>(*p.pp);
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
            const auto& p = params<cuMemAllocHost_v2_params>(cb);
            call.api = DriverApi::MemAllocHost;
            call.size = p.bytesize;
            if (exit) call.pointer = reinterpret_cast<uint64_t>(*p.pp);
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
            const auto& p = params<cuMemCreate_params>(cb);
            call.api = DriverApi::MemCreate;
            call.size = p.size;
            if (p.prop && p.prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) call.device = p.prop->location.id;
            if (exit) call.handle = *p.handle;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
            call.api = DriverApi::MemFree;
            call.pointer = params<cuMemFree_v2_params>(cb).dptr;
            return true;
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
            call.api = DriverApi::MemFreeAsync;
            call.pointer = params<cuMemFreeAsync_params>(cb).dptr;
            return true;
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
            call.api = DriverApi::MemFreeHost;
            call.pointer = reinterpret_cast<uint64_t>(params<cuMemFreeHost_params>(cb).p);
            return true;
        case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
            call.api = DriverApi::MemRelease;
            call.handle = params<cuMemRelease_params>(cb).handle;
            return true;
        default:
            return false;
    }
}

void CUPTIAPI onDriverCall(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    DriverCall call;
    call.exit = cb->callbackSite == CUPTI_API_EXIT;
    if (call.exit && cb->functionReturnValue) call.result = *static_cast<const CUresult*>(cb->functionReturnValue);
    uint32_t ordinal = 0;
    if (cb->context && cuptiGetDeviceId(cb->context, &ordinal) == CUPTI_SUCCESS) call.device = static_cast<int>(ordinal);
    if (!describe(id, cb, call)) return;
    // Before the process's device allocations (until it is settled): the torch
    // bridge attaches to PyTorch's caching allocator, whose request this is, so the
    // segment it is about to get is traced.
    if (!call.exit && bridgeTry &&
        (call.api == DriverApi::MemAlloc || call.api == DriverApi::MemCreate || call.api == DriverApi::MemAllocAsync))
        bridgeTry();
    CollectorSink sink;
    translateDriverCall(call, sink);
}

}  // namespace
}  // namespace memtool::collectors

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    using namespace memtool::collectors;
    // The collector's C surface, in this process (memtool run preloads it).
    auto version = reinterpret_cast<MemtoolCollectorApiVersionFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_API_VERSION));
    if (!version || version() != MEMTOOL_COLLECTOR_API_VERSION) {
        warn("the CUDA injection needs the memtool collector of the same version (use memtool run); CUDA memory "
             "is not tracked");
        return 1;  // the program runs on either way
    }
    auto attach = reinterpret_cast<MemtoolCudaAttachFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_CUDA_ATTACH));
    recordAlloc = reinterpret_cast<MemtoolRecordAllocFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_RECORD_ALLOC));
    recordFree = reinterpret_cast<MemtoolRecordFreeFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_RECORD_FREE));
    auto fallback = reinterpret_cast<MemtoolCudaFallbackFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_CUDA_FALLBACK));
    bridgeTry = reinterpret_cast<MemtoolTorchBridgeTryFn>(dlsym(RTLD_DEFAULT, MEMTOOL_SYM_TORCH_BRIDGE_TRY));
    if (!attach || !recordAlloc || !recordFree || !fallback) {
        warn("the CUDA injection needs the memtool collector (use memtool run); CUDA memory is not tracked");
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
        std::snprintf(why, sizeof why,
                      "CUPTI is not available (%s): CUDA memory is recorded through runtime API hooks "
                      "(cudaMalloc & co.; direct driver calls are not seen)",
                      rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "another subscriber is active"
                                                                           : (what ? what : "cuptiSubscribe failed"));
        warn(why);
        fallback(why);
        return 1;
    }
    for (CUpti_CallbackId id : kCallbacks) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    attach();
    return 1;
}
