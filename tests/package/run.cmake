# tests/package/run.cmake: can an outside project consume dlock?
#
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch dir> -DMODE=<mode> [-DINSTALL_DIR=<dir>] [-DBUILD_DIR=<dir>]
#         [-DGENERATOR=Ninja] [-DCXX_COMPILER=g++] [-DDLOCK_WITH_<BACKEND>=ON|OFF...] -P tests/package/run.cmake
#
# MODE=install: installs the build tree BUILD_DIR (the suite's own, already
# built: the library, the dlock tool, the man page where help2man is
# installed); without BUILD_DIR it first configures the repository into
# WORK_DIR/build (the library and the dlock tool, no tests; the
# DLOCK_WITH_<BACKEND> given) and builds it. It checks that no installed
# CMake or pkg-config file points back into the source or build tree, then
# moves the installed tree to WORK_DIR/prefix (the package must be
# relocatable). The modes below use INSTALL_DIR/prefix, made by MODE=install
# with WORK_DIR=INSTALL_DIR.
# MODE=find_package: builds tests/package/consumer against it with
# find_package(dlock <version> EXACT CONFIG COMPONENTS asio <its backends>);
# an unknown component must make find_package fail.
# MODE=pkg_config: compiles tests/package/consumer/main.cpp with a plain
# command line: c++ -std=c++20 main.cpp $(pkg-config --static --cflags --libs
# dlock), PKG_CONFIG_PATH at the install.
# MODE=tool_files: the installed dlock tool answers --help; the bash
# completion is installed, registers itself and completes; the man page is
# installed where help2man is.
# MODE=add_subdirectory: builds the consumer with add_subdirectory(<repo>),
# dlock with SQLite alone, no optimisation, as a shared library (what is
# checked is how dlock behaves as a subproject and that its exports serve a
# program, not its backends: a quick build).
# A consumer (WORK_DIR/consumer/bin/app) must run, exit 0 and print the
# version of include/dlock/version.hpp; with SQLite in the build it takes and
# releases a lock in a temporary file. WORK_DIR is wiped first. Any failing
# step stops with FATAL_ERROR and that step's output.
cmake_minimum_required(VERSION 3.25)

set(_modes install find_package pkg_config tool_files add_subdirectory)
set(_usage "usage: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> -DMODE=install|find_package|pkg_config|tool_files|add_subdirectory [-DINSTALL_DIR=<dir>] [-DGENERATOR=Ninja] -P run.cmake")
foreach(_var SOURCE_DIR WORK_DIR MODE)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: ${_var} is not set.\n${_usage}")
  endif()
endforeach()
if(NOT MODE IN_LIST _modes)
  message(FATAL_ERROR "run.cmake: MODE must be one of ${_modes}, not '${MODE}'.\n${_usage}")
endif()
if(NOT DEFINED GENERATOR OR "${GENERATOR}" STREQUAL "")
  set(GENERATOR "Ninja")
endif()
if(MODE STREQUAL "install")
  set(INSTALL_DIR "${WORK_DIR}")
elseif(NOT MODE STREQUAL "add_subdirectory" AND (NOT DEFINED INSTALL_DIR OR "${INSTALL_DIR}" STREQUAL ""))
  message(FATAL_ERROR "run.cmake: MODE=${MODE} needs INSTALL_DIR (the WORK_DIR of a MODE=install run).\n${_usage}")
endif()

get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)
get_filename_component(WORK_DIR "${WORK_DIR}" ABSOLUTE)
if(DEFINED INSTALL_DIR)
  get_filename_component(INSTALL_DIR "${INSTALL_DIR}" ABSOLUTE)
endif()
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

# Settings shared by every configure step; the backends go to the install
# and to add_subdirectory.
set(_common -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release)
find_program(_ccache ccache)
if(_ccache)
  list(APPEND _common "-DCMAKE_CXX_COMPILER_LAUNCHER=${_ccache}")
