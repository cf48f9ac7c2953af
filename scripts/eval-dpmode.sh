#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# eval-dpmode.sh -- dpgroup on data-parallel engines whose ranks step
# independently (`--dp-mode independent`: dense-model DP, each rank its own
# engine), the case dpgroup's default `lockstep` score does not model
# (docs/policies.md "Which mode: the rule"; docs/evaluation.md "dpgroup on
# independent ranks"). Per input (the arxiv slice, the conversation and
# shared-prefix workloads, the synthetic trace) and DP shape (4 x 4, 2 x 8,
# mixed 8 + 8 x 1), `wsel eval` runs softmax, dpgroup (default) and
# dpgroup `two-level` at 60, 80 and 95 % of the saturation it finds on
# that cluster, with SEEDS seeds from SEED.
#
#   scripts/eval-dpmode.sh [BUILD_DIR [OUT]]    (BUILD_DIR: build-eval; OUT: docs/eval/independent)
#   TRACES=/path/to/traces SEEDS=10 SEED=1 JOBS=2 JSON_DIR=/tmp/x scripts/eval-dpmode.sh
#
# JSON_DIR/INPUT-SHAPE.json is each run's `wsel eval --json` (JSON_DIR:
# $TMPDIR/wsel-eval-dpmode); OUT/commands.md their commands; OUT/summary.md has,
# per input, shape, load and dpgroup mode, the ratios to softmax of TTFT
# mean and p99 and of the hit rate (* where the paired difference is
# significant at 95 %), then the counts of significant wins and losses.
# The traces are skipped when TRACES has no copy. Needs python3.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-eval}
out=${2:-$here/docs/eval/independent}
traces=${TRACES:-$here/../shared/traces}
seeds=${SEEDS:-10}
seed=${SEED:-1}
jobs=${JOBS:-2}
json_dir=${JSON_DIR:-${TMPDIR:-/tmp}/wsel-eval-dpmode}
wsel=$build/bin/wsel

[ -x "$wsel" ] || { echo "eval-dpmode.sh: $wsel not built" >&2; exit 1; }
mkdir -p "$out" "$json_dir"
# shellcheck disable=SC2016
printf '# The runs behind summary.md\n\n```sh\n' >"$out/commands.md"

run() { # NAME SHOWN-INPUT INPUT-OPTIONS...
    name=$1
    shown=$2
    shift 2
    for shape in 4x4 2x8 mixed; do
        case $shape in
        4x4) cl="--workers 4 --dp 4" ;;
        2x8) cl="--workers 2 --dp 8" ;;
        mixed) cl="--workers 9 --dp 8,1,1,1,1,1,1,1,1" ;;
        esac
        rest="--dp-mode independent --loads 60,80,95 --seed $seed --seeds $seeds --jobs $jobs"
        echo "wsel eval $shown $cl $rest --plugin softmax --plugin dpgroup" \
            "--plugin dpgroup --config '{\"mode\":\"two-level\"}' --json" >>"$out/commands.md"
        start=$(date +%s)
        # shellcheck disable=SC2086
        "$wsel" eval --no-progress "$@" $cl $rest --plugin softmax --plugin dpgroup \
            --plugin dpgroup --config '{"mode":"two-level"}' --json >"$json_dir/$name-$shape.json.tmp"
        mv "$json_dir/$name-$shape.json.tmp" "$json_dir/$name-$shape.json"
        echo "eval-dpmode: $name $shape in $(($(date +%s) - start)) s" >&2
    done
}

a=$traces/mooncake_arxiv_slice.jsonl
if [ -f "$a" ]; then
    run arxiv "--trace ../shared/traces/mooncake_arxiv_slice.jsonl --jitter-ms 1000" \
        --trace "$a" --jitter-ms 1000
fi
run conversation "--workload conversation" --workload conversation
run shared-prefix "--workload shared-prefix" --workload shared-prefix
s=$traces/mooncake_synthetic_trace.jsonl
if [ -f "$s" ]; then
    run synthetic "--trace ../shared/traces/mooncake_synthetic_trace.jsonl --jitter-ms 250" \
        --trace "$s" --jitter-ms 250
fi

echo '```' >>"$out/commands.md"

python3 - "$json_dir" >"$out/summary.md" <<'PY'
import json, os, sys

json_dir = sys.argv[1]
metrics = (("ttft_mean_ms", "TTFT mean", -1), ("ttft_p99_ms", "TTFT p99", -1),
           ("kv_hit_rate", "hit rate", 1))
print("dpgroup against softmax on independent DP ranks (`--dp-mode independent`);")
print("ratio = dpgroup / softmax, `*` = paired difference significant at 95 %.")
print("Commands: commands.md beside this file.")
print()
print("| input | shape | saturation (speedup) | load | mode | "
      + " | ".join(m[1] for m in metrics) + " |")
print("|---|---|---:|---:|---|" + "---:|" * len(metrics))
count = {}
for inp in ("arxiv", "conversation", "shared-prefix", "synthetic"):
    for shape in ("4x4", "2x8", "mixed"):
        path = os.path.join(json_dir, "%s-%s.json" % (inp, shape))
        if not os.path.exists(path):
            continue
        doc = json.load(open(path))
        for load in doc["loads"]:
            for pol in load["policies"]:
                if pol["plugin"] != "dpgroup":
                    continue
                mode = pol["config"].get("mode", "lockstep")
                cells = []
                for key, label, better_sign in metrics:
                    x = pol["metrics"][key]
                    base = x["mean"] - x["diff"]
                    ratio = x["mean"] / base if base else float("nan")
                    cells.append("%.3f%s" % (ratio, "*" if x["significant"] else ""))
                    if x["significant"]:
                        way = "better" if x["diff"] * better_sign > 0 else "worse"
                    else:
                        way = "n.s."
                    k = (mode, label, way)
                    count[k] = count.get(k, 0) + 1
                print("| %s | %s | %.4g | %d %% | %s | %s |"
                      % (inp, shape, doc["saturation"]["speedup"], load["percent"], mode,
                         " | ".join(cells)))
print()
print("| mode | metric | better (sig.) | n.s. | worse (sig.) |")
print("|---|---|---:|---:|---:|")
for mode in ("lockstep", "two-level"):
    for _, label, _ in metrics:
        print("| %s | %s | %d | %d | %d |" % (mode, label,
              count.get((mode, label, "better"), 0), count.get((mode, label, "n.s."), 0),
              count.get((mode, label, "worse"), 0)))
PY
cat "$out/summary.md"
