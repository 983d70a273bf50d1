// Synthetic CUPTI callbacks (CUpti_CallbackData around the driver's own parameter
// structs, as CUPTI hands them to the injection) through the decoder: what each
// subscribed driver call says, at its enter and exit sites.
#include <gtest/gtest.h>

#include <ostream>

#include "collectors/cuda/CuptiCallbackDecoder.h"

namespace memtool::collectors {
bool operator==(const DriverCall& a, const DriverCall& b) {
    return a.api == b.api && a.exit == b.exit && a.result == b.result && a.device == b.device &&
           a.pointer == b.pointer && a.size == b.size && a.handle == b.handle && a.host == b.host;
}
void PrintTo(const DriverCall& c, std::ostream* os) {
    *os << "{api " << static_cast<int>(c.api) << ", exit " << c.exit << ", result " << c.result
        << ", device " << c.device << ", pointer 0x" << std::hex << c.pointer << std::dec
        << ", size " << c.size << ", handle " << c.handle << ", host " << c.host << "}";
}
}  // namespace memtool::collectors

using namespace memtool::collectors;

namespace {

constexpr int kContextDevice = 1;
constexpr CUdeviceptr kDevicePtr = 0x7f0000200000;
constexpr uint64_t kHandle = 0x4242;

// What the injection's callback receives: `site`, `params`, and (at exit) the result.
template <typename P>
std::optional<DriverCall> decode(CUpti_CallbackId id, CUpti_ApiCallbackSite site, const P& params,
                                 CUresult* result = nullptr, int contextDevice = kContextDevice) {
    CUpti_CallbackData cb{};
    cb.callbackSite = site;
    cb.functionName = "synthetic";
    cb.functionParams = &params;
    cb.functionReturnValue = result;
    return decodeDriverCallback(id, cb, contextDevice);
}

CUresult success = CUDA_SUCCESS;
CUresult outOfMemory = CUDA_ERROR_OUT_OF_MEMORY;

DriverCall expected(DriverApi api, bool exit, uint64_t pointer, uint64_t size, int result = 0,
                    int device = kContextDevice, uint64_t handle = 0) {
    return DriverCall{.api = api,
                      .exit = exit,
                      .result = result,
                      .device = device,
                      .pointer = pointer,
                      .size = size,
                      .handle = handle};
}

}  // namespace

TEST(CuptiCallbackDecoder, MemAllocGivesItsSizeAtEnterAndItsPointerAtExit) {
    CUdeviceptr out = 0;
    cuMemAlloc_v2_params p{&out, 3000000};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, p),
              expected(DriverApi::MemAlloc, false, 0, 3000000));
    out = kDevicePtr;  // written by the driver before the exit callback
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, p, &success),
              expected(DriverApi::MemAlloc, true, kDevicePtr, 3000000));
}

TEST(CuptiCallbackDecoder, AFailedCallCarriesItsResult) {
    CUdeviceptr out = 0;
    cuMemAlloc_v2_params p{&out, 1ull << 40};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, p, &outOfMemory),
              expected(DriverApi::MemAlloc, true, 0, 1ull << 40, CUDA_ERROR_OUT_OF_MEMORY));
}

// A failed call need not write its outputs, and one given a null output pointer
// fails (CUDA_ERROR_INVALID_VALUE): nothing is read through them then.
TEST(CuptiCallbackDecoder, AFailedCallsOutputsAreNotRead) {
    CUresult invalid = CUDA_ERROR_INVALID_VALUE;
    cuMemAlloc_v2_params alloc{nullptr, 4096};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, alloc, &invalid),
              expected(DriverApi::MemAlloc, true, 0, 4096, CUDA_ERROR_INVALID_VALUE));
    size_t pitch = 512;
    cuMemAllocPitch_v2_params pitched{nullptr, &pitch, 500, 300, 4};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, CUPTI_API_EXIT, pitched, &invalid),
              expected(DriverApi::MemAllocPitch, true, 0, 0, CUDA_ERROR_INVALID_VALUE));
    cuMemHostAlloc_params host{nullptr, 4096, 0};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_API_EXIT, host, &invalid),
              expected(DriverApi::MemHostAlloc, true, 0, 4096, CUDA_ERROR_INVALID_VALUE));
    cuMemCreate_params create{nullptr, 2097152, nullptr, 0};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_EXIT, create, &invalid),
              expected(DriverApi::MemCreate, true, 0, 2097152, CUDA_ERROR_INVALID_VALUE));
    // Out of memory: a pointer was given, but what it holds is not the driver's.
    CUdeviceptr stale = kDevicePtr;
    cuMemAlloc_v2_params failed{&stale, 1ull << 40};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, failed, &outOfMemory),
              expected(DriverApi::MemAlloc, true, 0, 1ull << 40, CUDA_ERROR_OUT_OF_MEMORY));
}

