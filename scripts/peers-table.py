#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""peers-table.py OUT -- docs/peers.md's tables, in Markdown, from the runs
scripts/peers.sh left in OUT (kept with OUT=DIR; OUT/runs.tsv lists them:
part, input, load, limit, router, folder). The replays' table, then the
added-latency bench's: per router, request pairs sent one at a time,
straight to one engine then through the router; a request's added latency
is its TTFT minus its pair's direct TTFT."""
import json, os, statistics, sys

out = sys.argv[1]


def load(p):
    with open(p) as f:
        return json.load(f)


def pct(v, p):
    """the p-th percentile of v, nearest rank"""
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def label(r):
    """(router, policy) cells of ROUTER (KIND:POLICY[:JSON])"""
    kind, rest = r.split(":", 1)
    policy, _, config = rest.partition(":")
    return ("nginx + wsel" if kind == "wsel" else kind,
            "%s `%s`" % (policy, config) if config else policy)


def command(r, env):
    q = "'" if "{" in r else ""
    return "`%s ROUTERS=%s%s%s scripts/peers.sh`" % (env, q, r, q)


def pairs(d):
    """(direct, through) TTFTs in us of each pair of the bench in d"""
    with open(os.path.join(d, "trace-requests.jsonl")) as f:
        v = {q["index"]: q for q in map(json.loads, filter(str.strip, f))}
    if len(v) % 2 or not all(q["ok"] and q["url"] == i % 2 for i, q in v.items()):
        sys.exit("latency bench: a failed or unpaired request in " + d)
    return [(v[i]["ttft_ms"] * 1000, v[i + 1]["ttft_ms"] * 1000) for i in range(0, len(v), 2)]


with open(os.path.join(out, "runs.tsv")) as f:
    runs = [line.rstrip("\n").split("\t") for line in f if line.strip()]

replays = [x for x in runs if x[0] == "replay"]
if replays:
    print("| input | load | router | policy | hit % | TTFT mean ms | TTFT p99 ms | e2e p99 s "
          "| failed | CPU ms / 1k req | peak RSS MB | command |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for _, inp, ld, limit, r, sub in replays:
    d = os.path.join(out, sub)
    x = load(os.path.join(d, "replay.json"))["results"][0]
    rt = load(os.path.join(d, "router.json"))
    n = x.get("requests", 0) or sum(1 for _ in open(os.path.join(d, "requests.jsonl")))
    env = "INPUTS=%s LOADS=%s%s PARTS=replay" % (inp, ld, " LIMIT=" + limit if limit != "0" else "")
    print("| %s | %s %% | %s | %s | %.1f | %.0f | %.0f | %.2f | %d | %.0f | %.0f | %s |" % (
        (inp, ld) + label(r) + (
            100 * x["kv_hit_rate"], x["ttft_ms"]["mean"], x["ttft_ms"]["p99"],
            x["e2e_ms"]["p99"] / 1000, x["lost_requests"],
            1000 * rt["cpu_s"] / max(n, 1) * 1000, rt["hwm_kb"] / 1024, command(r, env))))

lat = [x for x in runs if x[0] == "latency"]
if lat:
    print("\n" if replays else "", end="")
    print("| router | policy | pairs | direct TTFT p50 / p99 us | through TTFT p50 / p99 us "
          "| added p50 us | added p99 us | command |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
for _, _, _, n, r, sub in lat:
    p = pairs(os.path.join(out, sub))
    direct, through = [a for a, _ in p], [b for _, b in p]
    added = [b - a for a, b in p]
    print("| %s | %s | %d | %.0f / %.0f | %.0f / %.0f | %.0f | %.0f | %s |" % (
        label(r) + (len(p), statistics.median(direct), pct(direct, 99),
                    statistics.median(through), pct(through, 99),
                    statistics.median(added), pct(added, 99),
                    command(r, "PARTS=latency LAT_REQUESTS=%s" % n))))
