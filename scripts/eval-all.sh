#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Regenerate every table of docs/evaluation.md: `wsel eval` on each input
# (the Mooncake synthetic trace, the arxiv slice, the conversation and
# shared-prefix workloads) and each cluster shape (4 x 4, 2 x 8, mixed
# 8 + 8 x 1, 16 x 1), one Markdown file per pair in OUT (docs/eval/ by
# default). The tables are then pasted or linked from docs/evaluation.md.
#
#   scripts/eval-all.sh [BUILD_DIR [OUT]]      (BUILD_DIR: build-eval)
#   TRACES=/path/to/traces JOBS=2 SEED=1 SEEDS=5 scripts/eval-all.sh
#
# SEED is the first seed (1): SEED=41 repeats every table on seeds no
# choice was made on.
#
# Each file starts with the command that produced it; summary.md counts
# the issue-12 targets met per input, shape and policy. The traces are
# skipped when TRACES has no copy.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-eval}
out=${2:-$here/docs/eval}
traces=${TRACES:-$here/../shared/traces}
jobs=${JOBS:-2}
seeds=${SEEDS:-5}
first_seed=${SEED:-1}
wsel=$build/bin/wsel
[ -x "$wsel" ] || { echo "eval-all: $wsel not built" >&2; exit 1; }
mkdir -p "$out"
. "$here/scripts/eval-lib.sh"
metrics=kv_hit_rate,ttft_mean_ms,ttft_p99_ms,flicker_rate,prefix_copies,group_load_imbalance

run() { # NAME INPUT-OPTIONS...
    name=$1
    shift
    for shape in $EVAL_SHAPES; do
        cl=$(eval_shape "$shape")
        file=$out/$name-$shape.md
        # shellcheck disable=SC2086
        cmd=$(eval_shown "wsel eval $* $cl --seed $first_seed --seeds $seeds --jobs $jobs --metrics $metrics")
        echo "eval-all: $cmd" >&2
        start=$(date +%s)
        # CPU time (user + sys of eval and its forked runs) when
        # /usr/bin/time exists: on a shared machine it, halved, estimates
        # the wall time of --jobs 2 on 2 idle cores.
        timer=
        [ -x /usr/bin/time ] && timer="/usr/bin/time -f %U+%S -o $file.cpu"
        {
            # shellcheck disable=SC2016
            printf '```\n%s\n```\n\n' "$cmd"
            # shellcheck disable=SC2086
            $timer "$wsel" eval --no-progress "$@" $cl --seed "$first_seed" --seeds "$seeds" \
                --jobs "$jobs" --metrics "$metrics"
        } >"$file.tmp"
        mv "$file.tmp" "$file"
        cpu=
        if [ -f "$file.cpu" ]; then
            cpu=", cpu $(tail -n 1 "$file.cpu" | awk -F+ '{ print $1 + $2 }') s"
            rm -f "$file.cpu"
        fi
        echo "eval-all: $file in $(($(date +%s) - start)) s$cpu" >&2
    done
}

for input in $EVAL_INPUTS; do
    # Word splitting: the traces path must hold no space.
    # shellcheck disable=SC2046
    opts=$(eval_input "$input") && run "$input" $opts
done

# One line per input and shape: saturation and the targets met (of those
# checked at 60, 80 and 95 % of saturation) per policy.
{
    echo "| input | shape | saturation (speedup) | hysteresis | dpgroup | chash |"
    echo "|---|---|---:|---|---|---|"
    for f in "$out"/arxiv-*.md "$out"/synthetic-*.md "$out"/conversation-*.md \
        "$out"/shared-prefix-*.md; do
        [ -f "$f" ] || continue
        base=$(basename "$f" .md)
        awk -v name="${base%-*}" -v shape="${base##*-}" '
            /^saturation: speedup/ { sat = $3 }
            /^\| [0-9]+ % \| (hysteresis|dpgroup|chash) \|/ {
                split($0, c, "|"); p = c[3]; gsub(/ /, "", p)
                n[p]++; if ($0 !~ /not met/) m[p]++
            }
            END {
                line = "| " name " | " shape " | " sat
                split("hysteresis dpgroup chash", ps, " ")
                for (i = 1; i <= 3; i++)
                    line = line " | " (n[ps[i]] ? (m[ps[i]] + 0) "/" n[ps[i]] : "-")
                print line " |"
            }' "$f"
    done
} >"$out/summary.md"
cat "$out/summary.md"
