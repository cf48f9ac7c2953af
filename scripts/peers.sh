#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# peers.sh [BUILD_DIR] -- wsel beside the routers users would pick instead,
# as processes in front of the same emulated engines, on the same traces
# (docs/peers.md has the table, the method and the commands).
#
#   scripts/peers.sh                             # everything: long
#   INPUTS=arxiv LOADS=90 LIMIT=300 scripts/peers.sh
#
# Per input, load and router it starts WORKERS wsel-engines of DP ranks
# with KV events (`wsel cluster`, free loopback ports), starts the router in
# front of them with its own recommended configuration and the policy,
# `wsel replay`s the trace through it at LOAD % of the input's saturation,
# reads the router's CPU time and peak RSS from /proc, and stops router and
# engines: no run inherits another's caches. Then the added-latency bench,
# per router: sequential one-token requests, every block unique, on engines
# whose model time is negligible, alternately straight to one engine and
# through the router, in one replay; the added latency of a request is its
# TTFT minus that of the direct request just before it (same length).
#
# Routers (ROUTERS, KIND:POLICY[:EXTRA] words, no spaces; EXTRA is wsel's
# plugin configuration, JSON, or a peer's extra options, comma-separated,
# e.g. vllm-router:cache_aware:--intra-node-data-parallel-size=2):
#   smg:cache_aware smg:power_of_two smg:round_robin  Shepherd Model Gateway
#   vllm-router:cache_aware vllm-router:consistent_hash vllm-router:kv_aware
#                         (kv_aware: its engines send --kv-events-batch array,
#                         the only KV event batch form it decodes)
#   wsel:softmax wsel:hysteresis wsel:dpgroup wsel:adaptive  nginx + wsel
#   wsel:PLUGIN[:JSON]    any bundled plugin, e.g. the peers' ports
#                         (docs/peers.md#fidelity-of-the-ports):
#                         'wsel:sglang_cache_aware:{"imbalance":"fleet_spread"}'
#   nginx:round_robin                                 nginx without wsel
# SMG and vllm-router come from .peers/venv (scripts/install-peers.sh, run
# here when they are missing unless INSTALL=0; a missing peer is skipped).
#
# Environment (defaults in brackets):
#   TRACES      folder of the traces [../shared/traces from the repository]
#   INPUTS      arxiv and/or synthetic [arxiv synthetic]
#   LOADS       percent of saturation [60 90]
#   SAT_ARXIV, SAT_SYNTHETIC  saturation speedups of 8 x 2 ranks, from
#               `wsel eval` (docs/peers.md) [14.2, 8.63]
#   LIMIT       the first LIMIT requests of each trace, 0 = all [0]
#   ROUTERS     as above [all eleven]
#   WORKERS, DP the cluster [8, 2]
#   TIME_SCALE  engines' model ms per wall ms [0.5]
#   LAT_REQUESTS request pairs (direct, through the router) per router in
#               the latency bench, after LAT_WARMUP pairs not counted [1000, 50]
#   PARTS       replay and/or latency [replay latency]
#   NGINX       the nginx binary [/usr/sbin/nginx]
#   BUDGET_S    wall-clock ceiling, seconds [14400]
#   OUT         keep every log and result here [a temp dir, removed]
#
# Only 127.0.0.1; everything started here is stopped on exit (trap).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
TRACES=${TRACES:-$repo/../shared/traces}
INPUTS=${INPUTS:-arxiv synthetic}
LOADS=${LOADS:-60 90}
SAT_ARXIV=${SAT_ARXIV:-14.2}
SAT_SYNTHETIC=${SAT_SYNTHETIC:-8.63}
LIMIT=${LIMIT:-0}
ROUTERS=${ROUTERS:-smg:cache_aware smg:power_of_two smg:round_robin vllm-router:cache_aware \
vllm-router:consistent_hash vllm-router:kv_aware wsel:softmax wsel:hysteresis wsel:dpgroup wsel:adaptive \
nginx:round_robin}
WORKERS=${WORKERS:-8}
DP=${DP:-2}
TIME_SCALE=${TIME_SCALE:-0.5}
LAT_REQUESTS=${LAT_REQUESTS:-1000}
LAT_WARMUP=${LAT_WARMUP:-50}
PARTS=${PARTS:-replay latency}
NGINX=${NGINX:-/usr/sbin/nginx}
HEADER_BUFFER=64k
NGINX_WORKERS=1
BUDGET_S=${BUDGET_S:-14400}
VENV=${PEERS_VENV:-$repo/.peers/venv}
MODEL=wsel-engine
BLOCK=64
pin_nginx=() pin_rest=()

