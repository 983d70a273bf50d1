# Compiler settings shared by memtool's build and by the GPU-side project that
# scripts/gpu-check.sh builds (scripts/gpu/CMakeLists.txt), so both compile the same
# sources the same way.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()
add_compile_options(-Wall -Wextra -Wno-unused-parameter)

# A library that goes into someone else's process (LD_PRELOAD, CUDA_INJECTION64_PATH,
# dlopen by the collector) exports only what it marks `default`: its prefixed extern "C"
# surface. Set on the static libraries linked into one as well, so nothing of theirs
# leaks either.
function(memtool_hide_symbols)
  set_target_properties(${ARGN} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
