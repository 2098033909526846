# Runs a program and checks its exit status and a piece of its output (a CTest test's command):
#   cmake -DPROGRAM=<path> [-DARGS=<arg;arg...>] -DEXIT_CODE=<n> -DEXPECT=<text> -P expect_exit.cmake
# Passes when the program exits with EXIT_CODE and its standard output or error contains EXPECT
# (plain text, not a regular expression). CTest's own WILL_FAIL / PASS_REGULAR_EXPRESSION cannot
# check both: with a pass expression set, the exit status is ignored.
cmake_minimum_required(VERSION 3.25)

foreach(_v PROGRAM EXIT_CODE EXPECT)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "expect_exit.cmake: ${_v} is not set")
  endif()
endforeach()

execute_process(COMMAND "${PROGRAM}" ${ARGS} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
string(FIND "${_out}${_err}" "${EXPECT}" _at)
if(NOT "${_rc}" STREQUAL "${EXIT_CODE}" OR _at EQUAL -1)
  message(FATAL_ERROR "expect_exit.cmake: '${PROGRAM} ${ARGS}' exited with '${_rc}' (expected ${EXIT_CODE}); "
                      "expected the output to contain: ${EXPECT}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
endif()
message(STATUS "'${PROGRAM} ${ARGS}': exit ${_rc}, message found: ${EXPECT}")
