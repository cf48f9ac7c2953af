# SPDX-License-Identifier: Apache-2.0
# cmake -DCMAKE=... -DCC=... -DSOURCE=parent -DWSEL_SOURCE_DIR=... -DWORK=dir
#       -P embed.cmake
# Configure the parent project in WORK (wiped first), build its one target,
# run it; any step that fails fails the test with its output.
file(REMOVE_RECURSE ${WORK})
foreach(step configure build run)
  if(step STREQUAL "configure")
    set(cmd ${CMAKE} -S ${SOURCE} -B ${WORK} -DCMAKE_C_COMPILER=${CC}
            -DWSEL_SOURCE_DIR=${WSEL_SOURCE_DIR})
  elseif(step STREQUAL "build")
    set(cmd ${CMAKE} --build ${WORK} --target parent_router)
  else()
    set(cmd ${WORK}/parent_router)
  endif()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "embed: ${step} failed (${rc}):\n${out}")
  endif()
endforeach()
message("${out}")
