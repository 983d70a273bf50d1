#pragma once
// The ACL runtime's types, values and functions memtool uses, as the public ACL
// runtime documentation gives them (CANN Community Edition 8.0 to 9.0, "aclrt"
// API reference; checked against CANN's open runtime headers, hicann/runtime
// 681ef76): what collectors/ascend/AclDecls.h declares in a build without the
// runtime's own headers. Include AclDecls.h, not this file.
//
// Types and values (MEMTOOL_ACL_TYPES_ONLY: these alone, for
// tests/collectors/AclDeclsTest.cpp, which compares them with the headers')
// come first; the functions after them.

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int aclError;
typedef void* aclrtStream;
typedef void* aclrtContext;
typedef void* aclrtDrvMemHandle;

// Return codes the backend and the hooks tell apart (the rest are reported as numbers).
inline constexpr aclError ACL_SUCCESS = 0;
inline constexpr aclError ACL_ERROR_INVALID_PARAM = 100000;
inline constexpr aclError ACL_ERROR_REPEAT_INITIALIZE = 100002;
inline constexpr aclError ACL_ERROR_BAD_ALLOC = 200000;
// The runtime's codes are macros in its headers (error_codes/rt_error_codes.h).
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
} aclrtMemMallocPolicy;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
} aclrtMemcpyKind;

typedef enum aclrtMemAttr {
    ACL_DDR_MEM = 0,
    ACL_HBM_MEM = 1,
    ACL_DDR_MEM_HUGE = 2,
    ACL_DDR_MEM_NORMAL = 3,
    ACL_HBM_MEM_HUGE = 4,
    ACL_HBM_MEM_NORMAL = 5,
    ACL_DDR_MEM_P2P_HUGE = 6,
    ACL_DDR_MEM_P2P_NORMAL = 7,
    ACL_HBM_MEM_P2P_HUGE = 8,
    ACL_HBM_MEM_P2P_NORMAL = 9,
} aclrtMemAttr;

typedef enum aclrtMemHandleType {
    ACL_MEM_HANDLE_TYPE_NONE = 0,
} aclrtMemHandleType;

typedef enum aclrtMemAllocationType {
    ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

typedef enum aclrtMemLocationType {
    ACL_MEM_LOCATION_TYPE_HOST = 0,
    ACL_MEM_LOCATION_TYPE_DEVICE = 1,
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
    uint32_t id;
    aclrtMemLocationType type;
} aclrtMemLocation;

typedef struct aclrtPhysicalMemProp {
    aclrtMemHandleType handleType;
    aclrtMemAllocationType allocationType;
    aclrtMemAttr memAttr;
    aclrtMemLocation location;
    uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
} aclrtMemGranularityOptions;

#ifndef MEMTOOL_ACL_TYPES_ONLY
aclError aclInit(const char* configPath);
const char* aclGetRecentErrMsg();

aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtGetDevice(int32_t* deviceId);
aclError aclrtGetDeviceCount(uint32_t* count);
aclError aclrtGetCurrentContext(aclrtContext* context);
aclError aclrtSetCurrentContext(aclrtContext context);
aclError aclrtCreateStream(aclrtStream* stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtSynchronizeDevice();

// Device memory as torch_npu's caching allocator takes it (aclrtMallocAlign32
// through dlsym), and the plain calls programs make.
aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtMallocAlign32(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtMallocCached(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void* devPtr);
aclError aclrtMallocHost(void** hostPtr, size_t size);
aclError aclrtFreeHost(void* hostPtr);
aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total);

// Virtual memory: reserved addresses, physical memory mapped behind them.
aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment, void* expectPtr,
                                uint64_t flags);
aclError aclrtReleaseMemAddress(void* virPtr);
aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                             const aclrtPhysicalMemProp* prop, uint64_t flags);
aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
aclError aclrtMapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags);
aclError aclrtUnmapMem(void* virPtr);
aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                          aclrtMemGranularityOptions option, size_t* granularity);

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind);
aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream);

#endif  // MEMTOOL_ACL_TYPES_ONLY

}  // extern "C"
