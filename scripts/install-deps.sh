#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-deps.sh -- install the Debian 12 packages wsel needs to build and test.
# Idempotent; uses sudo when not run as root.
set -euo pipefail

packages=(
  cmake make gcc g++ clang libclang-rt-14-dev   # compilers, sanitizers, libFuzzer
  libcmocka-dev                                 # unit tests
  libjsmn-dev                                   # JSON (header-only)
  pkg-config                                    # the installed wsel.pc is tested
  gnuplot-nox                                   # wsel sim --plot
  valgrind                                      # bench/callgrind.sh
  python3                                       # examples/python-host
  libmicrohttpd-dev libcurl4-openssl-dev        # wsel-engine, wsel replay: HTTP
  libzmq3-dev libmsgpack-dev                    # wsel-engine: KV events
  libxxhash-dev                                 # libwsel-router: XXH3 block hashes
  nginx nginx-dev                               # nginx/ (issue 16): the upstream module
  prometheus                                    # promtool: tests/nginx only, skipped without (~96 MB)
)
# The Rust host example needs cargo; take Debian's only when none is installed.
command -v cargo >/dev/null 2>&1 || packages+=(cargo)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- libwsel-tokenizer (issue 29): crates, tokenizer files, Python reference.
# Not Debian packages: pinned, project-local, in their own script.
"$(dirname "$0")/install-tokenizer-deps.sh"