wsel=$build/bin/wsel
module=$build/nginx/ngx_http_upstream_wsel_module.so
for f in "$wsel" "$build/bin/wsel-engine"; do
  [[ -e $f ]] || { echo "peers.sh: $f not found" >&2; exit 2; }
done

keep_out=1
if [[ -z ${OUT:-} ]]; then
  OUT=$(mktemp -d /tmp/wsel-peers.XXXXXX)
  keep_out=0
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
deadline=$((SECONDS + BUDGET_S))
cluster_pid="" nginx_pid="" peer_pid=""

runs=$OUT/runs.tsv # what peers-table.py reads: part input load limit router dir
: >"$runs"

# shellcheck source=scripts/e2e-lib.sh
prog=peers.sh
. "$repo/scripts/e2e-lib.sh"

stop_all() {
  stop "$peer_pid"
  peer_pid=""
  stop "$nginx_pid"
  nginx_pid=""
  stop "$cluster_pid"
  cluster_pid=""
}

stop_all_on_exit peers.sh

# --- which routers can run -----------------------------------------------
have_peer() { [[ -x $VENV/bin/$1 ]]; }
if [[ $ROUTERS == *smg:* || $ROUTERS == *vllm-router:* ]] &&
  ! { have_peer smg && have_peer vllm-router; } && [[ ${INSTALL:-1} == 1 ]]; then
  "$repo/scripts/install-peers.sh" || echo "peers.sh: install-peers.sh failed" >&2
fi
# parse_router WORD: sets kind, policy, POLICY_CONFIG (wsel's plugin
# configuration), peer_opts (a peer's extra options) and slug (WORD as a
# file name)
parse_router() {
  local rest=${1#*:} extra=""
  kind=${1%%:*} policy=${rest%%:*} POLICY_CONFIG="" peer_opts=()
  [[ $rest != *:* ]] || extra=${rest#*:}
  case $kind in
  wsel) POLICY_CONFIG=$extra ;;
  smg | vllm-router) [[ -z $extra ]] || IFS=, read -r -a peer_opts <<<"$extra" ;;
  *) [[ -z $extra ]] || die "$1: nginx takes no options" ;;
  esac
  [[ $POLICY_CONFIG != *"'"* ]] || die "$1: no single quote in the configuration"
  slug=${1//[^A-Za-z0-9_.-]/_}
}
routers=()
for r in $ROUTERS; do
  parse_router "$r"
  case $kind in
  smg | vllm-router)
    have_peer "$kind" || { echo "peers.sh: skipping $r: $VENV/bin/$kind not installed" >&2; continue; } ;;
  wsel)
    [[ -e $module && -e $build/plugins/$policy.so && -x $NGINX ]] ||
      { echo "peers.sh: skipping $r: no nginx, module or plugin" >&2; continue; } ;;
  nginx) [[ -x $NGINX ]] || { echo "peers.sh: skipping $r: no $NGINX" >&2; continue; } ;;
  *) die "unknown router $r" ;;
  esac
  routers+=("$r")
