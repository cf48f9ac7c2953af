# SPDX-License-Identifier: Apache-2.0
# cmake -DWSEL=path/to/wsel -DPLUGIN=fx_constructor.so -DWORK=dir
#       -P validate_untrusted.cmake
#
# `wsel validate` on a plugin the trust rules refuse (a world-writable copy
# of fx_constructor) must report the refusal and never load the file: the
# fixture's constructor prints "constructor ran" if anything dlopens it.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(COPY_FILE ${PLUGIN} ${WORK}/p.so)
file(CHMOD ${WORK}/p.so PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ GROUP_WRITE
     WORLD_READ WORLD_WRITE)
execute_process(COMMAND ${WSEL} validate ${WORK}/p.so --seed 1 --timeout 20
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${WORK})
message("${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "exit code ${rc}, expected 1")
endif()
if(NOT out MATCHES "FAIL trust_rules: [^\n]*p.so: refused: world-writable \\(mode 0666\\)")
  message(FATAL_ERROR "no trust_rules failure naming the rule")
endif()
if(out MATCHES "constructor ran" OR err MATCHES "constructor ran")
  message(FATAL_ERROR "validate loaded a file the host refuses (its constructor ran)")
endif()
if(NOT out MATCHES "the host refuses this file; no other check ran")
  message(FATAL_ERROR "validate ran checks on a file the host refuses")
endif()