TEST(CuptiCallbackDecoder, AnExitWithoutAReturnValueCountsAsSuccess) {
    CUdeviceptr out = kDevicePtr;
    cuMemAlloc_v2_params p{&out, 4096};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, p),
              expected(DriverApi::MemAlloc, true, kDevicePtr, 4096));
}

TEST(CuptiCallbackDecoder, PitchAllocationIsPitchTimesHeightKnownAtExit) {
    CUdeviceptr out = 0;
    size_t pitch = 0;
    cuMemAllocPitch_v2_params p{&out, &pitch, 500, 300, 4};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, CUPTI_API_ENTER, p),
              expected(DriverApi::MemAllocPitch, false, 0, 0));
    out = kDevicePtr;
    pitch = 512;  // the row width the driver chose, not the 500 bytes asked for
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, CUPTI_API_EXIT, p, &success),
              expected(DriverApi::MemAllocPitch, true, kDevicePtr, 512 * 300));
}

TEST(CuptiCallbackDecoder, ManagedAllocation) {
    CUdeviceptr out = kDevicePtr;
    cuMemAllocManaged_params p{&out, 2000000, CU_MEM_ATTACH_GLOBAL};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_API_EXIT, p, &success),
              expected(DriverApi::MemAllocManaged, true, kDevicePtr, 2000000));
}

TEST(CuptiCallbackDecoder, AsyncAllocationAndItsPerThreadStreamVariant) {
    CUdeviceptr out = kDevicePtr;
    cuMemAllocAsync_params legacy{&out, 500000, nullptr};
    cuMemAllocAsync_ptsz_params ptsz{&out, 600000, nullptr};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, CUPTI_API_ENTER, legacy),
              expected(DriverApi::MemAllocAsync, false, 0, 500000));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, CUPTI_API_EXIT, legacy, &success),
              expected(DriverApi::MemAllocAsync, true, kDevicePtr, 500000));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_API_EXIT, ptsz, &success),
              expected(DriverApi::MemAllocAsync, true, kDevicePtr, 600000));
}

TEST(CuptiCallbackDecoder, PoolAllocationAndItsPerThreadStreamVariant) {
    CUdeviceptr out = kDevicePtr;
    cuMemAllocFromPoolAsync_params legacy{&out, 700000, nullptr, nullptr};
    cuMemAllocFromPoolAsync_ptsz_params ptsz{&out, 800000, nullptr, nullptr};
    EXPECT_EQ(
        decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, CUPTI_API_EXIT, legacy, &success),
        expected(DriverApi::MemAllocFromPoolAsync, true, kDevicePtr, 700000));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, CUPTI_API_EXIT, ptsz,
                     &success),
              expected(DriverApi::MemAllocFromPoolAsync, true, kDevicePtr, 800000));
}

TEST(CuptiCallbackDecoder, PinnedHostAllocations) {
    alignas(64) static char pinned[64];
    void* out = pinned;
    const auto address = reinterpret_cast<uint64_t>(pinned);
    cuMemHostAlloc_params hostAlloc{&out, 1000000, CU_MEMHOSTALLOC_PORTABLE};
    cuMemAllocHost_v2_params allocHost{&out, 250000};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_API_EXIT, hostAlloc, &success),
              expected(DriverApi::MemHostAlloc, true, address, 1000000));
    EXPECT_EQ(
        decode(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, CUPTI_API_EXIT, allocHost, &success),
        expected(DriverApi::MemAllocHost, true, address, 250000));
}

TEST(CuptiCallbackDecoder, MemCreateOnADeviceCountsOnThatDevice) {
    CUmemGenericAllocationHandle out = 0;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 3;
    cuMemCreate_params p{&out, 2097152, &prop, 0};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_ENTER, p),
              expected(DriverApi::MemCreate, false, 0, 2097152, 0, 3));
    out = kHandle;
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_EXIT, p, &success),
              expected(DriverApi::MemCreate, true, 0, 2097152, 0, 3, kHandle));
}

// A host location (CUDA 12.2+: host memory through the VMM API, as NCCL's cuMem
// host buffers) is host memory; without a location the call keeps its context's.
TEST(CuptiCallbackDecoder, MemCreateOnTheHostIsHostMemory) {
    CUmemGenericAllocationHandle out = kHandle;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.id = 3;  // ignored by the driver for a host location
    for (CUmemLocationType where : {CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST_NUMA,
                                    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}) {
        prop.location.type = where;
        cuMemCreate_params p{&out, 2097152, &prop, 0};
        DriverCall host =
            expected(DriverApi::MemCreate, true, 0, 2097152, 0, kContextDevice, kHandle);
        host.host = true;
        EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_EXIT, p, &success), host)
            << where;
    }
    cuMemCreate_params noProp{&out, 2097152, nullptr, 0};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_EXIT, noProp, &success),
              expected(DriverApi::MemCreate, true, 0, 2097152, 0, kContextDevice, kHandle));
}

