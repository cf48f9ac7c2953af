#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Generate docs/leaderboard.md: every bundled policy that runs without a
# configuration (`wsel info --list --plugins all`: softmax, the baselines,
# wsel's policies and the peer ports) through `wsel eval` on each input and
# cluster shape of docs/evaluation.md (scripts/eval-lib.sh) at 60, 80 and
# 95 % of saturation, then scripts/leaderboard.py ranks them per input,
# shape and load on hit rate, TTFT mean, TTFT p99 and flicker, and checks
# issue 30's targets (the Pareto front of hysteresis, adaptive and dpgroup
# against every peer port; hysteresis's flicker against the peers as fast).
#
#   scripts/leaderboard.sh [BUILD_DIR [OUT]]     (BUILD_DIR: build-eval)
#   TRACES=/path/to/traces SEEDS=5 JOBS=2 scripts/leaderboard.sh
#
# Env: SEEDS (5), SEED (first seed, 1), JOBS (2), LOADS (60,80,95),
# INPUTS and SHAPES (every one; a subset for a partial run), PLUGINS (the
# `all` set; names to run only those, softmax first), EXTRA (more wsel eval
# options, e.g. --requests 400 for a quick check), JSON_DIR (where each
# cell's `wsel eval --json` goes; kept, so RENDER_ONLY=1 rebuilds OUT from
# it without running anything). Needs python3.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-eval}
out=${2:-$here/docs/leaderboard.md}
traces=${TRACES:-$here/../shared/traces}
seeds=${SEEDS:-5}
first_seed=${SEED:-1}
jobs=${JOBS:-2}
loads=${LOADS:-60,80,95}
json_dir=${JSON_DIR:-${TMPDIR:-/tmp}/wsel-leaderboard}
extra=${EXTRA:-}
wsel=$build/bin/wsel
. "$here/scripts/eval-lib.sh"
inputs=${INPUTS:-$EVAL_INPUTS}
shapes=${SHAPES:-$EVAL_SHAPES}

if [ -n "${PLUGINS:-}" ]; then
    plugs=
    for p in $PLUGINS; do plugs="$plugs --plugin $p"; done
else
    plugs="--plugins all"
fi

if [ -z "${RENDER_ONLY:-}" ]; then
    [ -x "$wsel" ] || { echo "leaderboard: $wsel not built" >&2; exit 1; }
    mkdir -p "$json_dir"
    rm -f "$json_dir"/*.json "$json_dir"/*.cmd
    for input in $inputs; do
        opts=$(eval_input "$input") || { echo "leaderboard: no $input input, skipped" >&2; continue; }
        for shape in $shapes; do
            cl=$(eval_shape "$shape")
            # Word splitting: options hold no spaces (nor the traces path).
            args="$opts $cl $plugs --loads $loads --seed $first_seed --seeds $seeds --jobs $jobs --no-targets${extra:+ $extra}"
            eval_shown "wsel eval $args --json" >"$json_dir/$input-$shape.cmd"
            echo "leaderboard: $(cat "$json_dir/$input-$shape.cmd")" >&2
            start=$(date +%s)
            # shellcheck disable=SC2086
            "$wsel" eval --no-progress $args --json >"$json_dir/$input-$shape.json.tmp"
            mv "$json_dir/$input-$shape.json.tmp" "$json_dir/$input-$shape.json"
            echo "leaderboard: $input $shape in $(($(date +%s) - start)) s" >&2
        done
    done
    "$wsel" info --list >"$json_dir/roles.txt"
fi

# The line that reproduces this file, as its header quotes it.
line="SEEDS=$seeds scripts/leaderboard.sh"
[ -n "${INPUTS:-}" ] && line="INPUTS=\"$inputs\" $line"
[ -n "${SHAPES:-}" ] && line="SHAPES=\"$shapes\" $line"
python3 "$here/scripts/leaderboard.py" "$json_dir" "$json_dir/roles.txt" "$line" >"$out.tmp"
mv "$out.tmp" "$out"
echo "leaderboard: wrote $out" >&2
