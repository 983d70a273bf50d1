# What the build needs from the system, each with the Debian package that provides it,
# so that a `pip install .` or a cmake on a machine without it stops with one line that
# says what to install (scripts/setup.sh --user installs them all).
#   memtool_require_package(<find_package name> <Debian package> [CONFIG])
#   memtool_require_pkg_config(<prefix> <module> <Debian package>)
#   memtool_require_library(<variable> <Debian package> <names>...)
function(memtool_missing what debian)
  # Indented: CMake prints it as one line instead of wrapping it.
  message(FATAL_ERROR "  memtool: ${what} is missing: install the Debian package ${debian} "
                      "(sudo apt-get install ${debian}; scripts/setup.sh --user installs every one)")
endfunction()

macro(memtool_require_package name debian)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    memtool_missing("${name}" "${debian}")
  endif()
endmacro()

macro(memtool_require_pkg_config prefix module debian)
  find_package(PkgConfig QUIET)
  if(NOT PKG_CONFIG_FOUND)
    memtool_missing("pkg-config" "pkg-config")
  endif()
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    memtool_missing("${module} (pkg-config)" "${debian}")
  endif()
endmacro()

macro(memtool_require_library variable debian)
  find_library(${variable} NAMES ${ARGN})
  if(NOT ${variable})
    memtool_missing("${ARGV2}" "${debian}")
  endif()
endmacro()