TEST(CuptiCallbackDecoder, FreesNameTheirPointerAtEnter) {
    alignas(64) static char pinned[64];
    cuMemFree_v2_params free{kDevicePtr};
    cuMemFreeAsync_params freeAsync{kDevicePtr + 4096, nullptr};
    cuMemFreeAsync_ptsz_params freeAsyncPtsz{kDevicePtr + 8192, nullptr};
    cuMemFreeHost_params freeHost{pinned};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_API_ENTER, free),
              expected(DriverApi::MemFree, false, kDevicePtr, 0));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, CUPTI_API_ENTER, freeAsync),
              expected(DriverApi::MemFreeAsync, false, kDevicePtr + 4096, 0));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, CUPTI_API_ENTER, freeAsyncPtsz),
              expected(DriverApi::MemFreeAsync, false, kDevicePtr + 8192, 0));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, CUPTI_API_ENTER, freeHost),
              expected(DriverApi::MemFreeHost, false, reinterpret_cast<uint64_t>(pinned), 0));
}

TEST(CuptiCallbackDecoder, ReleaseNamesItsHandle) {
    cuMemRelease_params p{kHandle};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, CUPTI_API_ENTER, p),
              expected(DriverApi::MemRelease, false, 0, 0, 0, kContextDevice, kHandle));
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, CUPTI_API_EXIT, p, &success),
              expected(DriverApi::MemRelease, true, 0, 0, 0, kContextDevice, kHandle));
}

TEST(CuptiCallbackDecoder, MapAndUnmapNameTheirRangeAndRetainItsAddressAndHandle) {
    cuMemMap_params map{kDevicePtr, 2097152, 0, kHandle, 0};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemMap, CUPTI_API_EXIT, map, &success),
              expected(DriverApi::MemMap, true, kDevicePtr, 2097152, 0, kContextDevice, kHandle));
    cuMemUnmap_params unmap{kDevicePtr, 4194304};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, CUPTI_API_ENTER, unmap),
              expected(DriverApi::MemUnmap, false, kDevicePtr, 4194304));
    CUmemGenericAllocationHandle out = kHandle;
    cuMemRetainAllocationHandle_params retain{&out, reinterpret_cast<void*>(kDevicePtr)};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, CUPTI_API_EXIT, retain,
                     &success),
              expected(DriverApi::MemRetain, true, kDevicePtr, 0, 0, kContextDevice, kHandle));
    // Not at enter, nor after a failure, nor through a null output.
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, CUPTI_API_ENTER, retain),
              expected(DriverApi::MemRetain, false, kDevicePtr, 0));
    CUresult invalid = CUDA_ERROR_INVALID_VALUE;
    cuMemRetainAllocationHandle_params nullOut{nullptr, reinterpret_cast<void*>(kDevicePtr)};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, CUPTI_API_EXIT, nullOut,
                     &invalid),
              expected(DriverApi::MemRetain, true, kDevicePtr, 0, CUDA_ERROR_INVALID_VALUE));
}

TEST(CuptiCallbackDecoder, AnUnknownContextDeviceStaysUnknown) {
    CUdeviceptr out = kDevicePtr;
    cuMemAlloc_v2_params p{&out, 4096};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, p, &success, -1),
              expected(DriverApi::MemAlloc, true, kDevicePtr, 4096, 0, -1));
}

TEST(CuptiCallbackDecoder, AnUnhandledCallbackIsNotDecoded) {
    cuMemcpy_params p{};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemcpy, CUPTI_API_ENTER, p), std::nullopt);
    cuMemGetInfo_v2_params info{};
    EXPECT_EQ(decode(CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2, CUPTI_API_EXIT, info, &success),
              std::nullopt);
}

// The list the injection subscribes to and the decoder agree: no subscribed call is
// dropped. Enter sites read no output pointer, so zeroed parameters are enough.
TEST(CuptiCallbackDecoder, EverySubscribedCallbackIsDecoded) {
    alignas(64) const unsigned char zeroed[256] = {};
    for (CUpti_CallbackId id : kDecodedDriverCallbacks)
        EXPECT_TRUE(decode(id, CUPTI_API_ENTER, zeroed).has_value()) << "callback id " << id;
}
