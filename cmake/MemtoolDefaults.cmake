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

# Warnings are errors where asked: the CI scripts configure every tree with
# -DMEMTOOL_WERROR=ON, so a new warning fails CI; a developer's build only warns.
option(MEMTOOL_WERROR "Treat compiler warnings as errors (the CI scripts turn it on)" OFF)
if(MEMTOOL_WERROR)
  add_compile_options(-Werror)
  # GCC 12's -Wmaybe-uninitialized misfires under -fsanitize=address on libstdc++'s
  # own code (the std::function inside std::regex's compiler): a warning there.
  if(MEMTOOL_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-error=maybe-uninitialized)
  endif()
endif()

# ccache, where it is installed, in front of every compile (a second tree, or a second
# run of CI, compiles only what changed). -DMEMTOOL_CCACHE=OFF, or a launcher of one's
# own (CMAKE_CXX_COMPILER_LAUNCHER), turns it off.
option(MEMTOOL_CCACHE "Compile through ccache when it is installed" ON)
if(MEMTOOL_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER AND NOT CMAKE_C_COMPILER_LAUNCHER)
  find_program(MEMTOOL_CCACHE_PROGRAM ccache)
  if(MEMTOOL_CCACHE_PROGRAM)
    set(CMAKE_C_COMPILER_LAUNCHER ${MEMTOOL_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${MEMTOOL_CCACHE_PROGRAM})
  endif()
endif()

# memtool_warn_shadow(<dir>...): -Wshadow on every target defined in these source
# directories and the directories below them (called after their add_subdirectory),
# without touching their CMakeLists; an error like any other under MEMTOOL_WERROR.
set(MEMTOOL_SHADOW_OPTIONS -Wshadow)
function(memtool_warn_shadow)
  foreach(dir IN LISTS ARGN)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        target_compile_options(${target} PRIVATE ${MEMTOOL_SHADOW_OPTIONS})
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    if(subdirs)
      memtool_warn_shadow(${subdirs})
    endif()
  endforeach()
endfunction()

# A library that goes into someone else's process (LD_PRELOAD, CUDA_INJECTION64_PATH,
# dlopen by the collector) exports only what it marks `default`: its prefixed extern "C"
# surface. Set on the static libraries linked into one as well, so nothing of theirs
# leaks either.
function(memtool_hide_symbols)
  set_target_properties(${ARGN} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
