# SPDX-License-Identifier: Apache-2.0
# cmake -DBUILD=dir -DPREFIX=dir -P install_docs.cmake
#
# `cmake --install` puts the documentation under share/doc/wsel and the
# plugin template under share/wsel/examples (issue 13, item 20), and the
# installed wsel.h states the loader's limits.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
foreach(f share/doc/wsel/README.md share/doc/wsel/robustness.md
          share/doc/wsel/writing-a-plugin.md share/doc/wsel/embedding.md
          share/wsel/examples/plugin-template/CMakeLists.txt
          share/wsel/examples/plugin-template/least_active.c
          share/wsel/examples/plugin-template/README.md)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(READ ${PREFIX}/include/wsel/wsel.h header)
if(NOT header MATCHES "Limits: everything the host's loader enforces")
  message(FATAL_ERROR "the installed wsel.h does not state the loader's limits")
endif()
file(REMOVE_RECURSE ${PREFIX})
