# SPDX-License-Identifier: Apache-2.0
# cmake -DCMD="a;b;c" -DEXIT=N -DMATCH=regex [-DERROR_MATCH=regex]
#       -P expect_output.cmake
#
# Runs CMD, then fails unless it exited with EXIT, its standard output
# matches MATCH and (when given) its standard error matches ERROR_MATCH.
# (PASS_REGULAR_EXPRESSION alone would ignore the exit code.)
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL EXIT)
  message(FATAL_ERROR "exit code ${rc}, expected ${EXIT}\n${err}")
endif()
if(NOT out MATCHES "${MATCH}")
  message(FATAL_ERROR "output does not match '${MATCH}'\n${err}")
endif()
if(DEFINED ERROR_MATCH AND NOT err MATCHES "${ERROR_MATCH}")
  message(FATAL_ERROR "standard error does not match '${ERROR_MATCH}':\n${err}")
endif()
