#pragma once
// A CUPTI driver-API callback, decoded into the DriverCall that DriverCallTranslator
// accounts. Only CUDA and CUPTI header types here, no CUPTI call: the CUPTI front end
// (CuptiInjection.cpp) passes what CUPTI handed it, and unit tests pass synthetic
// callback data built from the driver's parameter structs (generated_cuda_meta.h).

#include <cupti.h>

#include <optional>

#include "collectors/cuda/DriverCallTranslator.h"

namespace memtool::collectors {

// The driver calls the injection subscribes to; decodeDriverCallback decodes each.
inline constexpr CUpti_CallbackId kDecodedDriverCallbacks[] = {
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
    CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};

// `contextDevice`: the ordinal of the callback context's device (-1: unknown), which
// the call counts on unless it names a device itself (cuMemCreate's location). The
// return value is read at the exit site, and output pointers there only when the
// call succeeded: a failed call need not have written them, nor have been given any. Empty for a
// callback id not in kDecodedDriverCallbacks.
std::optional<DriverCall> decodeDriverCallback(CUpti_CallbackId id, const CUpti_CallbackData& cb,
                                               int contextDevice);

}  // namespace memtool::collectors
