#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""peers-fidelity.py --routers | OUT... -- the fidelity of wsel's ports of
the peers' policies (docs/peers.md#fidelity-of-the-ports).

--routers prints the ROUTERS words scripts/peers.sh runs for it: each real
peer policy and its port through nginx + wsel, with the configurations that
match the peer. Given the OUT folders of such runs (OUT=DIR, PARTS=replay),
prints per input and load each pair's hit rates, their difference (target:
within 3 points) and whether the ports order the peers' policies by hit
rate as the real routers do: every two real policies more than 1 point
apart (what one run moves) must be ordered alike by their ports."""
import json, os, sys

# (real router, its port); the first pair of each real policy is its
# default port, the one the ordering is judged on; the others show a cause.
PAIRS = [
    ("smg:cache_aware", "wsel:sglang_cache_aware"),
    ("smg:cache_aware", 'wsel:sglang_cache_aware:{"dp_rank":"min_tokens"}'),
    ("smg:cache_aware:--disable-worker-overload-protection,--worker-warmup-secs=0",
     "wsel:sglang_cache_aware"),
    ("smg:cache_aware:--disable-worker-overload-protection,--worker-warmup-secs=0,"
     "--worker-warmup-divert-every=0,--worker-warmup-thin-ratio=0", "wsel:sglang_cache_aware"),
    ("smg:power_of_two", 'wsel:p2c:{"column":"prefill_tokens"}'),
    ("smg:round_robin", "wsel:roundrobin"),
    ("vllm-router:cache_aware", 'wsel:sglang_cache_aware:{"imbalance":"fleet_spread"}'),
    ("vllm-router:cache_aware",
     'wsel:sglang_cache_aware:{"imbalance":"fleet_spread","dp_rank":"min_tokens"}'),
    ("vllm-router:cache_aware:--intra-node-data-parallel-size=2",
     'wsel:sglang_cache_aware:{"imbalance":"fleet_spread"}'),
    ("vllm-router:consistent_hash", 'wsel:session_hash:{"peer":"vllm_router"}'),
]
TOLERANCE = 3.0  # points of hit rate
NOISE = 1.0  # points: closer real policies are not ordered (one run each)


def routers():
    seen = []
    for pair in PAIRS:
        seen += [r for r in pair if r not in seen]
    return seen


def hits(outs):
    """{(input, load): {router: hit %}} from the runs.tsv of each OUT"""
    h = {}
    for out in outs:
        with open(os.path.join(out, "runs.tsv")) as f:
            for line in f:
                part, inp, ld, _, r, sub = line.rstrip("\n").split("\t")
                if part != "replay":
                    continue
                with open(os.path.join(out, sub, "replay.json")) as g:
                    x = json.load(g)["results"][0]
                h.setdefault((inp, ld), {})[r] = 100 * x["kv_hit_rate"]
    return h


def order(h, names):
    return " > ".join("`%s` %.1f" % (n, h[n]) for n in sorted(names, key=lambda n: -h[n]))


def discordant(real, port):
    """the pairs of real policies more than NOISE apart that their ports
    order otherwise (or tie), and how many pairs were judged"""
    names, bad, n = sorted(real), [], 0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if abs(real[a] - real[b]) > NOISE:
                n += 1
                if (real[a] - real[b]) * (port[a] - port[b]) <= 0:
                    bad.append("`%s` / `%s`" % (a, b))
    return bad, n


def cell(r):
    kind, rest = r.split(":", 1)
    return "%s `%s`" % (kind, rest)


def main():
    if sys.argv[1:] == ["--routers"]:
        print(" ".join(routers()))
        return 0
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        return 2
    print("| input | load | real | hit %% | port | hit %% | port - real | within %g |" % TOLERANCE)
    print("|---|---:|---|---:|---|---:|---:|---|")
    orders = []
    for (inp, ld), h in sorted(hits(sys.argv[1:]).items()):
        for real, port in PAIRS:
            if real in h and port in h:
                d = h[port] - h[real]
                print("| %s | %s %% | %s | %.1f | %s | %.1f | %+.1f | %s |" % (
                    inp, ld, cell(real), h[real], cell(port), h[port], d,
                    "yes" if abs(d) <= TOLERANCE else "no"))
        first = {}
        for real, port in PAIRS:
            if real.count(":") == 1 and real not in first and real in h and port in h:
                first[real] = port
        by_real = {real: h[real] for real in first}
        by_port = {real: h[port] for real, port in first.items()}
        bad, n = discordant(by_real, by_port)
        orders.append((inp, ld, order(by_real, first), order(by_port, first),
                       "%d of %d%s" % (n - len(bad), n, "; not: " + ", ".join(bad) if bad else "")))
    print("\n| input | load | real routers, by hit rate | their ports, by hit rate "
          "| pairs more than %g point apart ordered alike |" % NOISE)
    print("|---|---:|---|---|---|")
    for row in orders:
        print("| %s | %s %% | %s | %s | %s |" % row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
