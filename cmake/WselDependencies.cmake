# SPDX-License-Identifier: Apache-2.0
# WselDependencies.cmake -- find what wsel builds with, and say which Debian
# package provides it when it is missing (scripts/install-deps.sh installs
# them all).
#
#   Threads       pthreads (glibc)
#   jsmn          the header-only JSON tokenizer: libjsmn-dev
#   cmocka        the test framework: libcmocka-dev (only with WSEL_BUILD_TESTS)
include(CheckIncludeFile)

find_package(Threads REQUIRED)

find_path(WSEL_JSMN_INCLUDE_DIR jsmn.h)
if(NOT WSEL_JSMN_INCLUDE_DIR)
  message(FATAL_ERROR "wsel: jsmn.h not found; install the Debian package libjsmn-dev "
                      "(or run scripts/install-deps.sh)")
endif()

if(WSEL_BUILD_TESTS)
  find_package(cmocka QUIET CONFIG)
  if(NOT cmocka_FOUND)
    message(FATAL_ERROR "wsel: cmocka not found; install the Debian package libcmocka-dev "
                        "(or run scripts/install-deps.sh), or configure with "
                        "-DWSEL_BUILD_TESTS=OFF")
  endif()
endif()
