#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# peers-dynamo.sh [BUILD_DIR] -- Dynamo in its own environment: its
# frontend in front of its CPU mocker engines, with its KV router and its
# round-robin, and with wsel policies inside it through wsel-dynamo
# (adapters/dynamo), on the same traces; docs/peers.md has the table.
#
#   SPEEDUPS="2 4" LIMIT=300 scripts/peers-dynamo.sh
#
# Per input, speedup and router: a fresh discovery folder and fresh mockers
# (WORKERS x DP, block 64, no run inherits a cache), the router, `wsel
# replay` of the trace through the frontend (token-id prompts, streamed),
# the router's CPU time (frontend, and adapter for wsel-dynamo) from /proc
# before and after, its peak RSS; then everything is stopped. Prints one
# Markdown row per run.
#
# Routers (ROUTERS, KIND:POLICY words):
#   dynamo:kv dynamo:round-robin             the frontend's own routers
#   wsel-dynamo:softmax ... (any bundled plugin)  frontend -> wsel-dynamo
#
# Environment (defaults in brackets):
#   TRACES   folder of the traces [../shared/traces from the repository]
#   INPUTS   arxiv and/or synthetic [arxiv]
#   SPEEDUPS trace arrival speedups, one run each [2]
#   LIMIT    the first LIMIT requests of each trace, 0 = all [300]
#   ROUTERS  as above [dynamo:kv dynamo:round-robin wsel-dynamo:softmax
#            wsel-dynamo:hysteresis wsel-dynamo:dpgroup wsel-dynamo:adaptive]
#   WORKERS, DP  the mocker cluster [8, 2]
#   DYNAMO_VENV  [.peers/dynamo-venv, scripts/install-peers.sh]
#   OUT      keep every log and result here [a temp dir, removed]
#
# Only 127.0.0.1 (Dynamo's ZeroMQ publishers bind the wildcard address and
# advertise 127.0.0.1; docs/integrations.md); file discovery, no NATS, no
# etcd. Everything started here is stopped on exit.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
TRACES=${TRACES:-$repo/../shared/traces}
INPUTS=${INPUTS:-arxiv}
SPEEDUPS=${SPEEDUPS:-2}
LIMIT=${LIMIT:-300}
ROUTERS=${ROUTERS:-dynamo:kv dynamo:round-robin wsel-dynamo:softmax wsel-dynamo:hysteresis \
wsel-dynamo:dpgroup wsel-dynamo:adaptive}
WORKERS=${WORKERS:-8}
DP=${DP:-2}
VENV=${DYNAMO_VENV:-$repo/.peers/dynamo-venv}
MODEL=mock
BLOCK=64
py=$VENV/bin/python
wsel=$build/bin/wsel
prog=peers-dynamo.sh
# shellcheck source=scripts/e2e-lib.sh
. "$repo/scripts/e2e-lib.sh"
[[ -x $py ]] || die "no Dynamo venv at $VENV (scripts/install-peers.sh)"
[[ -x $wsel ]] || die "$wsel not found"

keep_out=1
if [[ -z ${OUT:-} ]]; then
  OUT=$(mktemp -d /tmp/wsel-peers-dynamo.XXXXXX)
  keep_out=0
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
pids=()

stop_all() {
  local p
  for p in "${pids[@]}"; do stop "$p"; done
  pids=()
}
stop_all_on_exit "$prog"

# The wsel binding, built against an install of BUILD_DIR, and the model folder.
prefix=$OUT/prefix
cmake --install "$build" --prefix "$prefix" >"$OUT/install.log"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig "$py" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --no-deps --target "$OUT/site" "$repo/bindings/python" >"$OUT/pip.log" 2>&1 ||
  die "pip install bindings/python (see $OUT/pip.log)"
export PYTHONPATH=$OUT/site:$repo/adapters/dynamo/src LD_LIBRARY_PATH=$prefix/lib
export HF_HUB_OFFLINE=1 DYN_LOG=warn DYN_DISCOVERY_BACKEND=file DYN_REQUEST_PLANE=tcp \
  DYN_EVENT_PLANE=zmq DYN_TCP_RPC_HOST=127.0.0.1 DYN_TCP_RESPONSE_STREAM_HOST=127.0.0.1 \
  DYN_EVENT_PLANE_HOST=127.0.0.1 DYN_SYSTEM_HOST=127.0.0.1 HOME=$OUT
"$py" -m wsel_dynamo.model "$OUT/model" >/dev/null
tick=$(getconf CLK_TCK)

