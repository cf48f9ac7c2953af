#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# replicas_e2e_test.sh REPO BUILD NGINX WORKDIR -- scripts/e2e-replicas.sh
# in small (2 replicas in front of 2 engines x 2 ranks, 150 requests of a
# trace written here, bounded by BUDGET_S) so the script cannot rot: 0
# failed requests through a replica SIGKILL (and, once the module has
# wsel_sync, through a NATS kill and restart), nothing left in flight.
# Exits 77 (skipped) with a message when nats-server is missing.
set -euo pipefail
repo=$1 build=$2 nginx=$3 work=$4
command -v nats-server >/dev/null || { echo "SKIP: nats-server is not installed"; exit 77; }
rm -rf "$work"
mkdir -p "$work"
python3 - "$work/trace.jsonl" <<'PY'
import json, random, sys
rnd = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(150):  # 5 shared prefixes, bursts of 3 at the same instant
        n = rnd.randrange(2, 6)
        ids = [1000 * (i % 5) + k for k in range(2)] + [10 ** 6 + 10 * i + k for k in range(n)]
        f.write(json.dumps({"timestamp": 100 * (i // 3), "input_length": 512 * len(ids) - 100,
                            "output_length": rnd.randrange(20, 80), "hash_ids": ids}) + "\n")
PY
TRACE=$work/trace.jsonl SETUPS="one unsynced synced" FAULTS="unsynced synced" R=2 WORKERS=2 DP=2 \
  SPEEDUP=1 TIME_SCALE=2 PERIOD_MS=100 BUDGET_S=400 NGINX=$nginx OUT=$work/out \
  "$repo/scripts/e2e-replicas.sh" "$build"
