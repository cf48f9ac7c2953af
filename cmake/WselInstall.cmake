# SPDX-License-Identifier: Apache-2.0
# WselInstall.cmake -- what `cmake --install` puts where, and the packages
# that let a third party find it again.
#
#   P/include/wsel/wsel.h, wsel_host.h   the ABI and the host library's API
#                                        (consumers add -IP/include/wsel, so
#                                        #include <wsel.h> works as it is)
#   P/lib/libwsel-host.so.1              the host library (SONAME .so.1)
#   P/lib/wsel/plugins/NAME.so           the bundled policies
#   P/bin/wsel                           the command (RPATH $ORIGIN/../lib)
#   P/lib/cmake/wsel/                    find_package(wsel): wsel::abi,
#                                        wsel::host, wsel_add_plugin()
#   P/lib/pkgconfig/wsel.pc              pkg-config: cflags, libs, plugindir
#   P/bin/wsel-isolated-helper           isolated mode's helper process
#   P/bin/wsel-engine                    the emulated engine `wsel cluster`
#                                        starts (WSEL_REALTIME builds)
#   P/share/doc/wsel/LICENSE             the licence (Apache-2.0)
#   P/share/doc/wsel/README.md, *.md     the README and docs/ (figures in img/)
#   P/share/wsel/examples/plugin-template the out-of-tree plugin template
#                                        (docs/writing-a-plugin.md)
#
# Everything installed is relocatable: the CMake package and the .pc file
# locate the prefix from their own location, so `cmake --install build
# --prefix /anywhere` works without reconfiguring.
#
# Included at the end of the top-level CMakeLists.txt, once every target
# exists; install(TARGETS) on targets of other folders needs CMake >= 3.13.
include(CMakePackageConfigHelpers)

# The plugin folder is lib/wsel/plugins whatever the libdir: the installed
# `wsel` finds plugins by name in <bin>/../lib/wsel/plugins (tools/plugin_path.c).
set(WSEL_INSTALL_PLUGINDIR lib/wsel/plugins)
set(WSEL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/wsel)
set(WSEL_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- headers -----------------------------------------------------------------
set(WSEL_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/wsel)
install(FILES ${PROJECT_SOURCE_DIR}/abi/wsel.h ${PROJECT_SOURCE_DIR}/host/include/wsel_host.h
        DESTINATION ${WSEL_INSTALL_INCLUDEDIR} COMPONENT dev)

# --- the licence -----------------------------------------------------------------
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/wsel
        COMPONENT runtime)

# --- the documentation and the plugin template ----------------------------------
# An installed wsel documents itself: the README and docs/ beside the
# licence, and the template a plugin author copies to start (it builds
# against the installed package alone; tests/install builds it so).
install(FILES ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/wsel COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/wsel COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/plugin-template
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/wsel/examples COMPONENT dev)

# --- the ABI and the host library, exported as wsel::abi and wsel::host ------
set_target_properties(wsel_abi PROPERTIES EXPORT_NAME abi)
set_target_properties(wsel_host PROPERTIES EXPORT_NAME host)
install(TARGETS wsel_abi wsel_host EXPORT wsel-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT dev)

# --- the bundled plugins: every wsel_plugin_* module under plugins/ ---------
# Collected from the folders rather than listed, so a policy added under
# plugins/ is installed without touching this file. Test fixtures live under
# tests/ and are never installed.
function(wsel_collect_bundled_plugins dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  set(found "")
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(target MATCHES "^wsel_plugin_" AND type STREQUAL "MODULE_LIBRARY")
      list(APPEND found ${target})
    endif()
  endforeach()
  foreach(subdir IN LISTS subdirs)
    wsel_collect_bundled_plugins(${subdir} sub_found)
    list(APPEND found ${sub_found})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

wsel_collect_bundled_plugins(${PROJECT_SOURCE_DIR}/plugins WSEL_BUNDLED_PLUGIN_TARGETS)
if(WSEL_BUNDLED_PLUGIN_TARGETS)
  install(TARGETS ${WSEL_BUNDLED_PLUGIN_TARGETS}
          LIBRARY DESTINATION ${WSEL_INSTALL_PLUGINDIR} COMPONENT runtime)
endif()

# --- the command -------------------------------------------------------------
file(RELATIVE_PATH wsel_bin_to_lib ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}
     ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
set_target_properties(wsel PROPERTIES INSTALL_RPATH "\$ORIGIN/${wsel_bin_to_lib}")
install(TARGETS wsel RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# The helper process of isolated mode, found next to the executable.
set_target_properties(wsel_isolated_helper PROPERTIES INSTALL_RPATH "\$ORIGIN/${wsel_bin_to_lib}")
install(TARGETS wsel_isolated_helper RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT runtime)
# The emulated engine (WSEL_REALTIME builds): the installed `wsel cluster`
# starts the wsel-engine beside it, not the build tree's.
if(TARGET wsel-engine)
  set_target_properties(wsel-engine PROPERTIES INSTALL_RPATH "\$ORIGIN/${wsel_bin_to_lib}")
  install(TARGETS wsel-engine RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()

# --- find_package(wsel) -------------------------------------------------------
install(EXPORT wsel-targets NAMESPACE wsel:: FILE wsel-targets.cmake
        DESTINATION ${WSEL_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/wsel-config.cmake.in
  ${PROJECT_BINARY_DIR}/wsel-config.cmake
  INSTALL_DESTINATION ${WSEL_INSTALL_CMAKEDIR}
  PATH_VARS WSEL_INSTALL_INCLUDEDIR WSEL_INSTALL_PLUGINDIR)
# A 1.x package serves any request for 1.y: minors only add.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wsel-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wsel-config.cmake
              ${PROJECT_BINARY_DIR}/wsel-config-version.cmake
              ${CMAKE_CURRENT_LIST_DIR}/wsel_plugin.map
              ${CMAKE_CURRENT_LIST_DIR}/WselPlugin.cmake
        DESTINATION ${WSEL_INSTALL_CMAKEDIR} COMPONENT dev)

# --- pkg-config ----------------------------------------------------------------
# prefix is computed from ${pcfiledir}, so the file survives a relocation.
file(RELATIVE_PATH wsel_pc_to_prefix
     ${CMAKE_INSTALL_PREFIX}/${WSEL_INSTALL_PKGCONFIGDIR} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" wsel_pc_to_prefix "${wsel_pc_to_prefix}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/wsel.pc.in ${PROJECT_BINARY_DIR}/wsel.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wsel.pc DESTINATION ${WSEL_INSTALL_PKGCONFIGDIR}
        COMPONENT dev)
