# SPDX-License-Identifier: Apache-2.0
# cmake -DCMD="wsel;sim;..." -P sim_table_aligned.cmake
#
# Runs CMD (a `wsel sim` or `wsel replay` printing its table) and fails
# unless the header and every row of the table have the same length: a
# label longer than the first column's default width (a plugin given by
# path, with a [k] mark) must widen the column, not push its row's figures
# out from under their titles.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit code ${rc}\n${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(width -1)
set(rows 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^(\\* best in column|\\[[0-9]+\\] )") # the footnotes
    break()
  endif()
  if(line STREQUAL "")
    continue()
  endif()
  string(LENGTH "${line}" len)
  if(width EQUAL -1)
    set(width ${len})
  elseif(NOT len EQUAL width)
    message(FATAL_ERROR "row of ${len} characters under a header of ${width}: '${line}'")
  endif()
  math(EXPR rows "${rows} + 1")
endforeach()
if(rows LESS 3)
  message(FATAL_ERROR "expected a header and two rows, found ${rows} lines")
endif()
