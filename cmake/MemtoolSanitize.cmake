# -DMEMTOOL_SANITIZE=address,undefined (or thread) instruments memtool's own processes:
# the CLI and its libraries, the unit tests, the engine test and the end-to-end test
# driver. Never a library injected into another program (the collector, the CUPTI
# injection, the torch bridge, the test doubles that targets load) nor a target program
# (samples/, tests/fakes/): an ASan runtime has to be the first library of a process, so
# an instrumented preload library cannot go into an uninstrumented python. heaptrack does
# the same ("sanitizer builds for all but the injection tests").
#
# A library that both sides link is built twice from one source list
# (memtool_add_twin_library): <name>, instrumented, and <name>_uninstrumented, for the
# injected libraries. Without sanitizers the second is an alias of the first, so nothing
# is compiled twice.

set(MEMTOOL_SANITIZE "" CACHE STRING
    "Sanitizers for memtool's own processes: address,undefined or thread (empty: none)")

set(_memtool_sanitize_flags "")
if(MEMTOOL_SANITIZE)
  string(REPLACE "," ";" _memtool_sanitizers "${MEMTOOL_SANITIZE}")
  foreach(_s IN LISTS _memtool_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "MEMTOOL_SANITIZE: unknown sanitizer '${_s}' (use address,undefined or thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _memtool_sanitizers AND ("address" IN_LIST _memtool_sanitizers OR "leak" IN_LIST _memtool_sanitizers))
    message(FATAL_ERROR "MEMTOOL_SANITIZE: thread cannot be combined with address or leak; use two build directories")
  endif()
  # Every report is fatal: UBSan would otherwise print and go on, and a test would pass.
  set(_memtool_sanitize_flags -fsanitize=${MEMTOOL_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # The fuzzers' coverage, on the same targets only: an injected library with it would
  # need the __sanitizer_cov_* callbacks, which only a sanitizer runtime defines, in a
  # target process that has none.
  if(MEMTOOL_FUZZ)
    list(APPEND _memtool_sanitize_flags -fsanitize=fuzzer-no-link)
  endif()
  message(STATUS "memtool: sanitizers ${MEMTOOL_SANITIZE} for the CLI, its libraries and the tests; "
                 "the injected libraries stay uninstrumented")
endif()

# Instruments the given targets (memtool's own executables and the libraries only they
# link); nothing when MEMTOOL_SANITIZE is empty.
function(memtool_sanitize)
  if(NOT _memtool_sanitize_flags)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE ${_memtool_sanitize_flags})
    target_link_options(${target} PRIVATE ${_memtool_sanitize_flags})
  endforeach()
endfunction()

# memtool_add_twin_library(<name> SOURCES <file>...
#                          [COMPILE_OPTIONS <option>...] [LINK_LIBRARIES <lib>...])
# A static library for both sides: <name> (instrumented under MEMTOOL_SANITIZE) and
# <name>_uninstrumented (for the injected libraries). A LINK_LIBRARIES entry that has a
# twin of its own is linked as that twin's matching half. Symbols are hidden
# (memtool_hide_symbols): these objects end up inside injected libraries.
function(memtool_add_twin_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;COMPILE_OPTIONS;LINK_LIBRARIES")
  if(NOT arg_SOURCES OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memtool_add_twin_library(${name}): SOURCES is required; unknown: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(halves ${name})
  if(_memtool_sanitize_flags)
    list(APPEND halves ${name}_uninstrumented)
  endif()
  foreach(half IN LISTS halves)
    add_library(${half} STATIC ${arg_SOURCES})
    target_include_directories(${half} PUBLIC ${MEMTOOL_SOURCE_DIR})
    set(options ${arg_COMPILE_OPTIONS})
    if(_memtool_sanitize_flags AND NOT half MATCHES "_uninstrumented$")
      # UBSan's vptr check in the tests that link this half needs the typeinfo of its
      # classes; -fno-rtti is for what is injected into a target, not for this half.
      list(REMOVE_ITEM options -fno-rtti)
    endif()
    target_compile_options(${half} PRIVATE ${options})
    memtool_hide_symbols(${half})
    foreach(lib IN LISTS arg_LINK_LIBRARIES)
      if(half MATCHES "_uninstrumented$" AND TARGET ${lib}_uninstrumented)
        set(lib ${lib}_uninstrumented)
      endif()
      target_link_libraries(${half} PUBLIC ${lib})
    endforeach()
  endforeach()
  if(_memtool_sanitize_flags)
    memtool_sanitize(${name})
  else()
    add_library(${name}_uninstrumented ALIAS ${name})
  endif()
endfunction()
