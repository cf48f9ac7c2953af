# SPDX-License-Identifier: Apache-2.0
"""Render docs/leaderboard.md from the `wsel eval --json` documents that
scripts/leaderboard.sh wrote, one per input and shape (INPUT-SHAPE.json,
its command in INPUT-SHAPE.cmd).

usage: leaderboard.py JSON_DIR ROLES SCRIPT_LINE

ROLES is `wsel info --list` (NAME ROLE a line). Every figure is the mean
and 95 % CI over seeds as `wsel eval` prints it, '*' where wsel eval marks
a difference from softmax. The pairwise checks of the summary use the
test wsel eval uses (eval_stat_paired: paired t on per-seed differences,
its quantile from the document's "t975"). Nothing is edited by hand.
"""
import json
import math
import os
import sys

INPUTS = ("arxiv", "synthetic", "conversation", "shared-prefix")
SHAPES = ("4x4", "2x8", "mixed", "16x1")
SHAPE_TITLES = {"4x4": "4 x 4", "2x8": "2 x 8", "mixed": "mixed 8 + 8 x 1",
                "16x1": "16 x 1"}
# (JSON key, column title, scale, decimals, higher is better)
METRICS = (("kv_hit_rate", "hit %", 100, 1, True),
           ("ttft_mean_ms", "TTFT mean ms", 1, 0, False),
           ("ttft_p99_ms", "TTFT p99 ms", 1, 0, False),
           ("flicker_rate", "flicker %", 100, 1, False))
PARETO = ("ttft_mean_ms", "ttft_p99_ms", "kv_hit_rate")
WSEL = ("hysteresis", "adaptive", "dpgroup")
TARGET_LOADS = (80, 95)


def paired(x, ref, t975):
    """eval_stat_paired: mean difference x - ref and whether it is
    significant (its CI excludes 0, or an exact non-zero difference)."""
    d = [a - b for a, b in zip(x, ref)]
    n = len(d)
    m = sum(d) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in d) / (n - 1)) if n > 1 else 0
    ci = t975 * sd / math.sqrt(n) if n > 1 else 0
    tiny = 1e-9 * (abs(sum(x) / n) + 1)
    return m, abs(m) > tiny and abs(m) > ci


def better(doc, a, b, key, higher):
    """Is policy a significantly better than b on metric key?"""
    m, sig = paired(a["metrics"][key]["values"], b["metrics"][key]["values"],
                    doc["t975"])
    return sig and (m > 0 if higher else m < 0)


def worse(doc, a, b, key, higher):
    return better(doc, b, a, key, higher)


def cell(pol, key, scale, decimals):
    s = pol["metrics"][key]
    mark = "*" if s["significant"] else ""
    return "%.*f ±%.*f%s" % (decimals, s["mean"] * scale, decimals,
                             s["ci95"] * scale, mark)


def ranks(pols, key, higher):
    """Competition rank (1 = best) of each policy's mean on key."""
    means = [p["metrics"][key]["mean"] for p in pols]
    sign = -1 if higher else 1
    return [1 + sum(1 for o in means if sign * o < sign * m) for m in means]


def load_docs(json_dir):
    docs = []
    for inp in INPUTS:
        for shape in SHAPES:
            path = os.path.join(json_dir, "%s-%s.json" % (inp, shape))
            if not os.path.exists(path):
                continue
            with open(path) as f:
                doc = json.load(f)
            with open(path[:-5] + ".cmd") as f:
                doc["command"] = " ".join(f.read().split())
            docs.append((inp, shape, doc))
    return docs


def print_load_table(load, roles):
    pols = load["policies"]
    per = [ranks(pols, key, hi) for key, _, _, _, hi in METRICS]
    mean_rank = [sum(r[i] for r in per) / len(per) for i in range(len(pols))]
    order = sorted(range(len(pols)), key=lambda i: (mean_rank[i], i))
    print("| # | policy | role | " + " | ".join(t for _, t, _, _, _ in METRICS)
          + " | mean rank |")
    print("|---:|---|---|" + "---:|" * len(METRICS) + "---:|")
    for pos, i in enumerate(order, 1):
        p = pols[i]
        cells = ["%s (%d)" % (cell(p, key, sc, dec), per[k][i])
                 for k, (key, _, sc, dec, _) in enumerate(METRICS)]
        print("| %d | %s | %s | %s | %.2f |" % (pos, p["plugin"],
              roles.get(p["plugin"], "?"), " | ".join(cells), mean_rank[i]))


def print_cell(inp, shape, doc, roles):
    print("\n## %s, %s\n" % (inp, SHAPE_TITLES[shape]))
    print("```\n%s\n```\n" % doc["command"])
    sat = doc["saturation"]
    print("Saturation: speedup %.4g (softmax's mean TTFT = 2 x unloaded %.0f ms)."
          % (sat["speedup"], sat["unloaded_ttft_ms"]))
    for load in doc["loads"]:
        print("\n### %s, %s: %d %% of saturation (speedup %.4g)\n"
              % (inp, SHAPE_TITLES[shape], load["percent"], load["speedup"]))
        print_load_table(load, roles)


def dominators(doc, load, name, roles):
    """Peer ports significantly better than `name` on all of PARETO."""
    pols = {p["plugin"]: p for p in load["policies"]}
    if name not in pols:
        return None
    me = pols[name]
    hi = {key: h for key, _, _, _, h in METRICS}
    return [p for p in pols if roles.get(p) == "peer" and
            all(better(doc, pols[p], me, key, hi[key]) for key in PARETO)]


