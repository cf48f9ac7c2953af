#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""peers-table.py OUT INPUTS LOADS LIMIT PARTS ROUTER... -- docs/peers.md's
table, in Markdown, from the runs scripts/peers.sh left in OUT (OUT kept
with OUT=DIR). INPUTS, LOADS and PARTS are space-separated lists; a
ROUTER is KIND:POLICY."""
import json, os, statistics, sys
out, inputs, loads, limit, parts = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), \
    sys.argv[4], sys.argv[5].split()
routers = sys.argv[6:]

def load(p):
    with open(p) as f:
        return json.load(f)

def ttfts(d):
    with open(os.path.join(d, "requests.jsonl")) as f:
        v = [json.loads(l) for l in f if l.strip()]
    if not all(q["ok"] for q in v):
        sys.exit("latency bench: a failed request in " + d)
    return sorted(q["ttft_ms"] * 1000 for q in v)

def pct(v, p):
    return v[min(len(v) - 1, int(p / 100 * len(v)))]

added = {}
if "latency" in parts:
    base = {f: ttfts(os.path.join(out, "latency", "direct-" + f)) for f in ("tokens", "text")}
    for r in routers:
        kind, policy = r.split(":", 1)
        v = ttfts(os.path.join(out, "latency", kind + "-" + policy))
        b = base["text" if kind == "smg" else "tokens"]
        added[r] = (statistics.median(v) - statistics.median(b), pct(v, 99) - pct(b, 99))
    print("Direct to one engine, TTFT p50 / p99 us: tokens %.0f / %.0f, text %.0f / %.0f\n" % (
        statistics.median(base["tokens"]), pct(base["tokens"], 99),
        statistics.median(base["text"]), pct(base["text"], 99)))

print("| input | load | router | policy | hit % | TTFT mean ms | TTFT p99 ms | e2e p99 s | failed "
      "| added p50 us | added p99 us | CPU ms / 1k req | peak RSS MB | command |")
print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for inp in inputs if "replay" in parts else []:
    for ld in loads:
        for r in routers:
            kind, policy = r.split(":", 1)
            d = os.path.join(out, "run-%s-%s-%s-%s" % (inp, ld, kind, policy))
            x = load(os.path.join(d, "replay.json"))["results"][0]
            rt = load(os.path.join(d, "router.json"))
            n = x.get("requests", 0) or sum(1 for _ in open(os.path.join(d, "requests.jsonl")))
            a = added.get(r)
            cmd = "`INPUTS=%s LOADS=%s%s ROUTERS=%s scripts/peers.sh`" % (
                inp, ld, " LIMIT=" + limit if limit != "0" else "", r)
            print("| %s | %s %% | %s | %s | %.1f | %.0f | %.0f | %.2f | %d | %s | %s | %.0f | %.0f | %s |" % (
                inp, ld, "nginx + wsel" if kind == "wsel" else kind, policy,
                100 * x["kv_hit_rate"], x["ttft_ms"]["mean"], x["ttft_ms"]["p99"],
                x["e2e_ms"]["p99"] / 1000, x["lost_requests"],
                "%.0f" % a[0] if a else "-", "%.0f" % a[1] if a else "-",
                1000 * rt["cpu_s"] / max(n, 1) * 1000, rt["hwm_kb"] / 1024, cmd))
