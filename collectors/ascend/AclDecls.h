#pragma once
// The few types and functions of Ascend's ACL runtime (libascendcl.so) that
// memtool calls or serves. Built against the runtime's own headers where the
// build has them (MEMTOOL_HAVE_ACL_HEADERS: scripts/acl-headers.sh unpacks those
// torch_npu 2.6.0.post5's wheel ships, ACL 1.15.0; cmake/MemtoolAcl.cmake);
// else declared here from the public ACL runtime documentation (CANN Community
// Edition 8.0 to 9.0, "aclrt" API reference), checked against CANN's open
// runtime headers (hicann/runtime 681ef76) and, in a build with the headers, by
// tests/collectors/AclDeclsTest.cpp. Only layouts and values every documented
// version shares are used; libascendcl.so is loaded at run time, never linked
// (control/AclVmmBackend.cpp, ascend/AclHooks.cpp).
//
// tests/fakes/FakeAscendCl.cpp implements them over host memory.

#if MEMTOOL_HAVE_ACL_HEADERS
#include <acl/acl.h>

// Not in ACL 1.15.0's headers (newer ones declare it the same way): looked up
// at run time, 2 MiB where the runtime lacks it.
extern "C" aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                                     aclrtMemGranularityOptions option,
                                                     size_t* granularity);
#else
#include "collectors/ascend/AclDocumented.h"
#endif
