# cmake/dlockManPage.cmake: writes dlock(1) from `dlock --help` with help2man.
#
#   cmake -DHELP2MAN=<help2man> -DDLOCK=<dlock tool> -DVERSION=X.Y.Z
#         -DINCLUDE=<extra sections, .h2m> -DOUTPUT=<dlock.1> -P dlockManPage.cmake
#
# The help names the default lock file under $XDG_STATE_HOME: the tool runs
# with a marker there, which the page then names as $XDG_STATE_HOME (not the
# builder's home directory).
cmake_minimum_required(VERSION 3.25)
foreach(_var HELP2MAN DLOCK VERSION INCLUDE OUTPUT)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "dlockManPage.cmake: ${_var} is not set")
  endif()
endforeach()

set(_marker "/DLOCK_XDG_STATE_HOME")
set(ENV{XDG_STATE_HOME} "${_marker}")
set(_tmp "${OUTPUT}.tmp")
execute_process(
  COMMAND "${HELP2MAN}" --no-info "--version-string=${VERSION}" "--name=distributed locks from the shell"
          "--include=${INCLUDE}" "--output=${_tmp}" "${DLOCK}"
  RESULT_VARIABLE _rc
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  file(REMOVE "${_tmp}")
  message(FATAL_ERROR "help2man failed (${_rc}):\n${_out}")
endif()
file(READ "${_tmp}" _page)
string(REPLACE "${_marker}" "$XDG_STATE_HOME" _page "${_page}")
file(WRITE "${OUTPUT}" "${_page}")
file(REMOVE "${_tmp}")
