#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run.sh [ROWS] [ITERATIONS] -- the cost of crossing each binding: p50 and
# p99 of one select (the bundled softmax policy, a table of ROWS rows,
# default 64) called from C directly and through the Python, Rust and Go
# bindings, each call timed by its own language's monotonic clock. Runs
# against an installed prefix: WSEL_PREFIX, else a fresh
# `cmake --install build` into a scratch folder. docs/integrations.md
# quotes its output.
set -eu
rows=${1:-64}
iters=${2:-200000}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-$(mktemp -d)}
prefix=${WSEL_PREFIX:-$work/prefix}
if [ -z "${WSEL_PREFIX:-}" ]; then
    cmake --install "$root/build" --prefix "$prefix" >"$work/install.log"
fi
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
LD_LIBRARY_PATH=$prefix/lib
export PKG_CONFIG_PATH LD_LIBRARY_PATH
plugin=$prefix/lib/wsel/plugins/softmax.so

# shellcheck disable=SC2046 # the flags are meant to split
cc -O2 -std=c11 "$root/bindings/bench/select_c.c" -o "$work/select_c" \
    $(pkg-config --cflags --libs wsel)
rm -rf "$work/site"
python3 -m pip install --no-build-isolation --no-deps --quiet --target "$work/site" \
    "$root/bindings/python" >"$work/pip.log" 2>&1
(cd "$root/bindings/rust" && CARGO_TARGET_DIR=$work/target \
    cargo build --offline --locked --release --quiet --example select_bench)
(cd "$root/bindings/go" && GOTOOLCHAIN=local go build -o "$work/select_go" ./cmd/wsel-select-bench)

echo "rows=$rows iterations=$iters plugin=softmax (ns per select)"
echo "lang p50 p99"
"$work/select_c" "$plugin" "$rows" "$iters"
PYTHONPATH=$work/site python3 "$root/bindings/bench/select_py.py" "$plugin" "$rows" "$iters"
"$work/target/release/examples/select_bench" "$plugin" "$rows" "$iters"
"$work/select_go" "$plugin" "$rows" "$iters"
