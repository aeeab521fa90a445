# tests/package/run.cmake: can an outside project consume dlock?
#
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch dir> -DMODE=find_package|add_subdirectory
#         [-DGENERATOR=Ninja] [-DCXX_COMPILER=g++] -P tests/package/run.cmake
#
# MODE=find_package: configures the repository into WORK_DIR/build (no tests,
# no tools), builds it, installs it, moves the installed tree to
# WORK_DIR/prefix (the package must be relocatable), then builds
# tests/package/consumer against it with find_package(dlock CONFIG).
# MODE=add_subdirectory: builds the consumer with add_subdirectory(<repo>).
# Either way the consumer (WORK_DIR/consumer/bin/app) must run, exit 0 and
# print the version of include/dlock/version.hpp. WORK_DIR is wiped first.
# Any failing step stops with FATAL_ERROR and that step's output.
cmake_minimum_required(VERSION 3.25)

set(_usage "usage: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> -DMODE=find_package|add_subdirectory [-DGENERATOR=Ninja] -P run.cmake")
foreach(_var SOURCE_DIR WORK_DIR MODE)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: ${_var} is not set.\n${_usage}")
  endif()
endforeach()
if(NOT MODE MATCHES "^(find_package|add_subdirectory)$")
  message(FATAL_ERROR "run.cmake: MODE must be find_package or add_subdirectory, not '${MODE}'.\n${_usage}")
endif()
if(NOT DEFINED GENERATOR OR "${GENERATOR}" STREQUAL "")
  set(GENERATOR "Ninja")
endif()

get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)
get_filename_component(WORK_DIR "${WORK_DIR}" ABSOLUTE)
if(NOT EXISTS "${SOURCE_DIR}/CMakeLists.txt" OR NOT EXISTS "${SOURCE_DIR}/include/dlock/version.hpp")
  message(FATAL_ERROR "run.cmake: SOURCE_DIR '${SOURCE_DIR}' is not the dlock source tree")
endif()
# WORK_DIR is removed below: never the source tree or one of its parents.
string(FIND "${SOURCE_DIR}/" "${WORK_DIR}/" _pos)
if(_pos EQUAL 0)
  message(FATAL_ERROR "run.cmake: WORK_DIR '${WORK_DIR}' contains the source tree; refusing to wipe it")
endif()

file(READ "${SOURCE_DIR}/include/dlock/version.hpp" _version_hpp)
if(NOT _version_hpp MATCHES "DLOCK_VERSION_STRING \"([0-9]+\\.[0-9]+\\.[0-9]+)\"")
  message(FATAL_ERROR "run.cmake: no DLOCK_VERSION_STRING in include/dlock/version.hpp")
endif()
set(_version "${CMAKE_MATCH_1}")

# Settings shared by every configure step.
set(_common -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release)
find_program(_ccache ccache)
if(_ccache)
  list(APPEND _common "-DCMAKE_CXX_COMPILER_LAUNCHER=${_ccache}")
