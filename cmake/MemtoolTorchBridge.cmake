# memtool_probe_torch(<python> <prefix>): can the torch bridge be built against the
# torch that <python> imports? It calls torch's C++ API, so it is built against one
# torch: a CUDA build, 2.2 or later, whose libc10_cuda.so has a GNU build id (the
# collector loads the bridge only into processes running that very library). Sets, in
# the caller's scope:
#   <prefix>_WHY_NOT         empty when it can be built, else the reason, for a message
#   <prefix>_DIR             torch's package folder (include/, lib/)
#   <prefix>_VERSION         e.g. 2.11.0
#   <prefix>_CUDA            torch.version.cuda
#   <prefix>_CXX11_ABI       0 or 1: torch's _GLIBCXX_USE_CXX11_ABI, which the bridge must match
#   <prefix>_C10 <prefix>_C10_CUDA    the libraries the bridge links
#   <prefix>_C10_CUDA_BUILD_ID        the build id of that libc10_cuda.so
function(memtool_probe_torch python prefix)
  set(why "")
  foreach(field DIR VERSION CUDA CXX11_ABI C10 C10_CUDA C10_CUDA_BUILD_ID)
    set(${field} "")
  endforeach()
  execute_process(
    COMMAND ${python} -c
      "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__.split('+')[0]); print(torch.version.cuda or ''); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    OUTPUT_VARIABLE info RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(why "${python} has no torch")
  else()
    string(REPLACE "\n" ";" info "${info}")
    list(GET info 0 DIR)
    list(GET info 1 VERSION)
    list(GET info 2 CUDA)
    list(GET info 3 CXX11_ABI)
    set(C10 ${DIR}/lib/libc10.so)
    set(C10_CUDA ${DIR}/lib/libc10_cuda.so)
    if(VERSION VERSION_LESS 2.2)
      set(why "torch ${VERSION} is older than 2.2")
    elseif(CUDA STREQUAL "" OR NOT EXISTS ${C10_CUDA} OR NOT EXISTS ${C10})
      set(why "torch ${VERSION} at ${DIR} is built without CUDA")
    else()
      find_program(MEMTOOL_READELF NAMES readelf)
      if(MEMTOOL_READELF)
        execute_process(COMMAND ${MEMTOOL_READELF} -n ${C10_CUDA} OUTPUT_VARIABLE notes ERROR_QUIET)
        string(REGEX MATCH "Build ID: ([0-9a-f]+)" match "${notes}")
        set(C10_CUDA_BUILD_ID "${CMAKE_MATCH_1}")
      endif()
      if(C10_CUDA_BUILD_ID STREQUAL "")
        set(why "no GNU build id could be read from ${C10_CUDA} (readelf)")
      endif()
    endif()
  endif()
  set(${prefix}_WHY_NOT "${why}" PARENT_SCOPE)
  foreach(field DIR VERSION CUDA CXX11_ABI C10 C10_CUDA C10_CUDA_BUILD_ID)
    set(${prefix}_${field} "${${field}}" PARENT_SCOPE)
  endforeach()
endfunction()
