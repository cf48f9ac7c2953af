# SPDX-License-Identifier: Apache-2.0
# WselMan.cmake -- the man pages, built with the programs and installed
# with them (P/share/man/man1, man7):
#
#   wsel(1)         help2man from `wsel --help` and every `wsel COMMAND
#                   --help` (cmake/WselManPage.cmake), plus man/wsel.h2m.in
#   wsel-engine(1)  help2man from `wsel-engine --help`, plus
#                   man/wsel-engine.h2m.in
#   wsel-plugin(7)  man/wsel-plugin.7.in, the ABI in brief, its versions
#                   filled in from project() and abi/wsel.h
#
# The --help texts are the one source of the command pages; tests/packaging
# checks that each page holds them. Needs help2man (Debian package
# help2man); without it, or inside a parent project, the pages are skipped
# unless WSEL_MAN is ON.
find_program(WSEL_HELP2MAN help2man)
if(WSEL_HELP2MAN AND WSEL_TOP_LEVEL)
  set(default ON)
else()
  set(default OFF)
endif()
option(WSEL_MAN "Build and install the man pages (help2man)" ${default})
if(NOT WSEL_MAN)
  if(NOT WSEL_HELP2MAN AND WSEL_TOP_LEVEL)
    message(STATUS "wsel: man pages skipped: install the Debian package help2man")
  endif()
  return()
endif()
if(NOT WSEL_HELP2MAN)
  message(FATAL_ERROR "wsel: WSEL_MAN needs help2man; install the Debian package "
                      "help2man (or run scripts/install-deps.sh), or configure with "
                      "-DWSEL_MAN=OFF")
endif()

# Where the installed files are, as the pages name them.
file(STRINGS ${PROJECT_SOURCE_DIR}/abi/wsel.h abi_lines
     REGEX "^#define WSEL_ABI_(MAJOR|MINOR) [0-9]+$")
string(REGEX REPLACE ".*WSEL_ABI_MAJOR ([0-9]+).*" "\\1" WSEL_ABI_MAJOR "${abi_lines}")
string(REGEX REPLACE ".*WSEL_ABI_MINOR ([0-9]+).*" "\\1" WSEL_ABI_MINOR "${abi_lines}")
set(WSEL_INSTALLED_HEADER ${CMAKE_INSTALL_FULL_INCLUDEDIR}/wsel/wsel.h)
set(WSEL_INSTALLED_PLUGINDIR ${CMAKE_INSTALL_PREFIX}/lib/wsel/plugins)
set(WSEL_INSTALLED_DOCDIR ${CMAKE_INSTALL_FULL_DATAROOTDIR}/doc/wsel)
set(WSEL_INSTALLED_TEMPLATE
    ${CMAKE_INSTALL_FULL_DATAROOTDIR}/wsel/examples/plugin-template)

set(man_dir ${PROJECT_BINARY_DIR}/man)
configure_file(${PROJECT_SOURCE_DIR}/man/wsel-plugin.7.in ${man_dir}/wsel-plugin.7 @ONLY)
set(WSEL_MAN_PAGES ${man_dir}/wsel.1 ${man_dir}/wsel-plugin.7)

# wsel_man_page(TARGET NAME DESCRIPTION [SUBCOMMANDS])
function(wsel_man_page target name description)
  configure_file(${PROJECT_SOURCE_DIR}/man/${name}.h2m.in ${man_dir}/${name}.h2m.in @ONLY)
  add_custom_command(OUTPUT ${man_dir}/${name}.1
    COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${WSEL_HELP2MAN} -DPROGRAM=$<TARGET_FILE:${target}>
            -DNAME=${description} -DVERSION=${PROJECT_VERSION}
            -DINCLUDE=${man_dir}/${name}.h2m.in -DOUTPUT=${man_dir}/${name}.1
            -DSUBCOMMANDS=${ARGN}
            -P ${PROJECT_SOURCE_DIR}/cmake/WselManPage.cmake
    DEPENDS ${target} ${man_dir}/${name}.h2m.in ${PROJECT_SOURCE_DIR}/cmake/WselManPage.cmake
    COMMENT "wsel: man page ${name}(1)"
    VERBATIM)
endfunction()
wsel_man_page(wsel wsel "pluggable worker selection for KV-cache-aware LLM routers" ON)
if(TARGET wsel-engine)
  wsel_man_page(wsel-engine wsel-engine "an emulated vLLM-like LLM inference worker" OFF)
  list(APPEND WSEL_MAN_PAGES ${man_dir}/wsel-engine.1)
endif()
add_custom_target(wsel_man ALL DEPENDS ${WSEL_MAN_PAGES})

if(WSEL_INSTALL)
  foreach(page IN LISTS WSEL_MAN_PAGES)
    string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
            COMPONENT runtime)
  endforeach()
endif()
