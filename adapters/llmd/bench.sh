#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench.sh [PODS] [ITERATIONS] -- the cost of one pick of the llm-d adapter
# (cmd/wsel-llmd-bench: Host.Select alone, the adapter's Choose, llm-d's
# scheduler with the wsel scorer and picker) beside the same policy called
# from C directly (bindings/bench/select_c.c), softmax over PODS rows.
# WSEL_PREFIX=P uses an installed prefix, else build/ is installed to a
# scratch folder. docs/integrations.md quotes its output.
set -eu
pods=${1:-8}
iters=${2:-100000}
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
(cd "$root/adapters/llmd" && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local \
    go build -o "$work/llmd_bench" ./cmd/wsel-llmd-bench)
echo "pods=$pods iterations=$iters plugin=softmax (ns per pick)"
echo "what p50 p99"
"$work/select_c" "$plugin" "$pods" "$iters"
"$work/llmd_bench" "$plugin" "$pods" "$iters"
