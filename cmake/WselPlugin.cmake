# SPDX-License-Identifier: Apache-2.0
# wsel_add_plugin(<name> <sources>... [OUTPUT_DIR <dir>] [NO_VERSION_SCRIPT])
#
# Builds <name>.so (no "lib" prefix) as a wsel plugin: a MODULE library that
# links wsel::abi only, with hidden visibility, a version script exporting
# exactly wsel_plugin_entry, and -z defs (no undefined symbols: link what
# you use, e.g. target_link_libraries(<target> PRIVATE m)).
#
# The one definition, used by wsel's own build (plugins/, test fixtures)
# and installed with the CMake package for out-of-tree plugins.
#
#   target      ${WSEL_PLUGIN_TARGET_PREFIX}<name>; the prefix is empty
#               unless set. wsel's own build sets it to wsel_plugin_ so
#               that its plugins' targets (random, softmax, ...) never clash
#               with a parent project's targets when wsel is embedded.
#   OUTPUT_DIR  where the .so goes; default ${WSEL_PLUGIN_OUTPUT_DIR} when
#               set (wsel's build: <build>/plugins), else CMake's default.
#   NO_VERSION_SCRIPT  export every default-visibility symbol: only for test
#               fixtures that must export extra symbols, never a real plugin.
#
# Install a plugin with
#   install(TARGETS <target> LIBRARY DESTINATION ${WSEL_PLUGINDIR})
# to make it loadable by name with the installed `wsel`.
function(wsel_add_plugin name)
  cmake_parse_arguments(P "NO_VERSION_SCRIPT" "OUTPUT_DIR" "" ${ARGN})
  if(NOT P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "wsel_add_plugin(${name}): no source files given")
  endif()
  if(NOT P_OUTPUT_DIR AND DEFINED WSEL_PLUGIN_OUTPUT_DIR)
    set(P_OUTPUT_DIR ${WSEL_PLUGIN_OUTPUT_DIR})
  endif()
  set(target ${WSEL_PLUGIN_TARGET_PREFIX}${name})
  add_library(${target} MODULE ${P_UNPARSED_ARGUMENTS})
  target_link_libraries(${target} PRIVATE wsel::abi)
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${name}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR})
  endif()
  if(NOT P_NO_VERSION_SCRIPT)
    target_link_options(${target} PRIVATE
      "LINKER:--version-script=${CMAKE_CURRENT_FUNCTION_LIST_DIR}/wsel_plugin.map")
  endif()
  # A plugin links against nothing: refuse undefined symbols, except in
  # wsel's sanitizer builds, where the runtime lives in the executable.
  if(NOT WSEL_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:-z,defs")
  endif()
endfunction()
