# -DMEMTOOL_CUDA=AUTO|ON|OFF: the CUDA parts (the CUPTI injection, its callback
# decoder and tests, the torch bridge, samples/cuda). AUTO builds them where a CUDA
# toolkit with CUPTI is found; ON makes a missing toolkit or CUPTI a configure error;
# OFF builds none. Sets MEMTOOL_CUDA_ENABLED and, when ON:
#   MEMTOOL_CUPTI_LIBRARY, MEMTOOL_CUPTI_LIBRARY_DIR   libcupti.so and its folder
#   memtool::cuda_headers                             cuda.h, cupti.h (as system headers)
# and FindCUDAToolkit's CUDA::* targets. MEMTOOL_CUPTI_LIBRARY and MEMTOOL_CUPTI_INCLUDE
# can be given to use a CUPTI outside the toolkit (pip's nvidia-cuda-cupti, say).

set(MEMTOOL_CUDA AUTO CACHE STRING "Build the CUDA parts: AUTO (where CUDA with CUPTI is found), ON, OFF")
set_property(CACHE MEMTOOL_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${MEMTOOL_CUDA}" _memtool_cuda_mode)
if(NOT _memtool_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "MEMTOOL_CUDA is '${MEMTOOL_CUDA}'; use AUTO, ON or OFF")
endif()

set(MEMTOOL_CUDA_ENABLED OFF)
set(_memtool_cuda_why "")
if(_memtool_cuda_mode STREQUAL "OFF")
  set(_memtool_cuda_why "MEMTOOL_CUDA=OFF")
else()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    set(_memtool_cuda_why "no CUDA toolkit found (set CUDAToolkit_ROOT to its folder)")
  else()
    find_library(MEMTOOL_CUPTI_LIBRARY NAMES cupti
      HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64
            ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/lib64 ${CUDAToolkit_TARGET_DIR}/lib)
    find_path(MEMTOOL_CUPTI_INCLUDE cupti.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include)
    if(NOT MEMTOOL_CUPTI_LIBRARY OR NOT MEMTOOL_CUPTI_INCLUDE)
      set(_memtool_cuda_why "the CUDA toolkit at ${CUDAToolkit_LIBRARY_ROOT} has no CUPTI (libcupti, cupti.h); "
                            "set MEMTOOL_CUPTI_LIBRARY and MEMTOOL_CUPTI_INCLUDE")
    endif()
  endif()
endif()

if(_memtool_cuda_why STREQUAL "")
  set(MEMTOOL_CUDA_ENABLED ON)
  get_filename_component(MEMTOOL_CUPTI_LIBRARY_DIR ${MEMTOOL_CUPTI_LIBRARY} DIRECTORY)
  add_library(memtool::cuda_headers INTERFACE IMPORTED)
  target_include_directories(memtool::cuda_headers INTERFACE ${CUDAToolkit_INCLUDE_DIRS} ${MEMTOOL_CUPTI_INCLUDE})
  message(STATUS "memtool: CUDA parts are built (CUDA ${CUDAToolkit_VERSION}, CUPTI ${MEMTOOL_CUPTI_LIBRARY})")
elseif(_memtool_cuda_mode STREQUAL "ON")
  message(FATAL_ERROR "MEMTOOL_CUDA=ON, but ${_memtool_cuda_why}. Use -DMEMTOOL_CUDA=AUTO to build without "
                      "the CUDA parts.")
else()
  message(STATUS "memtool: CUDA parts are not built: ${_memtool_cuda_why}")
endif()
