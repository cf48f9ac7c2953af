#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# eval-bound.sh -- how far routing can go on dpgroup's targets (issue 12;
# docs/evaluation.md "How far routing can go"): the same checks made on
# dpgroup and on the diagnostic router sim/model_greedy (the row whose
# first token the simulator's own engine model predicts earliest: what a
# router that knew the engine exactly would pick), on every input and
# shape of docs/eval/, at 80 and 95 % of the saturation found there.
#
#   scripts/eval-bound.sh [BUILD_DIR [OUT]]  (BUILD_DIR: build-eval; OUT: docs/eval/bound)
#   TRACES=/path/to/traces SEEDS=5 SEED=1 JOBS=2 scripts/eval-bound.sh
#
# Per input and shape, OUT/INPUT-SHAPE.md holds two `wsel eval` runs, each
# after its command: softmax and dpgroup with dpgroup's checks; softmax and
# model_greedy, loaded under dpgroup's name from a private folder put first
# on WSEL_PLUGIN_PATH so that `wsel eval` makes the same checks on it (the
# second run's rows are renamed model_greedy). OUT/summary.md counts the checks
# met per input, shape and kind for both. The saturation (speedup) and the
# command line of each cell come from docs/eval/INPUT-SHAPE.md; the traces
# are skipped when TRACES has no copy.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-eval}
out=${2:-$here/docs/eval/bound}
traces=${TRACES:-$here/../shared/traces}
seeds=${SEEDS:-5}
seed=${SEED:-1}
jobs=${JOBS:-2}
wsel=$build/bin/wsel
greedy=$build/diagnostics/model_greedy.so
metrics=kv_hit_rate,ttft_mean_ms,ttft_p99_ms,group_load_imbalance

for f in "$wsel" "$greedy"; do
    if [ ! -e "$f" ]; then
        echo "eval-bound.sh: $f not found (build first, or pass the build folder)" >&2
        exit 1
    fi
done
mkdir -p "$out"
alias_dir=$(mktemp -d)
trap 'rm -rf "$alias_dir"' EXIT
cp "$greedy" "$alias_dir/dpgroup.so"

for input in arxiv synthetic conversation shared-prefix; do
    for shape in 4x4 2x8 mixed 16x1; do
        table=$here/docs/eval/$input-$shape.md
        # The command's input and shape: the first line of the table's
        # file, without its own seeds, jobs and metrics.
        line=$(sed -n 2p "$table")
        shown=$(printf '%s\n' "$line" | sed -e 's/^wsel eval //' \
            -e 's/--seeds [0-9]*//; s/--jobs [0-9]*//; s/--metrics [^ ]*//' | tr -s ' ')
        args=$(printf '%s\n' "$shown" | sed "s|\.\./shared/traces/|$traces/|")
        case $args in
        *--trace*)
            trace=$(printf '%s\n' "$args" | sed 's/.*--trace \([^ ]*\).*/\1/')
            if [ ! -f "$trace" ]; then
                echo "eval-bound.sh: $trace not found, $input skipped" >&2
                continue
            fi
            ;;
        esac
        sat=$(awk '/^saturation: speedup/ { print $3; exit }' "$table")
        file=$out/$input-$shape.md
        echo "eval-bound.sh: $input $shape, saturation $sat" >&2
        {
            for pair in dpgroup model_greedy; do
                path='' env=''
                if [ "$pair" = model_greedy ]; then
                    path=$alias_dir
                    env="WSEL_PLUGIN_PATH=DIR_WITH_model_greedy.so_AS_dpgroup.so "
                fi
                # shellcheck disable=SC2016
                printf '%s\n\n```\n%s\n```\n\n' "### softmax and $pair" \
                    "${env}wsel eval ${shown% } --loads 80,95 --saturation $sat --seeds $seeds --seed $seed --plugin softmax --plugin dpgroup"
                # shellcheck disable=SC2086
                WSEL_PLUGIN_PATH=$path${WSEL_PLUGIN_PATH:+:$WSEL_PLUGIN_PATH} \
                    "$wsel" eval --no-progress $args --loads 80,95 --saturation "$sat" \
                    --seeds "$seeds" --seed "$seed" --jobs "$jobs" --metrics "$metrics" \
                    --plugin softmax --plugin dpgroup |
                    sed "s/| dpgroup |/| $pair |/"
                echo
            done
        } >"$file.tmp"
        mv "$file.tmp" "$file"
    done
done

# Checks met per cell: the TTFT p99 bound and group imbalance on the DP
# shapes, "no worse than softmax" on 16 x 1; dpgroup's from the first run
# of each file, model_greedy's from the second.
{
    echo "| input | shape | dpgroup: TTFT | dpgroup: group imbalance | model_greedy: TTFT | model_greedy: group imbalance |"
    echo "|---|---|---|---|---|---|"
    for f in "$out"/*-*.md; do
        [ -f "$f" ] || continue
        base=$(basename "$f" .md)
        case $base in summary) continue ;; esac
        awk -v name="${base%-*}" -v shape="${base##*-}" '
            /^### softmax and model_greedy/ { run = 2 }
            /^### softmax and dpgroup/ { run = 1 }
            /^\| [0-9]+ % \| (dpgroup|model_greedy) \|/ {
                kind = ($0 ~ /group imbalance/) ? "imb" : "p99"
                n[run, kind]++; if ($0 !~ /not met/) m[run, kind]++
            }
            function cell(r, k) { return n[r, k] ? (m[r, k] + 0) "/" n[r, k] : "-" }
            END {
                print "| " name " | " shape " | " cell(1, "p99") " | " cell(1, "imb") \
                    " | " cell(2, "p99") " | " cell(2, "imb") " |"
            }' "$f"
    done
} >"$out/summary.md"
cat "$out/summary.md"
