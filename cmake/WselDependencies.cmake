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

# The real-time programs (WSEL_REALTIME, on by default): wsel-engine, an
# emulated vLLM-like worker, and `wsel replay` / `wsel cluster`.
#   libmicrohttpd  HTTP server:               libmicrohttpd-dev
#   libcurl        HTTP client (multi API):   libcurl4-openssl-dev
#   libzmq         KV events (PUB, ROUTER):   libzmq3-dev
#   msgpack-c      KV event encoding:         libmsgpack-dev
# Each becomes an imported target wsel_dep::NAME.
option(WSEL_REALTIME "Build wsel-engine and wsel replay/cluster (HTTP, ZeroMQ, msgpack)"
       ON)
if(WSEL_REALTIME)
  foreach(dep "microhttpd;microhttpd.h;microhttpd;libmicrohttpd-dev"
              "curl;curl/curl.h;curl;libcurl4-openssl-dev"
              "zmq;zmq.h;zmq;libzmq3-dev"
              "msgpack;msgpack.h;msgpackc;libmsgpack-dev")
    list(GET dep 0 name)
    list(GET dep 1 header)
    list(GET dep 2 lib)
    list(GET dep 3 package)
    find_path(WSEL_${name}_INCLUDE_DIR ${header})
    find_library(WSEL_${name}_LIBRARY ${lib})
    if(NOT WSEL_${name}_INCLUDE_DIR OR NOT WSEL_${name}_LIBRARY)
      message(FATAL_ERROR "wsel: ${header} or lib${lib} not found; install the Debian "
                          "package ${package} (or run scripts/install-deps.sh), or "
                          "configure with -DWSEL_REALTIME=OFF")
    endif()
    if(NOT TARGET wsel_dep::${name})
      add_library(wsel_dep::${name} INTERFACE IMPORTED)
      set_target_properties(wsel_dep::${name} PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${WSEL_${name}_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES "${WSEL_${name}_LIBRARY}")
    endif()
  endforeach()
endif()

# libwsel-router (router/, on with WSEL_REALTIME: it also needs libzmq and
# msgpack-c above):
#   xxHash   XXH3 block hashes:            libxxhash-dev
if(WSEL_REALTIME)
  find_path(WSEL_xxhash_INCLUDE_DIR xxhash.h)
  find_library(WSEL_xxhash_LIBRARY xxhash)
  if(NOT WSEL_xxhash_INCLUDE_DIR OR NOT WSEL_xxhash_LIBRARY)
    message(FATAL_ERROR "wsel: xxhash.h or libxxhash not found; install the Debian "
                        "package libxxhash-dev (or run scripts/install-deps.sh), or "
                        "configure with -DWSEL_REALTIME=OFF")
  endif()
  if(NOT TARGET wsel_dep::xxhash)
    add_library(wsel_dep::xxhash INTERFACE IMPORTED)
    set_target_properties(wsel_dep::xxhash PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${WSEL_xxhash_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${WSEL_xxhash_LIBRARY}")
  endif()
endif()

# libwsel-router's replica sync (optional, docs/replicas.md):
#   libnats  the NATS C client:            libnats-dev
# Found: wsel_dep::nats and WSEL_HAVE_NATS; missing, or -DWSEL_NATS=OFF:
# built without it (wsel_router_sync_start answers WSEL_ESTATE).
option(WSEL_NATS "libwsel-router's replica sync over NATS (libnats-dev)" ON)
set(WSEL_HAVE_NATS OFF)
if(WSEL_REALTIME AND WSEL_NATS)
  find_path(WSEL_nats_INCLUDE_DIR nats/nats.h)
  find_library(WSEL_nats_LIBRARY nats)
  if(WSEL_nats_INCLUDE_DIR AND WSEL_nats_LIBRARY)
    set(WSEL_HAVE_NATS ON)
    if(NOT TARGET wsel_dep::nats)
      add_library(wsel_dep::nats INTERFACE IMPORTED)
      set_target_properties(wsel_dep::nats PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${WSEL_nats_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES "${WSEL_nats_LIBRARY}")
    endif()
  else()
    message(STATUS "wsel: libnats not found (Debian package libnats-dev): "
                   "libwsel-router is built without replica sync")
  endif()
endif()