endif()
if(DEFINED CXX_COMPILER AND NOT "${CXX_COMPILER}" STREQUAL "")
  list(APPEND _common "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()

# step(<name> <command>...): runs the command; on failure stops with its output.
# The output is left in _step_output.
function(step name)
  string(REPLACE ";" " " _cmd "${ARGN}")
  message(STATUS "[${MODE}] ${name}")
  execute_process(COMMAND ${ARGN}
    WORKING_DIRECTORY "${WORK_DIR}"
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _out)
  if(NOT _rc STREQUAL "0")
    message(FATAL_ERROR "package test (${MODE}): step '${name}' failed (${_rc})\n"
                        "command: ${_cmd}\n"
                        "---- output ----\n${_out}")
  endif()
  set(_step_output "${_out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(_consumer_src "${SOURCE_DIR}/tests/package/consumer")
set(_consumer_bin "${WORK_DIR}/consumer")

if(MODE STREQUAL "find_package")
  set(_staging "${WORK_DIR}/install-staging")
  set(_prefix "${WORK_DIR}/prefix")
  step("configure dlock"
    "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" ${_common}
    -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_TOOLS=OFF -DDLOCK_BUILD_BENCHMARKS=OFF -DDLOCK_INSTALL=ON
    "-DCMAKE_INSTALL_PREFIX=${_staging}")
  step("build dlock" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --config Release)
  step("install dlock" "${CMAKE_COMMAND}" --install "${WORK_DIR}/build" --config Release --prefix "${_staging}")

  file(GLOB_RECURSE _configs "${_staging}/*/dlockConfig.cmake")
  if(NOT _configs)
    message(FATAL_ERROR "package test: the install has no dlockConfig.cmake:\n${_step_output}")
  endif()
  if(NOT EXISTS "${_staging}/include/dlock/dlock.hpp")
    message(FATAL_ERROR "package test: the install has no include/dlock/dlock.hpp:\n${_step_output}")
  endif()
  # The installed CMake files must not point back into the source or build tree.
  file(GLOB_RECURSE _cmake_files "${_staging}/*.cmake")
  foreach(_file IN LISTS _cmake_files)
    file(READ "${_file}" _text)
    foreach(_forbidden "${SOURCE_DIR}/include" "${SOURCE_DIR}/src" "${WORK_DIR}/build")
      string(FIND "${_text}" "${_forbidden}" _pos)
      if(NOT _pos EQUAL -1)
        message(FATAL_ERROR "package test: ${_file} refers to ${_forbidden}")
      endif()
    endforeach()
  endforeach()
  # Relocatable: consume it from another place than where it was installed.
  file(RENAME "${_staging}" "${_prefix}")

  step("configure consumer"
    "${CMAKE_COMMAND}" -S "${_consumer_src}" -B "${_consumer_bin}" ${_common}
    -DDLOCK_MODE=find_package "-DCMAKE_PREFIX_PATH=${_prefix}" "-DDLOCK_EXPECTED_VERSION=${_version}"
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
  # It must have found this install, not one elsewhere on the system.
  file(STRINGS "${_consumer_bin}/CMakeCache.txt" _dlock_dir REGEX "^dlock_DIR:")
  string(REGEX REPLACE "^dlock_DIR:[A-Z]+=" "" _dlock_dir "${_dlock_dir}")
  string(FIND "${_dlock_dir}/" "${_prefix}/" _pos)
  if(NOT _pos EQUAL 0)
    message(FATAL_ERROR "package test: the consumer found dlock in '${_dlock_dir}', not under ${_prefix}")
  endif()
else()
  step("configure consumer"
    "${CMAKE_COMMAND}" -S "${_consumer_src}" -B "${_consumer_bin}" ${_common}
    -DDLOCK_MODE=add_subdirectory "-DDLOCK_SOURCE_DIR=${SOURCE_DIR}")
  # A parent project must not get dlock's tests or tools by default.
  file(STRINGS "${_consumer_bin}/CMakeCache.txt" _flags REGEX "^DLOCK_BUILD_(TESTS|TOOLS):BOOL=(ON|TRUE|1)$")
  if(_flags)
    message(FATAL_ERROR "package test: as a subdirectory dlock defaults to ${_flags}")
  endif()
endif()

step("build consumer" "${CMAKE_COMMAND}" --build "${_consumer_bin}" --config Release)
set(_app "${_consumer_bin}/bin/app${CMAKE_EXECUTABLE_SUFFIX}")
if(NOT EXISTS "${_app}")
  message(FATAL_ERROR "package test: ${_app} was not built:\n${_step_output}")
endif()
step("run consumer" "${_app}")
string(FIND "${_step_output}" "dlock ${_version}" _pos)
if(_pos EQUAL -1)
  message(FATAL_ERROR "package test: the consumer did not print 'dlock ${_version}':\n${_step_output}")
endif()
message(STATUS "[${MODE}] ok: ${_step_output}")
