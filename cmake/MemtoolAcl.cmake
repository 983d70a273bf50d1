# The Ascend runtime's headers, where given (scripts/acl-headers.sh unpacks those
# torch_npu's wheel ships; scripts/setup.sh passes them):
#   MEMTOOL_ACL_INCLUDE_DIR   the folder holding acl/acl_rt.h (empty: none)
#   memtool::acl_headers      an interface target: the folder as system headers and
#                             MEMTOOL_HAVE_ACL_HEADERS=1, which collectors/ascend/
#                             AclDecls.h reads; without it, AclDecls.h declares what
#                             memtool uses from the documentation.
set(MEMTOOL_ACL_INCLUDE_DIR "" CACHE PATH "Folder with the ACL headers (acl/acl_rt.h), e.g. from scripts/acl-headers.sh")
add_library(memtool_acl_headers INTERFACE)
add_library(memtool::acl_headers ALIAS memtool_acl_headers)
if(MEMTOOL_ACL_INCLUDE_DIR)
  if(NOT EXISTS "${MEMTOOL_ACL_INCLUDE_DIR}/acl/acl_rt.h")
    message(FATAL_ERROR "MEMTOOL_ACL_INCLUDE_DIR=${MEMTOOL_ACL_INCLUDE_DIR} has no acl/acl_rt.h")
  endif()
  file(STRINGS "${MEMTOOL_ACL_INCLUDE_DIR}/acl/acl_rt.h" _acl_version REGEX "define ACL_(MAJOR|MINOR|PATCH)_VERSION")
  string(REGEX REPLACE "[^0-9;]" "" _acl_version "${_acl_version}")
  string(REPLACE ";" "." _acl_version "${_acl_version}")
  message(STATUS "ACL headers: ${MEMTOOL_ACL_INCLUDE_DIR} (ACL ${_acl_version})")
  target_include_directories(memtool_acl_headers SYSTEM INTERFACE "${MEMTOOL_ACL_INCLUDE_DIR}")
  target_compile_definitions(memtool_acl_headers INTERFACE MEMTOOL_HAVE_ACL_HEADERS=1)
else()
  message(STATUS "ACL headers: none (the documentation's declarations, collectors/ascend/AclDecls.h)")
endif()
