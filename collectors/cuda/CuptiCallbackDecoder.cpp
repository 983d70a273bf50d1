#include "collectors/cuda/CuptiCallbackDecoder.h"

namespace memtool::collectors {
namespace {

template <typename P>
const P& params(const CUpti_CallbackData& cb) {
    return *static_cast<const P*>(cb.functionParams);
}

// Whether the driver wrote through the output pointer `out`: at the exit site of
// a call that succeeded. A failed call leaves it unwritten, and it may be null
// (CUDA_ERROR_INVALID_VALUE): it is not read then.
template <typename T>
bool wrote(const DriverCall& call, const T* out) {
    return call.exit && call.result == CUDA_SUCCESS && out != nullptr;
}

// Fills `call` from the callback's parameters; false for a callback id not handled here.
bool describe(CUpti_CallbackId id, const CUpti_CallbackData& cb, DriverCall& call) {
    switch (id) {
        case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
            const auto& p = params<cuMemAlloc_v2_params>(cb);
            call.api = DriverApi::MemAlloc;
            call.size = p.bytesize;
            if (wrote(call, p.dptr)) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
            const auto& p = params<cuMemAllocPitch_v2_params>(cb);
            call.api = DriverApi::MemAllocPitch;
            if (wrote(call, p.dptr) && wrote(call, p.pPitch)) {
                call.pointer = *p.dptr;
                call.size = static_cast<uint64_t>(*p.pPitch) * p.Height;
            }
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
            const auto& p = params<cuMemAllocManaged_params>(cb);
            call.api = DriverApi::MemAllocManaged;
            call.size = p.bytesize;
            if (wrote(call, p.dptr)) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
            // The _ptsz variant has the same leading fields.
            const auto& p = params<cuMemAllocAsync_params>(cb);
            call.api = DriverApi::MemAllocAsync;
            call.size = p.bytesize;
            if (wrote(call, p.dptr)) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
            const auto& p = params<cuMemAllocFromPoolAsync_params>(cb);
            call.api = DriverApi::MemAllocFromPoolAsync;
            call.size = p.bytesize;
            if (wrote(call, p.dptr)) call.pointer = *p.dptr;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
            const auto& p = params<cuMemHostAlloc_params>(cb);
            call.api = DriverApi::MemHostAlloc;
            call.size = p.bytesize;
            if (wrote(call, p.pp)) call.pointer = reinterpret_cast<uint64_t>(*p.pp);
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
            const auto& p = params<cuMemAllocHost_v2_params>(cb);
            call.api = DriverApi::MemAllocHost;
            call.size = p.bytesize;
            if (wrote(call, p.pp)) call.pointer = reinterpret_cast<uint64_t>(*p.pp);
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
            const auto& p = params<cuMemCreate_params>(cb);
            call.api = DriverApi::MemCreate;
            call.size = p.size;
            if (p.prop && p.prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
                call.device = p.prop->location.id;
            // Host memory made through the VMM API (NCCL's cuMem host buffers).
            call.host = p.prop && (p.prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
                                   p.prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                                   p.prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
            if (wrote(call, p.handle)) call.handle = *p.handle;
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
        case CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle: {
            const auto& p = params<cuMemRetainAllocationHandle_params>(cb);
            call.api = DriverApi::MemRetain;
            call.pointer = reinterpret_cast<uint64_t>(p.addr);
            if (wrote(call, p.handle)) call.handle = *p.handle;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
            const auto& p = params<cuMemMap_params>(cb);
            call.api = DriverApi::MemMap;
            call.pointer = p.ptr;
            call.size = p.size;
            call.handle = p.handle;
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
            const auto& p = params<cuMemUnmap_params>(cb);
            call.api = DriverApi::MemUnmap;
            call.pointer = p.ptr;
            call.size = p.size;
            return true;
        }
        default:
            return false;
    }
}

}  // namespace

std::optional<DriverCall> decodeDriverCallback(CUpti_CallbackId id, const CUpti_CallbackData& cb,
                                               int contextDevice) {
    DriverCall call;
    call.exit = cb.callbackSite == CUPTI_API_EXIT;
    if (call.exit && cb.functionReturnValue)
        call.result = *static_cast<const CUresult*>(cb.functionReturnValue);
    call.device = contextDevice;
    if (!describe(id, cb, call)) return std::nullopt;
    return call;
}

}  // namespace memtool::collectors
