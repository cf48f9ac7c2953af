# SPDX-License-Identifier: Apache-2.0
# cmake -DHELP2MAN=... -DPROGRAM=... -DNAME=... -DVERSION=... -DINCLUDE=...
#       -DOUTPUT=... [-DSUBCOMMANDS=ON] -P WselManPage.cmake
#
# Writes the man page OUTPUT from PROGRAM's --help with help2man, adding the
# sections of INCLUDE and, with SUBCOMMANDS, a COMMANDS section holding each
# `PROGRAM COMMAND --help` verbatim (the commands are those `PROGRAM --help`
# lists under "commands:"). The --help texts are the one source.
get_filename_component(program_name ${PROGRAM} NAME)
file(READ ${INCLUDE} include_text)
if(SUBCOMMANDS)
  execute_process(COMMAND ${PROGRAM} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} --help exited ${rc}")
  endif()
  string(REGEX MATCH "\ncommands:\n(  [^\n]+\n)+" listing "${help}")
  string(REGEX MATCHALL "\n  [a-z]+ " commands "${listing}")
  if(NOT commands)
    message(FATAL_ERROR "${PROGRAM} --help lists no commands")
  endif()
  string(APPEND include_text "[COMMANDS]\n")
  foreach(command IN LISTS commands)
    string(STRIP "${command}" command)
    execute_process(COMMAND ${PROGRAM} ${command} --help OUTPUT_VARIABLE text
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${PROGRAM} ${command} --help exited ${rc}")
    endif()
    # roff: \ is \e, - is \-, and no line may start a request or a section
    string(REPLACE "\\" "\\e" text "${text}")
    string(REPLACE "-" "\\-" text "${text}")
    string(REGEX REPLACE "\n+$" "" text "${text}")
    string(REPLACE "\n" "\n\\&" text "\\&${text}")
    string(APPEND include_text ".SS \"${program_name} ${command}\"\n.nf\n${text}\n.fi\n")
  endforeach()
endif()
file(WRITE ${OUTPUT}.h2m "${include_text}")
execute_process(
  COMMAND ${HELP2MAN} --no-info --version-string=${VERSION} --name=${NAME} --section=1
          --include=${OUTPUT}.h2m --output=${OUTPUT}.tmp ${PROGRAM}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man ${PROGRAM} failed")
endif()
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