endif()
if(DEFINED CXX_COMPILER AND NOT "${CXX_COMPILER}" STREQUAL "")
  list(APPEND _common "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
set(_backend_options)
foreach(_backend IN ITEMS REDIS SQLITE POSTGRES ZOOKEEPER ETCD)
  if(DEFINED DLOCK_WITH_${_backend})
    list(APPEND _backend_options "-DDLOCK_WITH_${_backend}=${DLOCK_WITH_${_backend}}")
  endif()
endforeach()

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

# fail(<message>...): stops the test.
function(fail)
  string(JOIN "" _text ${ARGN})
  message(FATAL_ERROR "package test (${MODE}): ${_text}")
endfunction()

# run_consumer(<app>): runs the consumer; it must print the version.
function(run_consumer app)
  if(NOT EXISTS "${app}")
    fail("${app} was not built")
  endif()
  step("run consumer" "${app}")
  string(FIND "${_step_output}" "dlock ${_version}" _pos)
  if(_pos EQUAL -1)
    fail("the consumer did not print 'dlock ${_version}':\n${_step_output}")
  endif()
  message(STATUS "[${MODE}] ok: ${_step_output}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(_consumer_src "${SOURCE_DIR}/tests/package/consumer")
set(_consumer_bin "${WORK_DIR}/consumer")
set(_app "${_consumer_bin}/bin/app${CMAKE_EXECUTABLE_SUFFIX}")
if(DEFINED INSTALL_DIR)
  set(_prefix "${INSTALL_DIR}/prefix")
endif()
if(NOT MODE MATCHES "^(install|add_subdirectory)$" AND NOT IS_DIRECTORY "${_prefix}")
  fail("no installed dlock in ${_prefix}: run MODE=install with WORK_DIR=${INSTALL_DIR} first")
endif()

if(MODE STREQUAL "install")
  set(_staging "${WORK_DIR}/install-staging")
  if(DEFINED BUILD_DIR AND NOT "${BUILD_DIR}" STREQUAL "")
    get_filename_component(BUILD_DIR "${BUILD_DIR}" ABSOLUTE)
    set(_built "${BUILD_DIR}")
    set(_install_config)  # the tree's own build type (its export file is named after it)
  else()
    set(_install_config --config Release)
    set(_built "${WORK_DIR}/build")
    step("configure dlock"
      "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${_built}" ${_common} ${_backend_options}
      -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_TOOLS=ON -DDLOCK_BUILD_BENCHMARKS=OFF -DDLOCK_INSTALL=ON
      "-DCMAKE_INSTALL_PREFIX=${_staging}")
    # The installed parts only (not the tools' examples).
    set(_targets dlock dlock-cli)
    file(STRINGS "${_built}/CMakeCache.txt" _with_tx REGEX "^DLOCK_WITH_TX:BOOL=ON$")
    if(_with_tx)
      list(APPEND _targets dlock_tx)
    endif()
    file(STRINGS "${_built}/CMakeCache.txt" _help2man REGEX "^HELP2MAN_PROGRAM:")
    if(_help2man AND NOT _help2man MATCHES "NOTFOUND$")
      list(APPEND _targets dlock-man)
    endif()
    step("build dlock" "${CMAKE_COMMAND}" --build "${_built}" --config Release --target ${_targets})
  endif()
  step("install dlock" "${CMAKE_COMMAND}" --install "${_built}" ${_install_config} --prefix "${_staging}")

  file(GLOB_RECURSE _configs "${_staging}/*/dlockConfig.cmake")
  if(NOT _configs)
    fail("the install has no dlockConfig.cmake:\n${_step_output}")
  endif()
  file(GLOB_RECURSE _pcs "${_staging}/*/pkgconfig/dlock.pc")
  if(NOT _pcs)
    fail("the install has no pkgconfig/dlock.pc:\n${_step_output}")
  endif()
  foreach(_file IN ITEMS include/dlock/dlock.hpp include/dlock/asio.hpp bin/dlock${CMAKE_EXECUTABLE_SUFFIX})
    if(NOT EXISTS "${_staging}/${_file}")
      fail("the install has no ${_file}:\n${_step_output}")
    endif()
  endforeach()
  # The installed CMake and pkg-config files must not point back into the
  # source or build tree, nor to where they were installed.
  file(GLOB_RECURSE _package_files "${_staging}/*.cmake" "${_staging}/*.pc")
  foreach(_file IN LISTS _package_files)
    file(READ "${_file}" _text)
    foreach(_forbidden "${SOURCE_DIR}/include" "${SOURCE_DIR}/src" "${_built}" "${_staging}")
      string(FIND "${_text}" "${_forbidden}" _pos)
      if(NOT _pos EQUAL -1)
        fail("${_file} refers to ${_forbidden}")
      endif()
    endforeach()
  endforeach()
  # Relocatable: consumed from another place than where it was installed.
  file(RENAME "${_staging}" "${_prefix}")
  message(STATUS "[${MODE}] ok: installed in ${_prefix}")

elseif(MODE STREQUAL "find_package")
  # The backends the install serves, from its config file.
  file(GLOB_RECURSE _configs "${_prefix}/*/dlockConfig.cmake")
  file(STRINGS "${_configs}" _line REGEX "^set\\(dlock_BACKENDS ")
  string(REGEX REPLACE "^set\\(dlock_BACKENDS \"([^\"]*)\"\\)$" "\\1" _backends "${_line}")
  string(REPLACE "\\;" "," _backends "${_backends}")  # a list: one argument below
  message(STATUS "[${MODE}] backends: ${_backends}")

  step("configure consumer"
    "${CMAKE_COMMAND}" -S "${_consumer_src}" -B "${_consumer_bin}" ${_common}
    -DDLOCK_MODE=find_package "-DCMAKE_PREFIX_PATH=${_prefix}" "-DDLOCK_EXPECTED_VERSION=${_version}"
    "-DDLOCK_COMPONENTS=asio,${_backends}" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
  # It must have found this install, not one elsewhere on the system.
  file(STRINGS "${_consumer_bin}/CMakeCache.txt" _dlock_dir REGEX "^dlock_DIR:")
  string(REGEX REPLACE "^dlock_DIR:[A-Z]+=" "" _dlock_dir "${_dlock_dir}")
  string(FIND "${_dlock_dir}/" "${_prefix}/" _pos)
  if(NOT _pos EQUAL 0)
    fail("the consumer found dlock in '${_dlock_dir}', not under ${_prefix}")
  endif()
  step("build consumer" "${CMAKE_COMMAND}" --build "${_consumer_bin}" --config Release)
  run_consumer("${_app}")

  # A component the install does not have fails find_package(dlock).
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${_consumer_src}" -B "${WORK_DIR}/consumer-bad-component" ${_common}
            -DDLOCK_MODE=find_package "-DCMAKE_PREFIX_PATH=${_prefix}" -DDLOCK_COMPONENTS=nosuchbackend
            -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(_rc EQUAL 0 OR NOT _out MATCHES "no component nosuchbackend")
    fail("find_package(dlock COMPONENTS nosuchbackend) did not fail naming it (${_rc}):\n${_out}")
  endif()

elseif(MODE STREQUAL "pkg_config")
  find_program(_pkg_config NAMES pkg-config pkgconf)
  if(NOT _pkg_config)
    fail("pkg-config is not installed")
  endif()
  file(GLOB_RECURSE _pcs "${_prefix}/*/pkgconfig/dlock.pc")
  if(NOT _pcs)
    fail("no pkgconfig/dlock.pc under ${_prefix}")
  endif()
  get_filename_component(_pc_dir "${_pcs}" DIRECTORY)
  set(_pc_env "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${_pc_dir}")

  step("pkg-config --modversion" ${_pc_env} "${_pkg_config}" --modversion dlock)
  string(STRIP "${_step_output}" _pc_version)
  if(NOT _pc_version STREQUAL _version)
    fail("pkg-config says version '${_pc_version}', not ${_version}")
  endif()
  step("pkg-config --variable=backends" ${_pc_env} "${_pkg_config}" --variable=backends dlock)
  string(STRIP "${_step_output}" _backends)
  message(STATUS "[${MODE}] backends: ${_backends}")
  step("pkg-config --static --cflags --libs" ${_pc_env} "${_pkg_config}" --static --cflags --libs dlock)
  string(STRIP "${_step_output}" _flags)
  message(STATUS "[${MODE}] flags: ${_flags}")
  # The include directory is the relocated install's.
  string(FIND "${_flags}" "${_prefix}/" _pos)
  if(_pos EQUAL -1)
    fail("pkg-config's flags do not point into ${_prefix}: ${_flags}")
  endif()
  separate_arguments(_flags UNIX_COMMAND "${_flags}")

  if(DEFINED CXX_COMPILER AND NOT "${CXX_COMPILER}" STREQUAL "")
    set(_cxx "${CXX_COMPILER}")
  else()
    find_program(_cxx NAMES c++ g++ clang++ REQUIRED)
  endif()
  set(_defines)
  if(" ${_backends} " MATCHES " sqlite ")
    list(APPEND _defines -DCONSUMER_WITH_SQLITE=1)
  endif()
  if(" ${_backends} " MATCHES " redis ")
    list(APPEND _defines -DCONSUMER_WITH_REDIS=1)
  endif()
  file(MAKE_DIRECTORY "${_consumer_bin}/bin")
  step("compile and link consumer"
    "${_cxx}" -std=c++20 ${_defines} "${_consumer_src}/main.cpp" ${_flags} -o "${_app}")
  run_consumer("${_app}")

elseif(MODE STREQUAL "tool_files")
  set(_dlock "${_prefix}/bin/dlock${CMAKE_EXECUTABLE_SUFFIX}")
  if(NOT EXISTS "${_dlock}")
    fail("the install has no bin/dlock")
  endif()
  step("dlock --help" "${_dlock}" --help)
  if(NOT _step_output MATCHES "run" OR NOT _step_output MATCHES "status")
    fail("dlock --help does not list its subcommands:\n${_step_output}")
  endif()

  # bash completion, where bash-completion looks for it.
  set(_completion "${_prefix}/share/bash-completion/completions/dlock")
  if(NOT EXISTS "${_completion}")
    fail("the install has no share/bash-completion/completions/dlock")
  endif()
  find_program(_bash bash REQUIRED)
  step("bash: source the completion" "${_bash}" -c "source '${_completion}' && complete -p dlock")
  if(NOT _step_output MATCHES "complete -F [A-Za-z_]+ dlock")
    fail("the completion does not register a function for dlock:\n${_step_output}")
  endif()
  # What a user gets pressing Tab after `dlock `, `dlock run --`, ... (a
  # script file: a command's ';' would split CMake's argument list).
  file(WRITE "${WORK_DIR}/complete.sh" [=[
source "$1"
f=$(complete -p dlock | sed -E 's/.*-F ([^ ]+) .*/\1/')
t() {
  COMP_LINE="$1"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  "$f"
  echo "[$1] ${COMPREPLY[*]}"
}
t 'dlock '
t 'dlock run --'
t 'dlock status --'
t 'dlock --url re'
]=])
  step("bash: complete dlock" "${_bash}" "${WORK_DIR}/complete.sh" "${_completion}")
  # Each line "[LINE] REPLIES" must offer these words (among others).
  set(_expect_dlock_ run elect status list migrate tx)
  set(_expect_dlock_run_-- --ttl --wait --grace --fair --shared --permits --url --quiet)
  set(_expect_dlock_status_-- --json --prometheus --url)
  set(_expect_dlock_--url_re redis:// rediss:// redlock://)
  foreach(_line "dlock " "dlock run --" "dlock status --" "dlock --url re")
    string(REPLACE " " "_" _key "${_line}")
    string(FIND "${_step_output}" "[${_line}] " _pos)
    if(_pos EQUAL -1)
      fail("no completion of '${_line}':\n${_step_output}")
    endif()
    string(SUBSTRING "${_step_output}" ${_pos} -1 _reply)
    string(REGEX REPLACE "\n.*" "" _reply "${_reply}")
    string(REPLACE " " ";" _reply "${_reply}")
    foreach(_word IN LISTS _expect_${_key})
      if(NOT _word IN_LIST _reply)
        fail("the completion of '${_line}' does not offer ${_word}:\n${_step_output}")
      endif()
    endforeach()
  endforeach()

  # The man page, made by help2man where it is installed.
  find_program(_help2man help2man)
  file(GLOB _man_pages "${_prefix}/share/man/man1/dlock.1" "${_prefix}/share/man/man1/dlock.1.gz")
  if(_help2man)
    if(NOT _man_pages)
      fail("help2man is installed but the install has no share/man/man1/dlock.1")
    endif()
    if(_man_pages MATCHES "\\.1$")
      file(READ "${_man_pages}" _page)
      if(NOT _page MATCHES "\\.TH DLOCK \"1\"" OR NOT _page MATCHES "DLOCK_URL")
        fail("${_man_pages} is not dlock's man page:\n${_page}")
      endif()
      foreach(_forbidden "${INSTALL_DIR}" "$ENV{HOME}/")
        string(FIND "${_page}" "${_forbidden}" _pos)
        if(NOT _forbidden STREQUAL "/" AND NOT _pos EQUAL -1)
          fail("${_man_pages} names a path of the machine that built it (${_forbidden})")
        endif()
      endforeach()
    endif()
    message(STATUS "[${MODE}] man page: ${_man_pages}")
  else()
    message(STATUS "[${MODE}] help2man is not installed: no man page expected")
  endif()
  message(STATUS "[${MODE}] ok")

else()  # add_subdirectory
  step("configure consumer"
    "${CMAKE_COMMAND}" -S "${_consumer_src}" -B "${_consumer_bin}" ${_common}
    -DCMAKE_BUILD_TYPE= "-DCMAKE_CXX_FLAGS=-O0" -DDLOCK_WITH_SQLITE=ON -DDLOCK_WITH_REDIS=OFF
    -DDLOCK_WITH_POSTGRES=OFF -DDLOCK_WITH_ZOOKEEPER=OFF -DDLOCK_WITH_ETCD=OFF -DDLOCK_WITH_TX=OFF -DBUILD_SHARED_LIBS=ON
    -DDLOCK_MODE=add_subdirectory "-DDLOCK_SOURCE_DIR=${SOURCE_DIR}")
  # A parent project must not get dlock's tests or tools by default.
  file(STRINGS "${_consumer_bin}/CMakeCache.txt" _flags REGEX "^DLOCK_BUILD_(TESTS|TOOLS):BOOL=(ON|TRUE|1)$")
  if(_flags)
    fail("as a subdirectory dlock defaults to ${_flags}")
  endif()
  step("build consumer" "${CMAKE_COMMAND}" --build "${_consumer_bin}")
  # Built shared, with hidden visibility: the app links only what
  # include/dlock/ exports (DLOCK_EXPORT).
  file(GLOB_RECURSE _shared "${_consumer_bin}/libdlock.so")
  if(NOT _shared)
    fail("BUILD_SHARED_LIBS=ON made no libdlock.so")
  endif()
  run_consumer("${_app}")
endif()