def print_pareto(docs, roles):
    print("\n### Pareto front: hysteresis, adaptive, dpgroup against every peer\n")
    print("A wsel policy is *on the front* in a cell when no peer port is "
          "significantly better on hit rate, TTFT mean and TTFT p99 at once "
          "(paired t over seeds, 95 %, as `wsel eval` tests against softmax).\n")
    print("| input | shape | load | " + " | ".join(WSEL) + " |")
    print("|---|---|---:|" + "---|" * len(WSEL))
    on = {w: [0, 0] for w in WSEL}
    for inp, shape, doc in docs:
        for load in doc["loads"]:
            if load["percent"] not in TARGET_LOADS:
                continue
            row = []
            for w in WSEL:
                dom = dominators(doc, load, w, roles)
                if dom is None:
                    row.append("-")
                    continue
                on[w][1] += 1
                on[w][0] += not dom
                row.append("on the front" if not dom else
                           "**dominated by %s**" % ", ".join(dom))
            print("| %s | %s | %d %% | %s |" % (inp, SHAPE_TITLES[shape],
                  load["percent"], " | ".join(row)))
    print("\nOn the front: " + "; ".join(
        "%s %d of %d cells" % (w, on[w][0], on[w][1]) for w in WSEL if on[w][1]) + ".")


def print_flicker(docs, roles):
    print("\n### Flicker: hysteresis against the peers as fast\n")
    print("A peer is *as fast* when its TTFT p99 is not significantly above "
          "hysteresis's. The target: hysteresis's flicker at most half the "
          "lowest flicker among them, checked as `wsel eval` checks an "
          "\"at most\" bound (not met only when hysteresis - peer / 2 is "
          "significantly above 0).\n")
    print("| input | shape | load | hysteresis flicker % | lowest as fast: peer | "
          "its flicker % | target |")
    print("|---|---|---:|---:|---|---:|---|")
    met = total = 0
    for inp, shape, doc in docs:
        for load in doc["loads"]:
            pols = {p["plugin"]: p for p in load["policies"]}
            if "hysteresis" not in pols:
                continue
            hy = pols["hysteresis"]
            fast = [pols[p] for p in pols if roles.get(p) == "peer" and
                    not worse(doc, pols[p], hy, "ttft_p99_ms", False)]
            fl = lambda p: p["metrics"]["flicker_rate"]
            if not fast:
                verdict, name, low = "no peer as fast", "-", "-"
            else:
                best = min(fast, key=lambda p: fl(p)["mean"])
                m, sig = paired(fl(hy)["values"],
                                [v / 2 for v in fl(best)["values"]], doc["t975"])
                ok = not (sig and m > 0)
                total += 1
                met += ok
                verdict = "met" if ok else "**not met**"
                name, low = best["plugin"], "%.1f" % (100 * fl(best)["mean"])
            print("| %s | %s | %d %% | %.1f | %s | %s | %s |" % (
                inp, SHAPE_TITLES[shape], load["percent"], 100 * fl(hy)["mean"],
                name, low, verdict))
    print("\nMet in %d of %d cells with a peer as fast." % (met, total))


def print_wins(docs, roles):
    print("\n### Mean rank per policy\n")
    print("The mean of each policy's four ranks (hit rate, TTFT mean, TTFT "
          "p99, flicker; 1 = best) over every input, shape and load below.\n")
    tot, cnt = {}, {}
    for _, _, doc in docs:
        for load in doc["loads"]:
            pols = load["policies"]
            per = [ranks(pols, key, hi) for key, _, _, _, hi in METRICS]
            for i, p in enumerate(pols):
                name = p["plugin"]
                tot[name] = tot.get(name, 0) + sum(r[i] for r in per) / len(per)
                cnt[name] = cnt.get(name, 0) + 1
    print("| policy | role | mean rank |")
    print("|---|---|---:|")
    for name in sorted(tot, key=lambda n: tot[n] / cnt[n]):
        print("| %s | %s | %.2f |" % (name, roles.get(name, "?"), tot[name] / cnt[name]))


def main():
    json_dir, roles_path, script = sys.argv[1:4]
    with open(roles_path) as f:
        roles = dict(line.split() for line in f if line.strip())
    docs = load_docs(json_dir)
    if not docs:
        sys.exit("leaderboard.py: no INPUT-SHAPE.json in %s" % json_dir)
    seeds = docs[0][2]["seeds"]
    loads = sorted({int(l["percent"]) for _, _, d in docs for l in d["loads"]})
    print("# Leaderboard\n")
    print("Generated by `%s` from `wsel eval`; do not edit. Every bundled policy "
          "that runs without a configuration (`wsel info --list --plugins all`: "
          "softmax, the baselines, wsel's policies and the peer ports of "
          "[policies.md](policies.md#peer-policies)) on the inputs and cluster "
          "shapes of [evaluation.md](evaluation.md).\n" % script)
    print("This file covers: inputs %s; shapes %s; loads %s %% of saturation; "
          "seeds %d..%d (%d).\n" % (
              ", ".join(sorted({i for i, _, _ in docs}, key=INPUTS.index)),
              ", ".join(SHAPE_TITLES[s] for s in
                        sorted({s for _, s, _ in docs}, key=SHAPES.index)),
              ", ".join(str(l) for l in loads), seeds[0], seeds[-1], len(seeds)))
    print("Each cell is the mean ±95 % CI over seeds, `*` where `wsel eval` "
          "finds it significantly different from softmax (paired t), and in "
          "parentheses the policy's rank on that metric (1 = best: highest hit "
          "rate, lowest TTFT and flicker). Rows are ordered by the mean of the "
          "four ranks.\n")
    print("## Summary")
    print_pareto(docs, roles)
    print_flicker(docs, roles)
    print_wins(docs, roles)
    for inp, shape, doc in docs:
        print_cell(inp, shape, doc, roles)


if __name__ == "__main__":
    main()
