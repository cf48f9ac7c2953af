#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# peers_e2e_test.sh REPO BUILD NGINX WORKDIR -- scripts/peers.sh in small
# (2 engines x 2 ranks, a 12-request trace written here, both parts) so the
# harness cannot rot: nginx round-robin, a wsel plugin given a configuration
# (ROUTERS' KIND:POLICY:JSON) and, when installed, SMG each replay the trace
# with 0 failed requests, and the latency bench pairs every request.
set -euo pipefail
repo=$1 build=$2 nginx=$3 work=$4
rm -rf "$work"
mkdir -p "$work/traces"
python3 - "$work/traces/mooncake_arxiv_slice.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(12):  # 3 shared prefixes
        ids = [100 * (i % 3), 100 * (i % 3) + 1, 1000 + i]
        f.write(json.dumps({"timestamp": 200 * i, "input_length": 512 * 3 - 50,
                            "output_length": 8, "hash_ids": ids}) + "\n")
PY
routers='nginx:round_robin wsel:p2c:{"column":"prefill_tokens"}'
venv=${PEERS_VENV:-$repo/.peers/venv}
if [[ -x $venv/bin/smg ]]; then routers+=" smg:round_robin"; else echo "peers_e2e: no SMG, not run"; fi
TRACES=$work/traces INPUTS=arxiv LOADS=60 SAT_ARXIV=2 WORKERS=2 DP=2 TIME_SCALE=4 \
  LAT_REQUESTS=10 LAT_WARMUP=2 INSTALL=0 BUDGET_S=50 NGINX=$nginx OUT=$work/out ROUTERS=$routers \
  "$repo/scripts/peers.sh" "$build" >"$work/table.md"
cat "$work/table.md"
n=$(wc -w <<<"$routers")
fail() { echo "FAIL: $*"; exit 1; }
rows() { awk -F'|' "$1" "$work/table.md" | wc -l; }
[[ $(rows '$2 == " arxiv " && $10 == " 0 "') == "$n" ]] ||
  fail "not one replay row with 0 failed requests per router"
[[ $(rows 'NF == 10 && $4 == " 10 "') == "$n" ]] || fail "not one latency row of 10 pairs per router"
grep -q "wsel_policy .*/p2c.so '{\"column\":\"prefill_tokens\"}';" \
  "$work"/out/run-arxiv-60-wsel_p2c*/nginx/conf/nginx.conf || fail "the plugin's configuration did not reach nginx"
echo "PASS peers_e2e"
