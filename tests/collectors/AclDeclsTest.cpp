// The documentation's declarations (collectors/ascend/AclDocumented.h, what a
// build without the runtime's headers compiles against) against the headers
// torch_npu's wheel ships (scripts/acl-headers.sh): every layout and value memtool
// relies on is the same. The functions' prototypes are checked by this build
// itself: the backend, the hooks and the test double compile against the
// headers' declarations. Built only where the headers are (MEMTOOL_ACL_INCLUDE_DIR).
#include <gtest/gtest.h>

#include <cstddef>

#include "collectors/ascend/AclDecls.h"

namespace documented {
#define MEMTOOL_ACL_TYPES_ONLY 1
#include "collectors/ascend/AclDocumented.h"
#undef MEMTOOL_ACL_TYPES_ONLY
}  // namespace documented

namespace {

// The same member at the same place, of the same size.
#define MEMTOOL_SAME_MEMBER(type, member)                                           \
    static_assert(offsetof(documented::type, member) == offsetof(::type, member) && \
                      sizeof(documented::type::member) == sizeof(::type::member),   \
                  #type "::" #member " differs from the ACL headers")
#define MEMTOOL_SAME_VALUE(name) \
    static_assert(static_cast<long>(documented::name) == static_cast<long>(::name), #name)

static_assert(sizeof(documented::aclError) == sizeof(::aclError));
static_assert(sizeof(documented::aclrtPhysicalMemProp) == sizeof(::aclrtPhysicalMemProp));
MEMTOOL_SAME_MEMBER(aclrtPhysicalMemProp, handleType);
MEMTOOL_SAME_MEMBER(aclrtPhysicalMemProp, allocationType);
MEMTOOL_SAME_MEMBER(aclrtPhysicalMemProp, memAttr);
MEMTOOL_SAME_MEMBER(aclrtPhysicalMemProp, location);
MEMTOOL_SAME_MEMBER(aclrtPhysicalMemProp, reserve);
static_assert(sizeof(documented::aclrtMemLocation) == sizeof(::aclrtMemLocation));
MEMTOOL_SAME_MEMBER(aclrtMemLocation, id);
MEMTOOL_SAME_MEMBER(aclrtMemLocation, type);
MEMTOOL_SAME_VALUE(ACL_SUCCESS);
MEMTOOL_SAME_VALUE(ACL_ERROR_INVALID_PARAM);
MEMTOOL_SAME_VALUE(ACL_ERROR_REPEAT_INITIALIZE);
MEMTOOL_SAME_VALUE(ACL_ERROR_BAD_ALLOC);
MEMTOOL_SAME_VALUE(ACL_MEM_MALLOC_HUGE_FIRST);
MEMTOOL_SAME_VALUE(ACL_MEM_MALLOC_HUGE_ONLY);
MEMTOOL_SAME_VALUE(ACL_MEM_MALLOC_NORMAL_ONLY);
MEMTOOL_SAME_VALUE(ACL_MEMCPY_HOST_TO_HOST);
MEMTOOL_SAME_VALUE(ACL_MEMCPY_HOST_TO_DEVICE);
MEMTOOL_SAME_VALUE(ACL_MEMCPY_DEVICE_TO_HOST);
MEMTOOL_SAME_VALUE(ACL_MEMCPY_DEVICE_TO_DEVICE);
MEMTOOL_SAME_VALUE(ACL_DDR_MEM);
MEMTOOL_SAME_VALUE(ACL_HBM_MEM);
MEMTOOL_SAME_VALUE(ACL_HBM_MEM_HUGE);
MEMTOOL_SAME_VALUE(ACL_HBM_MEM_P2P_NORMAL);
MEMTOOL_SAME_VALUE(ACL_MEM_HANDLE_TYPE_NONE);
MEMTOOL_SAME_VALUE(ACL_MEM_ALLOCATION_TYPE_PINNED);
MEMTOOL_SAME_VALUE(ACL_MEM_LOCATION_TYPE_HOST);
MEMTOOL_SAME_VALUE(ACL_MEM_LOCATION_TYPE_DEVICE);
MEMTOOL_SAME_VALUE(ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM);
MEMTOOL_SAME_VALUE(ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED);

}  // namespace

// The comparisons above are compile-time; this says, in the test list, that the
// build that ran them had the headers.
TEST(AclDecls, TheDocumentedDeclarationsMatchTheHeaders) {
    EXPECT_EQ(MEMTOOL_HAVE_ACL_HEADERS, 1);
    EXPECT_EQ(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001);  // one macro, defined alike by both
}
