#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# callgrind.sh -- instructions per select at 1,024 rows, per plugin, under
# valgrind's callgrind: figures that do not move with machine noise; then
# instructions per row through the host at 1,024 and 16,384 rows, so a
# cost that grows with the table shows as a ratio above 1.
#
# usage: bench/callgrind.sh [BUILD_DIR] [PLUGIN...]
#   BUILD_DIR  a wsel build tree (default: ./build); the plugins are its
#              default set (`wsel info --list --plugins default`) unless named.
# Env: ROWS (default 1024), SELECTS (default 2000), TOP (functions listed, 3),
#      LARGE (the growth table's larger size, default 16384; 0 = no growth
#      table), LARGE_SELECTS (selects there, default 100).
#
# Method: `wsel bench --callgrind-one P` prepares SELECTS requests, then
# runs them in one function (bench_callgrind_direct_loop, or
# bench_callgrind_host_loop with --host). Collection is on only inside that
# function (--toggle-collect), so the figure is the instructions of the
# selects alone, setup excluded; divided by SELECTS it is exact and
# repeatable. The top functions by self cost name the dominant loops.
set -eu

build=${1:-build}
[ $# -gt 0 ] && shift
rows=${ROWS:-1024}
selects=${SELECTS:-2000}
top=${TOP:-3}
large=${LARGE:-16384}
large_selects=${LARGE_SELECTS:-100}
wsel=$build/bin/wsel

if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind.sh: valgrind is not installed" >&2
    exit 1
fi
if [ ! -x "$wsel" ]; then
    echo "callgrind.sh: $wsel not found (build first, or pass the build folder)" >&2
    exit 1
fi
if [ $# -eq 0 ]; then
    set --
    for p in $("$wsel" info --list --plugins default); do
        [ -f "$build/plugins/$p.so" ] && set -- "$@" "$p"
    done
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ir_per_select PLUGIN MODE(direct|host) [TEMPERATURE [ROWS SELECTS]] ->
# prints Ir/select, keeps the profile
ir_per_select() {
    out=$tmp/$1.$2.out
    flag=
    [ "$2" = host ] && flag=--host
    n=${5:-$selects}
    valgrind --tool=callgrind --toggle-collect="bench_callgrind_$2_loop" \
        --callgrind-out-file="$out" \
        "$wsel" bench --callgrind-one "$1" --rows "${4:-$rows}" --selects "$n" \
        --temperature "${3:-0}" $flag >/dev/null 2>"$tmp/log" || {
        echo "callgrind.sh: valgrind failed on $1:" >&2
        cat "$tmp/log" >&2
        return 1
    }
    total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$out" |
        head -n 1)
    awk -v t="$total" -v n="$n" 'BEGIN { printf "%.0f", t / n }'
}

# dominant PLUGIN -> the top functions by self instructions (last direct run)
dominant() {
    callgrind_annotate --inclusive=no --auto=no "$tmp/$1.direct.out" 2>/dev/null |
        awk -v top="$top" '
            /file:function/ { body = 1; next }
            body && /^ *[0-9,]+ \(/ && n < top {
                gsub(/\( +/, "(")
                pct = $2; gsub(/[()]/, "", pct)
                fn = $3; sub(/^.*:/, "", fn)
                printf "%s%s %s", (n ? ", " : ""), fn, pct; n++
            }'
}

printf "instructions per select, %s rows, %s selects (callgrind)\n" "$rows" "$selects"
printf "%-14s %12s %12s %10s  %s\n" plugin direct host host-direct "dominant (self, direct)"
# Requests at T=0 (Dynamo's default); softmax also at T=0.5, where it samples.
for p in "$@"; do
    for t in 0 0.5; do
        [ "$t" = 0 ] || [ "$p" = softmax ] || continue
        label=$p
        [ "$t" = 0 ] || label="$p@T=$t"
        d=$(ir_per_select "$p" direct "$t") || continue
        h=$(ir_per_select "$p" host "$t") || continue
        printf "%-14s %12s %12s %10s  %s\n" "$label" "$d" "$h" "$((h - d))" \
            "$(dominant "$p")"
    done
done

# Growth: host instructions per row at ROWS and LARGE rows (the small
# figure is the table's above, divided by the rows).
if [ "$large" -gt 0 ]; then
    printf "\ninstructions per row through the host, %s and %s rows (callgrind)\n" \
        "$rows" "$large"
    printf "%-14s %12s %12s %8s\n" plugin "$rows" "$large" growth
    for p in "$@"; do
        for t in 0 0.5; do
            [ "$t" = 0 ] || [ "$p" = softmax ] || continue
            label=$p
            [ "$t" = 0 ] || label="$p@T=$t"
            small=$(ir_per_select "$p" host "$t") || continue
            big=$(ir_per_select "$p" host "$t" "$large" "$large_selects") || continue
            awk -v l="$label" -v s="$small" -v b="$big" -v r="$rows" -v R="$large" \
                'BEGIN { printf "%-14s %12.1f %12.1f %8.2f\n", l, s / r, b / R, (b / R) / (s / r) }'
        done
    done
fi

# The table build: instructions per row of wsel_table_build.
out=$tmp/build.out
builds=200
if valgrind --tool=callgrind --toggle-collect=bench_callgrind_build_loop \
    --callgrind-out-file="$out" "$wsel" bench --callgrind-build --rows "$rows" \
    --selects "$builds" >/dev/null 2>"$tmp/log"; then
    total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' \
        "$out" | head -n 1)
    awk -v t="$total" -v n="$builds" -v r="$rows" \
        'BEGIN { printf "\nwsel_table_build: %.1f instructions per row (%d rows)\n", t / n / r, r }'
else
    echo "callgrind.sh: valgrind failed on the table build:" >&2
    cat "$tmp/log" >&2
fi
