# wsel_add_plugin(NAME SOURCES... [OUTPUT_DIR dir] [NO_VERSION_SCRIPT])
#
# Builds plugins/NAME as build/plugins/NAME.so: a MODULE library compiled
# against abi/ only, with hidden visibility and a version script so that
# exactly one dynamic symbol, wsel_plugin_entry, is exported.
# NO_VERSION_SCRIPT skips the version script (for test fixtures that must
# export extra symbols); never use it for a real plugin.
set(WSEL_PLUGIN_VERSION_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/wsel_plugin.map)

function(wsel_add_plugin name)
  cmake_parse_arguments(P "NO_VERSION_SCRIPT" "OUTPUT_DIR" "" ${ARGN})
  if(NOT P_OUTPUT_DIR)
    set(P_OUTPUT_DIR ${WSEL_PLUGIN_OUTPUT_DIR})
  endif()
  set(target wsel_plugin_${name})
  add_library(${target} MODULE ${P_UNPARSED_ARGUMENTS})
  target_link_libraries(${target} PRIVATE wsel::abi)
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${name}
    LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR}
    C_VISIBILITY_PRESET hidden)
  if(NOT P_NO_VERSION_SCRIPT)
    target_link_options(${target} PRIVATE
      -Wl,--version-script=${WSEL_PLUGIN_VERSION_SCRIPT})
  endif()
  # A plugin links against nothing: refuse undefined symbols, except in a
  # sanitizer build where the runtime lives in the executable.
  if(NOT WSEL_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,-z,defs)
  endif()
endfunction()
