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
  help2man groff-base                           # man pages from --help, and their test
  python3-venv                                  # scripts/install-peers.sh: the peer routers' venv
)
# The Debian packages (debian/, scripts/package-test.sh): dpkg-buildpackage
# (dpkg-dev), debhelper, fakeroot and lintian (which brings ~120 Perl
# packages); scripts/test.sh's Release stage uses them, and the package
# test is skipped without them. WSEL_NO_PACKAGING=1 leaves them out.
if [ "${WSEL_NO_PACKAGING:-0}" != 1 ]; then
  packages+=(dpkg-dev debhelper fakeroot lintian)
fi
# The Rust host example needs cargo; take Debian's only when none is installed.
command -v cargo >/dev/null 2>&1 || packages+=(cargo)
# Replica sync (issue 28, docs/replicas.md): libwsel-router shares load
# between router replicas over NATS with the NATS C client; its tests start
# a real nats-server on loopback (skipped without it). Without libnats-dev
# the router is built without replica sync.
packages+=(
  libnats-dev                                   # libwsel-router: replica sync (NATS C client)
  nats-server                                   # tests/router: test_router_sync's server
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
install_debian_packages() {
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
install_debian_packages

# --- language bindings (bindings/, tests/bindings) ----------------------------
# Python: the cffi build of bindings/python runs with --no-build-isolation
# against these pins (pyproject.toml names the same); pytest runs its suite.
# Rust and Go: their crates and modules are fetched here only (pinned by
# Cargo.lock and go.sum); the tests then build --offline.
bindings_python=(setuptools==80.9.0 cffi==2.0.0 pytest==9.2.0)
if command -v python3 >/dev/null 2>&1; then
  python3 -m pip install --quiet "${bindings_python[@]}" ||
    echo "install-deps: pip could not install ${bindings_python[*]}; bindings/python untested" >&2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
if command -v cargo >/dev/null 2>&1; then
  cargo fetch --locked --manifest-path "$root/bindings/rust/Cargo.toml"
fi
if command -v go >/dev/null 2>&1; then
  (cd "$root/bindings/go" && go mod download)
  # adapters/llmd: the Gateway API Inference Extension's scheduling
  # framework (llm-d's scheduler), pinned by its go.sum (~75 modules).
  (cd "$root/adapters/llmd" && go mod download)
fi

# --- libwsel-tokenizer (tokenizer/, docs/tokenize.md): crates, tokenizer
# files, the Python reference. Not Debian packages: pinned, project-local,
# in their own script.
"$(dirname "$0")/install-tokenizer-deps.sh"

# --- peer routers (docs/peers.md) -------------------------------------------
# Not Debian packages: SMG and vllm-router from PyPI at pinned versions into
# .peers/venv (~260 MB, ~40 s), so the peers CTest case runs and the
# harness cannot rot; WSEL_PEERS=0 leaves them out (the case then skips).
if [ "${WSEL_PEERS:-1}" = 1 ]; then
  "$root/scripts/install-peers.sh"
fi
