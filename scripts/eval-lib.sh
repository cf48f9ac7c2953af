# SPDX-License-Identifier: Apache-2.0
# The inputs and cluster shapes of docs/evaluation.md, shared by the
# scripts that run `wsel eval` over them (eval-all.sh, leaderboard.sh).
# Source it after setting `traces` (the folder holding the Mooncake
# traces); it defines:
#   EVAL_INPUTS, EVAL_SHAPES    every input and shape, in report order
#   eval_input NAME             the input's options (traces at $traces);
#                               fails when the trace is not there
#   eval_shape SHAPE            the cluster's options
#   eval_shown TEXT             TEXT with $traces/ written ../shared/traces/
#                               (the command as docs/ print it)

EVAL_INPUTS="arxiv synthetic conversation shared-prefix"
EVAL_SHAPES="4x4 2x8 mixed 16x1"

eval_input() {
    case $1 in
    arxiv)
        [ -f "$traces/mooncake_arxiv_slice.jsonl" ] || return 1
        echo "--trace $traces/mooncake_arxiv_slice.jsonl --jitter-ms 1000" ;;
    synthetic)
        [ -f "$traces/mooncake_synthetic_trace.jsonl" ] || return 1
        echo "--trace $traces/mooncake_synthetic_trace.jsonl --jitter-ms 250" ;;
    conversation | shared-prefix) echo "--workload $1" ;;
    *) echo "eval-lib: unknown input $1" >&2; return 1 ;;
    esac
}

eval_shape() {
    case $1 in
    4x4) echo "--workers 4 --dp 4" ;;
    2x8) echo "--workers 2 --dp 8" ;;
    mixed) echo "--workers 9 --dp 8,1,1,1,1,1,1,1,1" ;;
    16x1) echo "--workers 16 --dp 1" ;;
    *) echo "eval-lib: unknown shape $1" >&2; return 1 ;;
    esac
}

eval_shown() {
    printf '%s' "$1" | sed "s|$traces/|../shared/traces/|g"
}