done
((${#routers[@]})) || die "no router to run"

# --- one router in front of the cluster in DIR ---------------------------
urls() { awk '$3 == "http" { print $4 }' "$1/ready"; }

# the endpoints of worker URL's ranks, comma-separated
kv_of() {
  awk -v u="$2" '$3 == "http" { w[$4] = $2 } $3 == "kv_events" { kv[$2] = kv[$2] (kv[$2] == "" ? "" : ",") $5 }
    END { print kv[w[u]] }' "$1/ready"
}

# wait_peer DIR: until a one-token request through 127.0.0.1:$port succeeds
wait_peer() {
  local i
  for ((i = 0; i < 600; i++)); do
    kill -0 "$peer_pid" 2>/dev/null || die "$kind exited: $(tail -5 "$1/router.log")"
    curl -sf --max-time 5 -H 'Content-Type: application/json' \
      -d "{\"model\":\"$MODEL\",\"prompt\":\"1 2 3\",\"max_tokens\":1}" \
      "http://127.0.0.1:$port/v1/completions" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$kind did not route a request in 60 s: $(tail -5 "$1/router.log")"
}

# start_router DIR KIND POLICY: sets port and rpid (the process to measure)
start_router() {
  local dir=$1 kind=$2 policy=$3 u args=()
  case $kind in
  wsel) start_nginx "$dir" events "$policy"; rpid=$nginx_pid; return ;;
  nginx) start_nginx "$dir" - plain; rpid=$nginx_pid; return ;;
  esac
  port=$(free_port)
  mapfile -t u < <(urls "$dir")
  if [[ $kind == smg ]]; then
    # no tokenizer: HTTP workers, the approximate (text) tree for cache_aware
    args=(launch --disable-tokenizer-autoload --log-level warn)
  else
    args=(--log-level warning)
    if [[ $policy == kv_aware ]]; then
      for w in "${u[@]}"; do args+=(--kv-event-source "$w=$(kv_of "$dir" "$w")"); done
      args+=(--kv-event-block-size "$BLOCK" --kv-event-model "$MODEL")
    fi
  fi
  "$VENV/bin/$kind" "${args[@]}" --host 127.0.0.1 --port "$port" --prometheus-host 127.0.0.1 \
    --prometheus-port "$(free_port)" --worker-urls "${u[@]}" --policy "$policy" \
    ${peer_opts[@]+"${peer_opts[@]}"} \
    >"$dir/router.log" 2>&1 &
  peer_pid=$!
  rpid=$peer_pid
  wait_peer "$dir"
}

# cpu_of PID: utime + stime of PID and its descendants, clock ticks
cpu_of() {
  local p sum=0 c
  for p in $1 $(pgrep -P "$1" || true); do
    c=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)
    sum=$((sum + c))
  done
  echo "$sum"
}
# hwm_of PID: VmHWM of PID and its descendants, summed, kB
hwm_of() {
  local p sum=0 h
  for p in $1 $(pgrep -P "$1" || true); do
    h=$(awk '/^VmHWM/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0)
    sum=$((sum + ${h:-0}))
  done
  echo "$sum"
}

# engines_for KIND POLICY: the engines' extra options (engine_extra)
engines_for() {
  engine_extra=()
  [[ $1:$2 != vllm-router:kv_aware ]] || engine_extra=(--kv-events-batch array)
}

# replay_form KIND: the request form the router accepts (SMG: text only)
replay_form() { [[ $1 == smg ]] && echo text || echo tokens; }

# --- 1. the traces through each router ------------------------------------
want() { [[ " $PARTS " == *" $1 "* ]]; }
echo "peers: $WORKERS workers x $DP ranks; inputs $INPUTS at $LOADS % of saturation;" \
  "limit $LIMIT; routers ${routers[*]}; results in $OUT" >&2
tick=$(getconf CLK_TCK)
for input in $INPUTS; do
  want replay || break
  case $input in
  arxiv) trace=$TRACES/mooncake_arxiv_slice.jsonl sat=$SAT_ARXIV ;;
  synthetic) trace=$TRACES/mooncake_synthetic_trace.jsonl sat=$SAT_SYNTHETIC ;;
  *) die "unknown input $input" ;;
  esac
  [[ -e $trace ]] || die "$trace not found"
  cut=$OUT/$input.jsonl
  if ((LIMIT > 0)); then head -n "$LIMIT" "$trace" >"$cut"; else cp "$trace" "$cut"; fi
  for load in $LOADS; do
    speedup=$(awk -v s="$sat" -v l="$load" 'BEGIN { printf "%.4g", s * l / 100 }')
    for r in "${routers[@]}"; do
      parse_router "$r"
      run=$OUT/run-$input-$load-$slug
      mkdir -p "$run"
      engines_for "$kind" "$policy"
      start_cluster "$run" "$TIME_SCALE"
      start_router "$run" "$kind" "$policy"
      echo "peers: $input at $load % (speedup $speedup): $r on 127.0.0.1:$port" >&2
      c0=$(cpu_of "$rpid")
      t=$(left)
      timeout "$t" "$wsel" replay --url "http://127.0.0.1:$port" --trace "$cut" \
        --speedup "$speedup" --time-scale "$TIME_SCALE" --concurrency 4096 --timeout 600 \
        --model "$MODEL" --prompt "$(replay_form "$kind")" --no-progress --json \
        --requests-out "$run/requests.jsonl" >"$run/replay.json" 2>"$run/replay.err" ||
        die "wsel replay failed ($r): $(tail -3 "$run/replay.err")"
      c1=$(cpu_of "$rpid")
      printf '{"cpu_s": %s, "hwm_kb": %s}\n' "$(awk -v a="$c0" -v b="$c1" -v t="$tick" \
        'BEGIN { print (b - a) / t }')" "$(hwm_of "$rpid")" >"$run/router.json"
      stop_all
      printf 'replay\t%s\t%s\t%s\t%s\t%s\n' "$input" "$load" "$LIMIT" "$r" "${run##*/}" >>"$runs"
    done
  done
