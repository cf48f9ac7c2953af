#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh [SECONDS [BUILD_DIR]] -- build the libFuzzer harnesses and fuzz each.
#
# Configures (clang, WSEL_FUZZ=ON) and builds the fuzz build in BUILD_DIR
# (default $WSEL_FUZZ_BUILD_DIR, else build-fuzz at the top of the tree),
# then runs every fuzz_* executable in its tests/ folder -- ours from
# tests/fuzz and any other part's (tests/sim has a trace-line fuzzer) -- for
# SECONDS each (default 60), one after the other, on a temporary copy of its
# seed corpus (tests/*/corpus/<harness>/), so the committed corpus never
# grows.
#
# Prints executions and crashes per harness; a crashing input is kept in
# $BUILD/fuzz-artifacts/<harness>/ and its path printed. Exits 1 if any
# harness crashed, 2 if the build failed.
#
# Extra libFuzzer flags: WSEL_FUZZ_ARGS, e.g. "-fork=2 -ignore_crashes=1" to
# keep fuzzing past a known crash (then every crash is kept and counted).
set -u

seconds=${1:-60}
case $seconds in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS [BUILD_DIR]]" >&2
    exit 2
    ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-${WSEL_FUZZ_BUILD_DIR:-$root/build-fuzz}}
mkdir -p "$build" && build=$(cd "$build" && pwd)
extra_args=${WSEL_FUZZ_ARGS:-}

# A new build dir is configured for fuzzing; an existing one is refreshed
# (cheap, and picks up new fuzz_* targets) and must already be one.
if [ -f "$build/CMakeCache.txt" ]; then
    configure=(cmake -S "$root" -B "$build")
else
    configure=(cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DWSEL_FUZZ=ON
        -DWSEL_SANITIZE= -DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
if ! "${configure[@]}" >"$build/fuzz-configure.log" 2>&1; then
    tail -40 "$build/fuzz-configure.log" >&2
    echo "run.sh: configure failed (full log: $build/fuzz-configure.log)" >&2
    exit 2
fi
if ! grep -q '^WSEL_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "run.sh: $build is not a fuzz build (configure it with -DWSEL_FUZZ=ON" \
        "-DCMAKE_C_COMPILER=clang, or pick another folder)" >&2
    exit 2
fi
targets=$(cmake --build "$build" --target help 2>/dev/null |
    grep -oE '(^|[^A-Za-z0-9_])fuzz_[A-Za-z0-9_]+' | grep -oE 'fuzz_[A-Za-z0-9_]+' |
    grep -vE '_(replay|corpus|host)$' | sort -u)
if [ -z "$targets" ]; then
    echo "run.sh: no fuzz_* targets in $build (is WSEL_FUZZ=ON there?)" >&2
    exit 2
fi
# shellcheck disable=SC2086
if ! cmake --build "$build" -j2 --target $targets >"$build/fuzz-build.log" 2>&1; then
    tail -40 "$build/fuzz-build.log" >&2
    echo "run.sh: build failed (full log: $build/fuzz-build.log)" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
crashed=0
ran=0
for bin in "$build"/tests/fuzz_*; do
    name=$(basename "$bin")
    if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
        continue
    fi
    case $name in *_replay | *.*) continue ;; esac
    ran=$((ran + 1))

    corpus=$work/$name/corpus
    artifacts=$build/fuzz-artifacts/$name
    mkdir -p "$corpus" "$artifacts"
    for seeds in "$root"/tests/*/corpus/"$name"; do
        [ -d "$seeds" ] && cp "$seeds"/* "$corpus"/ 2>/dev/null
    done
    seeds_count=$(find "$corpus" -type f | wc -l)

    log=$work/$name/log
    touch "$work/$name/start"
    before=$(find "$artifacts" -type f | wc -l)
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" $extra_args "$corpus" >"$log" 2>&1
    status=$?
    after=$(find "$artifacts" -type f | wc -l)
    # The final stats line; in -fork mode, the last progress line "#N ...".
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -1)
    crashes=$((after - before))
    if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes=1
    fi
    grown=$(find "$corpus" -type f | wc -l)
    echo "$name: ${execs:-?} executions in ${seconds} s, corpus $seeds_count -> $grown," \
        "$crashes crashes"
    if [ "$crashes" -ne 0 ]; then
        crashed=1
        grep -m 5 -E 'ERROR|SUMMARY|breach|VIOLATION|^fuzz_' "$log" | sed 's/^/    /'
        find "$artifacts" -type f -newer "$work/$name/start" | sed 's/^/    reproducer: /'
        cp "$log" "$build/fuzz-artifacts/$name.log"
        echo "    full log: $build/fuzz-artifacts/$name.log"
    fi
done

if [ "$ran" -eq 0 ]; then
    echo "run.sh: no fuzz_* executables in $build/tests" >&2
    exit 2
fi
exit "$crashed"
