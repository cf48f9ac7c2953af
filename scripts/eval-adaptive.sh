#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The adaptive policy beside the fixed settings of its family (hysteresis
# with load_slack 0, 0.25, 0.5 (its default), 1 and 2) and softmax: `wsel
# eval` on each input (the arxiv slice and the conversation workload, which
# the default was chosen on; the synthetic trace and the shared-prefix
# workload, held out) and each cluster shape (4 x 4, 2 x 8, mixed 8 + 8 x 1,
# 16 x 1), one Markdown file per pair in OUT (docs/eval/ by default), named
# adaptive-INPUT-SHAPE.md, then adaptive-summary.md: per input, shape and
# load the best fixed setting (chosen after the fact, lowest mean TTFT p99),
# its p99, adaptive's, their ratio, whether adaptive is within 3 % of it,
# and whether adaptive beats softmax where a fixed setting significantly
# does.
#
#   scripts/eval-adaptive.sh [BUILD_DIR [OUT]]      (BUILD_DIR: build-eval)
#   TRACES=/path/to/traces JOBS=2 SEEDS=5 ONLY="arxiv conversation" \
#       scripts/eval-adaptive.sh
#
# Each file starts with the command that produced it. The traces are
# skipped when TRACES has no copy; SUMMARY_ONLY=1 rebuilds the summary from
# the files already in OUT.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-eval}
out=${2:-$here/docs/eval}
traces=${TRACES:-$here/../shared/traces}
jobs=${JOBS:-2}
seeds=${SEEDS:-5}
only=${ONLY:-arxiv conversation shared-prefix synthetic}
wsel=$build/bin/wsel
metrics=ttft_p99_ms,ttft_mean_ms,kv_hit_rate,flicker_rate
family="hysteresis:{\"load_slack\":0} hysteresis:{\"load_slack\":0.25} hysteresis:{}
hysteresis:{\"load_slack\":1} hysteresis:{\"load_slack\":2}"

run() { # NAME INPUT-OPTIONS...
    name=$1
    shift
    for shape in 4x4 2x8 mixed 16x1; do
        case $shape in
        4x4) cl="--workers 4 --dp 4" ;;
        2x8) cl="--workers 2 --dp 8" ;;
        mixed) cl="--workers 9 --dp 8,1,1,1,1,1,1,1,1" ;;
        16x1) cl="--workers 16 --dp 1" ;;
        esac
        # The configurations hold no spaces: word splitting keeps each whole.
        plugs="--plugin softmax"
        pl="--plugin softmax"
        for f in $family; do
            plugs="$plugs --plugin ${f%%:*} --config ${f#*:}"
            pl="$pl --plugin ${f%%:*} --config '${f#*:}'"
        done
        plugs="$plugs --plugin adaptive"
        pl="$pl --plugin adaptive"
        file=$out/adaptive-$name-$shape.md
        # shellcheck disable=SC2086
        cmd="wsel eval $input_shown $cl $pl --seeds $seeds --jobs $jobs --no-targets --metrics $metrics"
        echo "eval-adaptive: $cmd" >&2
        start=$(date +%s)
        {
            printf '```\n%s\n```\n\n' "$cmd"
            # shellcheck disable=SC2086
            nice -n 5 "$wsel" eval --no-progress "$@" $cl $plugs --seeds "$seeds" \
                --jobs "$jobs" --no-targets --metrics "$metrics"
        } >"$file.tmp"
        mv "$file.tmp" "$file"
        echo "eval-adaptive: $file in $(($(date +%s) - start)) s" >&2
    done
}

want() { case " $only " in *" $1 "*) return 0 ;; esac; return 1; }

if [ -z "${SUMMARY_ONLY:-}" ]; then
    [ -x "$wsel" ] || { echo "eval-adaptive: $wsel not built" >&2; exit 1; }
    mkdir -p "$out"
    a=$traces/mooncake_arxiv_slice.jsonl
    if want arxiv && [ -f "$a" ]; then
        input_shown="--trace ../shared/traces/mooncake_arxiv_slice.jsonl --jitter-ms 1000"
        run arxiv --trace "$a" --jitter-ms 1000
    fi
    if want conversation; then
        input_shown="--workload conversation"
        run conversation --workload conversation
    fi
    if want shared-prefix; then
        input_shown="--workload shared-prefix"
        run shared-prefix --workload shared-prefix
    fi
    s=$traces/mooncake_synthetic_trace.jsonl
    if want synthetic && [ -f "$s" ]; then
        input_shown="--trace ../shared/traces/mooncake_synthetic_trace.jsonl --jitter-ms 250"
        run synthetic --trace "$s" --jitter-ms 250
    fi
fi

# The summary, from the ttft_p99_ms column of every table.
{
    echo "| input | shape | load | best fixed (load_slack) | its p99 ms | adaptive p99 ms | ratio | within 3 % | softmax p99 ms | adaptive vs softmax |"
    echo "|---|---|---:|---|---:|---:|---:|---|---:|---|"
    for input in arxiv conversation shared-prefix synthetic; do
        for shape in 4x4 2x8 mixed 16x1; do
            f=$out/adaptive-$input-$shape.md
            [ -f "$f" ] || continue
            awk -v input="$input" -v shape="$shape" '
                function flush() {
                    if (load == "") return
                    r = ap / bp
                    met = r <= 1.03 ? "met" : "**not met**"
                    # a fixed setting significantly below softmax obliges
                    # adaptive to be below softmax too
                    if (fixsig) sm = (ap < sp ? "better" (asig ? " (sig.)" : "") : "**not better**")
                    else sm = "- (no fixed setting better)"
                    printf "| %s | %s | %s | %s | %.0f | %.0f | %.3f | %s | %.0f | %s |\n",
                        input, shape, load, best, bp, ap, r, met, sp, sm
                }
                /% of saturation/ { flush(); load = $1 " %"; bp = 1e300; fixsig = 0; next }
                /^\| policy \|/ {
                    nc = split($0, h, "|")
                    for (i = 1; i <= nc; i++) if (h[i] ~ /ttft_p99_ms/) col = i
                    next
                }
                /^\| (softmax|hysteresis|adaptive)/ {
                    split($0, c, "|"); name = c[2]; gsub(/^ +| +$/, "", name)
                    v = c[col]; sig = v ~ /\*/; split(v, n, " "); p = n[1] + 0
                    if (name == "softmax") sp = p
                    else if (name == "adaptive") { ap = p; asig = sig && p < sp }
                    else {
                        slack = "0.5"
                        if (match(name, /"load_slack":[0-9.]+/))
                            slack = substr(name, RSTART + 13, RLENGTH - 13)
                        if (p < bp) { bp = p; best = slack }
                        if (sig && p < sp) fixsig = 1
                    }
                }
                END { flush() }' "$f"
        done
    done
} >"$out/adaptive-summary.md"
cat "$out/adaptive-summary.md"