done

# --- 2. added latency: request pairs, straight to one engine then through
# the router, sequential, in one replay (request 2k to URL 0, 2k+1 to URL 1)
lat=$OUT/latency
if want latency; then
  mkdir -p "$lat"
  # pair_trace N FIRST_ID: N pairs of one-token rows with the arxiv slice's
  # prompt lengths (cycled), both of a pair the same length, every block unique
  pair_trace() {
    python3 - "$TRACES/mooncake_arxiv_slice.jsonl" "$1" "$2" <<'EOF'
import json, sys
n, next_id = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[1]) as f:
    rows = [json.loads(l) for l in f if l.strip()]
for i in range(n):
    for _ in range(2):
        r = dict(rows[i % len(rows)], timestamp=0, output_length=1)
        r["hash_ids"] = list(range(next_id, next_id + len(r["hash_ids"])))
        next_id += len(r["hash_ids"])
        print(json.dumps(r))
EOF
  }
  pair_trace "$LAT_WARMUP" 100000000 >"$lat/warmup.jsonl"
  pair_trace "$LAT_REQUESTS" 10000000 >"$lat/trace.jsonl"
  for r in "${routers[@]}"; do
    parse_router "$r"
    d=$lat/$slug
    mkdir -p "$d"
    engines_for "$kind" "$policy"
    start_cluster "$d" 1000000
    start_router "$d" "$kind" "$policy"
    echo "peers: latency bench, $r" >&2
    for part in warmup trace; do
      t=$(left)
      timeout "$t" "$wsel" replay --url "$(urls "$d" | head -1)" --url "http://127.0.0.1:$port" \
        --trace "$lat/$part.jsonl" --concurrency 1 --timeout 60 --model "$MODEL" \
        --prompt "$(replay_form "$kind")" --no-progress --json \
        --requests-out "$d/$part-requests.jsonl" >"$d/$part.json" 2>"$d/$part.err" ||
        die "latency replay failed ($r): $(tail -3 "$d/$part.err")"
    done
    stop_all
    printf 'latency\t-\t-\t%s\t%s\t%s\n' "$LAT_REQUESTS" "$r" "latency/$slug" >>"$runs"
  done
fi

# --- 3. the table ----------------------------------------------------------
python3 "$repo/scripts/peers-table.py" "$OUT" | tee "$OUT/table.md"
