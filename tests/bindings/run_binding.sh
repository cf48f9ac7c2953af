#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_binding.sh LANG -- install wsel to a scratch prefix and run the LANG
# binding's own suite (bindings/LANG; llmd: the llm-d adapter,
# adapters/llmd) against that prefix alone: found by
# pkg-config (PKG_CONFIG_PATH), loaded through LD_LIBRARY_PATH, with the
# installed plugins (WSEL_PLUGIN_DIR). Exits 77 (CTest: skipped) with a
# message when LANG's toolchain is missing.
#
# Environment (set by CTest): WSEL_BUILD_DIR, WSEL_SOURCE_DIR, WORK (scratch
# folder, wiped first), CMAKE.
set -eu
lang=$1

skip() {
    echo "SKIP: $*"
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

case $lang in
python)
    command -v python3 >/dev/null 2>&1 || skip "python3 not found"
    # setuptools builds wheels by itself from 70.1 (bdist_wheel), or with wheel.
    python3 -c 'import cffi, pytest, setuptools.command.bdist_wheel' 2>/dev/null ||
        python3 -c 'import cffi, pytest, setuptools, wheel' 2>/dev/null ||
        skip "python3 lacks cffi, pytest or a wheel-building setuptools (scripts/install-deps.sh)"
    ;;
rust)
    command -v cargo >/dev/null 2>&1 || skip "cargo not found"
    ;;
go | llmd)
    command -v go >/dev/null 2>&1 || skip "go not found"
    ;;
*) fail "unknown binding $lang" ;;
esac
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config not found"

prefix=$WORK/prefix
rm -rf "$WORK"
mkdir -p "$WORK"
"$CMAKE" --install "$WSEL_BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" ||
    fail "cmake --install $WSEL_BUILD_DIR failed (see $WORK/install.log)"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
LD_LIBRARY_PATH=$prefix/lib
WSEL_PLUGIN_DIR=$prefix/lib/wsel/plugins
# Each suite checks that the libraries it loaded come from here.
WSEL_PREFIX=$prefix
export PKG_CONFIG_PATH LD_LIBRARY_PATH WSEL_PLUGIN_DIR WSEL_PREFIX
src=$WSEL_SOURCE_DIR/bindings/$lang
[ "$lang" = llmd ] && src=$WSEL_SOURCE_DIR/adapters/llmd

case $lang in
python)
    # The system's pinned setuptools and cffi build it (no download).
    python3 -m pip install --no-build-isolation --no-deps --quiet \
        --target "$WORK/site" "$src" >"$WORK/pip.log" 2>&1 ||
        fail "pip install $src (see $WORK/pip.log)"
    cd "$src/tests"
    PYTHONPATH=$WORK/site exec python3 -m pytest -p no:cacheprovider -q .
    ;;
rust)
    cd "$src"
    CARGO_TARGET_DIR=$WORK/target exec cargo test --offline --locked --quiet
    ;;
go)
    cd "$src"
    export GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=1
    go vet ./... # builds the commands (the example and the benchmark) too
    exec go test -count=1 -v ./...
    ;;
llmd)
    # The modules scripts/install-deps.sh downloaded (go.sum pins them);
    # GOPROXY=off: never a download here, a missing one fails.
    cd "$src"
    export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1
    go vet ./... # builds the benchmark command too
    exec go test -count=1 -v ./...
    ;;
esac
