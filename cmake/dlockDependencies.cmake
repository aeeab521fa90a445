# cmake/dlockDependencies.cmake: finds what the dlock library links and names
# each by an imported target. The build (CMakeLists.txt) and the installed
# package (dlockConfig.cmake, beside which this file is installed) both
# include it, so a consumer links exactly what the library was built with:
#
#   always                Threads::Threads, OpenSSL::Crypto, OpenSSL::SSL
#                         (dlock::tx's HTTPS)
#   DLOCK_WITH_REDIS      dlock::hiredis
#   DLOCK_WITH_SQLITE     SQLite::SQLite3 (CMake's FindSQLite3)
#   DLOCK_WITH_POSTGRES   dlock::libpq
#   DLOCK_WITH_ZOOKEEPER  dlock::zookeeper_mt (the C client's threaded build)
#   DLOCK_WITH_ETCD       gRPC::grpc++, protobuf::libprotobuf (gRPC's and
#                         protobuf's own CMake packages)
#
# Set before including it: DLOCK_WITH_<BACKEND> (ON/OFF) and
# _dlock_dependency_mode: "build" (a missing dependency stops the configure)
# or "package" (find_package(dlock) fails with a message: the includer checks
# dlock_FOUND afterwards).
#
# hiredis, libpq and the ZooKeeper C client are found by header and library
# (Debian's hiredis ships a CMake file that sets variables only, CMake's
# FindPostgreSQL also wants the server's headers, the ZooKeeper C client ships
# none). Their cache variables (HIREDIS_INCLUDE_DIR, HIREDIS_LIBRARY,
# LIBPQ_INCLUDE_DIR, LIBPQ_LIBRARY, ZOOKEEPER_INCLUDE_DIR, ZOOKEEPER_LIBRARY)
# can point elsewhere. The package names them by target, never by path, so an
# installed dlock stays relocatable: each consumer finds them on its own host.

if(_dlock_dependency_mode STREQUAL "package")
  include(CMakeFindDependencyMacro)
  # find_dependency() returns from this file when a package is missing (and
  # sets dlock_FOUND to false): called here, not inside a function.
  macro(_dlock_find_package name)
    find_dependency(${name} ${ARGN})
  endmacro()
else()
  macro(_dlock_find_package name)
    find_package(${name} ${ARGN} REQUIRED)
  endmacro()
endif()

# _dlock_import_library(<target> <cache prefix> <header> <library name> [<header path suffix>]):
# an UNKNOWN IMPORTED library found by find_path/find_library. Appends to
# _dlock_missing_libraries (in the caller) when either is not found.
function(_dlock_import_library target prefix header library)
  if(TARGET ${target})
    return()
  endif()
  set(_suffixes)
  if(ARGC GREATER 4)
    set(_suffixes PATH_SUFFIXES ${ARGV4})
  endif()
  find_path(${prefix}_INCLUDE_DIR ${header} ${_suffixes})
  find_library(${prefix}_LIBRARY ${library})
  if(NOT ${prefix}_INCLUDE_DIR OR NOT ${prefix}_LIBRARY)
    list(APPEND _dlock_missing_libraries "${library} (${header}: ${${prefix}_INCLUDE_DIR}, lib${library}: ${${prefix}_LIBRARY})")
    set(_dlock_missing_libraries "${_dlock_missing_libraries}" PARENT_SCOPE)
    return()
  endif()
  # GLOBAL: the library's link interface names it, and a project that adds
  # dlock with add_subdirectory() links dlock from its own directory.
  add_library(${target} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${${prefix}_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${${prefix}_INCLUDE_DIR}")
endfunction()

set(_dlock_missing_libraries)

_dlock_find_package(Threads)
# SSL always: dlock::tx's HTTPS participants use it even without Redis.
_dlock_find_package(OpenSSL COMPONENTS Crypto SSL)
if(DLOCK_WITH_REDIS)
  _dlock_import_library(dlock::hiredis HIREDIS hiredis/hiredis.h hiredis)
endif()
if(DLOCK_WITH_SQLITE)
  _dlock_find_package(SQLite3)
endif()
if(DLOCK_WITH_POSTGRES)
  _dlock_import_library(dlock::libpq LIBPQ libpq-fe.h pq postgresql)
endif()
if(DLOCK_WITH_ZOOKEEPER)
  _dlock_import_library(dlock::zookeeper_mt ZOOKEEPER zookeeper/zookeeper.h zookeeper_mt)
endif()

if(DLOCK_WITH_ETCD)
  _dlock_find_package(gRPC CONFIG)
  _dlock_find_package(Protobuf)
endif()

if(_dlock_missing_libraries)
  string(REPLACE ";" "\n  " _dlock_missing_text "${_dlock_missing_libraries}")
  if(_dlock_dependency_mode STREQUAL "package")
    set(dlock_FOUND FALSE)
    set(dlock_NOT_FOUND_MESSAGE "dlock was built with libraries that are not found here:\n  ${_dlock_missing_text}\n\
Install their development packages, or set the cache variables named above.")
  else()
    message(FATAL_ERROR "dlock needs these libraries (or turn their DLOCK_WITH_<BACKEND> option off):\n"
                        "  ${_dlock_missing_text}")
  endif()
endif()
unset(_dlock_missing_libraries)
unset(_dlock_missing_text)