# cpu_s PID...: utime + stime of the processes, seconds
cpu_s() {
  local p sum=0
  for p in "$@"; do sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
  awk -v s="$sum" -v t="$tick" 'BEGIN { print s / t }'
}
hwm_mb() {
  local p sum=0
  for p in "$@"; do sum=$((sum + $(awk '/VmHWM/ { print $2 }' "/proc/$p/status"))); done
  awk -v s="$sum" 'BEGIN { printf "%.0f", s / 1024 }'
}

# run DIR KIND POLICY: sets port and rpids (the router's processes)
start_run() {
  local dir=$1 kind=$2 policy=$3 i ns mode
  export DYN_FILE_KV=$dir/discovery
  "$py" -m dynamo.mocker --model-path "$OUT/model" --model-name "$MODEL" \
    --num-workers "$WORKERS" --data-parallel-size "$DP" --block-size "$BLOCK" \
    --endpoint dyn://pool.mocker.generate >"$dir/mocker.log" 2>&1 &
  pids+=($!)
  rpids=()
  ns=pool mode=$policy
  if [[ $kind == wsel-dynamo ]]; then
    "$py" -m wsel_dynamo --workers pool.mocker.generate --namespace wsel \
      --model-path "$OUT/model" --model-name "$MODEL" --block-size "$BLOCK" \
      --policy "$prefix/lib/wsel/plugins/$policy.so" >"$dir/adapter.log" 2>&1 &
    pids+=($!) rpids+=($!)
    ns=wsel mode=round-robin
  fi
  port=$(free_port)
  "$py" -m dynamo.frontend --http-host 127.0.0.1 --http-port "$port" --router-mode "$mode" \
    --namespace "$ns" --kv-cache-block-size "$BLOCK" >"$dir/frontend.log" 2>&1 &
  pids+=($!) rpids+=($!)
  for ((i = 0; i < 1200; i++)); do
    curl -sf --max-time 5 -H 'Content-Type: application/json' \
      -d "{\"model\":\"$MODEL\",\"prompt\":[5,6,7],\"max_tokens\":1}" \
      "http://127.0.0.1:$port/v1/completions" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$kind:$policy did not route a request in 120 s (logs in $dir)"
}

echo "| input | speedup | router | policy | hit % | TTFT mean ms | TTFT p99 ms | e2e p99 s | failed | CPU ms / 1k req | peak RSS MB |"
echo "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
for input in $INPUTS; do
  case $input in
  arxiv) trace=$TRACES/mooncake_arxiv_slice.jsonl ;;
  synthetic) trace=$TRACES/mooncake_synthetic_trace.jsonl ;;
  *) die "unknown input $input" ;;
  esac
  cut=$OUT/$input.jsonl
  if ((LIMIT > 0)); then head -n "$LIMIT" "$trace" >"$cut"; else cp "$trace" "$cut"; fi
  for speedup in $SPEEDUPS; do
    for r in $ROUTERS; do
      kind=${r%%:*} policy=${r#*:}
      run=$OUT/run-$input-$speedup-$kind-$policy
      mkdir -p "$run"
      start_run "$run" "$kind" "$policy"
      c0=$(cpu_s "${rpids[@]}")
      "$wsel" replay --url "http://127.0.0.1:$port" --trace "$cut" --speedup "$speedup" \
        --concurrency 4096 --timeout 600 --model "$MODEL" --no-progress --json \
        --requests-out "$run/requests.jsonl" >"$run/replay.json" 2>"$run/replay.err" ||
        die "wsel replay failed ($r): $(tail -3 "$run/replay.err")"
      c1=$(cpu_s "${rpids[@]}")
      mb=$(hwm_mb "${rpids[@]}")
      stop_all
      python3 - "$run/replay.json" "$input" "$speedup" "$kind" "$policy" "$c0" "$c1" "$mb" <<'EOF'
import json, sys
f, inp, sp, kind, pol, c0, c1, mb = sys.argv[1:]
x = json.load(open(f))["results"][0]
n = sum(1 for _ in open(f.replace("replay.json", "requests.jsonl")))
print("| %s | %s | %s | %s | %.1f | %.0f | %.0f | %.2f | %d | %.0f | %s |" % (
    inp, sp, kind, pol, 100 * x["kv_hit_rate"], x["ttft_ms"]["mean"], x["ttft_ms"]["p99"],
    x["e2e_ms"]["p99"] / 1000, x["lost_requests"], 1e6 * (float(c1) - float(c0)) / max(n, 1), mb))
EOF
    done
  done
done
