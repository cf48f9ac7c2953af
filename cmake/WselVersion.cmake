# SPDX-License-Identifier: Apache-2.0
# WselVersion.cmake -- the version every wsel program prints (`--version`).
#
#   <build>/generated/wsel_version.h     WSEL_VERSION from project(VERSION)
#                                        and wsel_version_print(); changes
#                                        only with the project version
#   <build>/generated/wsel_git_revision.c  the git revision, rewritten by
#                                        WselGitRevision.cmake at each build
#                                        only when the revision changed
#   wsel_version                         the static library of the two, which
#                                        wsel and wsel-engine link
set(WSEL_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
configure_file(${CMAKE_CURRENT_LIST_DIR}/wsel_version.h.in
               ${WSEL_GENERATED_DIR}/wsel_version.h @ONLY)

set(revision_c ${WSEL_GENERATED_DIR}/wsel_git_revision.c)
add_custom_target(wsel_git_revision
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${revision_c}
          -P ${CMAKE_CURRENT_LIST_DIR}/WselGitRevision.cmake
  BYPRODUCTS ${revision_c}
  COMMENT "wsel: git revision"
  VERBATIM)
add_library(wsel_version STATIC ${revision_c})
add_dependencies(wsel_version wsel_git_revision)
target_include_directories(wsel_version PUBLIC ${WSEL_GENERATED_DIR})
target_link_libraries(wsel_version PUBLIC wsel_abi)
