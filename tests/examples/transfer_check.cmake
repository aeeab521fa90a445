# Runs the transfer example (EXAMPLE, its path) and checks what it says:
# exit status 0, one transfer committed and one aborted, and balances that
# add up: A's 100 is available or spent, nothing is left frozen or
# incoming, and B holds what A spent (the committed 30).
#
#   cmake -DEXAMPLE=path/to/transfer-example -P transfer_check.cmake
execute_process(COMMAND ${EXAMPLE} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status TIMEOUT 60)
message(STATUS "transfer-example printed:\n${out}${err}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "transfer-example exited with ${status}")
endif()
if(NOT out MATCHES "transfer-1: committed\n" OR NOT out MATCHES "transfer-2: aborted")
  message(FATAL_ERROR "expected transfer-1 committed and transfer-2 aborted")
endif()
if(NOT out MATCHES
   "balances: A available=([0-9]+) frozen=([0-9]+) spent=([0-9]+); B balance=([0-9]+) incoming=([0-9]+)")
  message(FATAL_ERROR "no balances line")
endif()
set(available ${CMAKE_MATCH_1})
set(frozen ${CMAKE_MATCH_2})
set(spent ${CMAKE_MATCH_3})
set(balance ${CMAKE_MATCH_4})
set(incoming ${CMAKE_MATCH_5})
math(EXPR a_total "${available} + ${frozen} + ${spent}")
if(NOT a_total EQUAL 100 OR NOT frozen EQUAL 0 OR NOT incoming EQUAL 0 OR NOT balance EQUAL spent
   OR NOT spent EQUAL 30)
  message(FATAL_ERROR "the balances do not add up: A ${available}+${frozen}+${spent} (of 100), "
                      "B ${balance}+${incoming} (A spent ${spent}, and only transfer-1's 30 should have moved)")
endif()
