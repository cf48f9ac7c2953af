#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_dynamo.sh TEST_FILE... -- the Dynamo adapter's suite
# (adapters/dynamo/tests): install wsel to a scratch prefix, build the
# Python binding against it into a scratch folder with the Dynamo venv's
# Python (scripts/install-peers.sh: .peers/dynamo-venv, or $DYNAMO_VENV),
# and run pytest on TEST_FILE... there, the adapter from the source tree.
# Exits 77 (CTest: skipped) with a message when the venv is missing.
#
# Environment (set by CTest): WSEL_BUILD_DIR, WSEL_SOURCE_DIR, WORK (scratch
# folder, wiped first), CMAKE.
set -eu

skip() {
    echo "SKIP: $*"
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

venv=${DYNAMO_VENV:-$WSEL_SOURCE_DIR/.peers/dynamo-venv}
py=$venv/bin/python
[ -x "$py" ] || skip "no Dynamo venv at $venv (scripts/install-peers.sh installs ai-dynamo)"
"$py" -c 'import dynamo.llm, cffi, pytest' 2>/dev/null ||
    skip "$venv lacks ai-dynamo, cffi or pytest (scripts/install-peers.sh)"
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config not found"

prefix=$WORK/prefix
rm -rf "$WORK"
mkdir -p "$WORK"
"$CMAKE" --install "$WSEL_BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" ||
    fail "cmake --install $WSEL_BUILD_DIR failed (see $WORK/install.log)"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
LD_LIBRARY_PATH=$prefix/lib
WSEL_PLUGIN_DIR=$prefix/lib/wsel/plugins
PYTHONDONTWRITEBYTECODE=1
export PKG_CONFIG_PATH LD_LIBRARY_PATH WSEL_PLUGIN_DIR PYTHONDONTWRITEBYTECODE
"$py" -m pip install --no-build-isolation --no-deps --quiet --disable-pip-version-check \
    --target "$WORK/site" "$WSEL_SOURCE_DIR/bindings/python" >"$WORK/pip.log" 2>&1 ||
    fail "pip install bindings/python (see $WORK/pip.log)"
tests=$WSEL_SOURCE_DIR/adapters/dynamo/tests
cd "$tests"
PYTHONPATH=$WORK/site:$WSEL_SOURCE_DIR/adapters/dynamo/src
export PYTHONPATH
exec "$py" -m pytest -p no:cacheprovider -q --basetemp "$WORK/tmp" "$@"
