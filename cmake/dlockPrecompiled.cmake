# Precompiled headers: most of a translation unit's compile here is parsing
# the same standard, Boost.Asio and GoogleTest headers again (a unit test
# file preprocesses to 3 MB, an integration test to 5 MB). Each header below
# is parsed once per target, or once for all the tests (REUSE_FROM).
#
# DLOCK_PRECOMPILED_HEADERS=OFF builds without them, as the variant stage of
# scripts/test does, so that a file missing an include of its own still fails
# to compile somewhere.
option(DLOCK_PRECOMPILED_HEADERS "Precompile the common headers (faster builds)" ON)

# GCC 12 loses a precompiled system header's "system" mark for the code it
# inlines from it, and then reports its known false positives inside
# libstdc++'s std::string (-Warray-bounds, -Wstringop-overflow,
# -Wstringop-overread; GCC PR 105329, 105651) at -O2: a dozen warnings in
# this tree with the headers precompiled, none without. Those three are off
# for GCC where the headers are precompiled.
set(_dlock_pch_options
    "$<$<CXX_COMPILER_ID:GNU>:-Wno-array-bounds;-Wno-stringop-overflow;-Wno-stringop-overread>")

# dlock_precompile(TARGET HEADER): TARGET's sources are compiled with HEADER
# precompiled and included first.
function(dlock_precompile target header)
  if(DLOCK_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${header})
    target_compile_options(${target} PRIVATE ${_dlock_pch_options})
  endif()
endfunction()

# dlock_precompile_directory(HEADER [SKIP...]): every executable and static
# library defined so far in the calling directory, but the SKIP targets,
# shares one precompiled HEADER (it is built for the first of them). They must be compiled with the same
# options, which the tests are (macros that differ appear in no precompiled
# header, which GCC allows).
function(dlock_precompile_directory header)
  if(NOT DLOCK_PRECOMPILED_HEADERS)
    return()
  endif()
  get_property(targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
  set(first "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type STREQUAL "EXECUTABLE" AND NOT type STREQUAL "STATIC_LIBRARY" OR t IN_LIST ARGN)
      continue()
    endif()
    if(first STREQUAL "")
      target_precompile_headers(${t} PRIVATE ${header})
      set(first ${t})
    else()
      target_precompile_headers(${t} REUSE_FROM ${first})
    endif()
    target_compile_options(${t} PRIVATE ${_dlock_pch_options})
  endforeach()
endfunction()
