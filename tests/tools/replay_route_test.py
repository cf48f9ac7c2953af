#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""replay_route_test.py -- `wsel replay --plugin`: the replay routes each
request through libwsel-router and the policy receives its outcome.

usage: replay_route_test.py CASE WSEL_ENGINE WSEL RECORDER_SO WORKDIR

Two wsel-engine processes (2 ranks and 1 rank, --time-scale 20) and the
outcome_recorder fixture, which logs every outcome it receives. Cases:
  history  KV index from routing history, the text report: one outcome per
           request with the (worker, rank) the request was sent to, ttft <=
           e2e, the engine's prompt, cached and completion tokens; the
           report's per-rank counts equal each engine rank's finished
           requests (so X-data-parallel-rank was honoured)
  events   the same with the engines' KV events feeding the index, and the
           --json document's "routing" member
  usage    routing options without --plugin, or a --dp list that does not
           match the URLs, are bad usage (exit 2)

Everything waits for conditions (a port file, /health), never for a fixed
time; only 127.0.0.1 is used. The engines are started and reaped by
tests/support/engines.py.
"""
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                "support"))
from engines import BLOCK, CEILING_S, Engine, fail  # noqa: E402

REQUESTS = 40  # the host logs at most 100 lines a second per plugin


def finished_per_rank(engine):
    """{rank: requests it finished}, from the engine's /metrics."""
    out = {}
    for labels, value in engine.metric_samples("vllm:request_success_total"):
        rank = int(labels["engine"])
        out[rank] = out.get(rank, 0) + int(value)
    return out


def make_trace(path):
    """Four groups sharing 4-block prefixes, 50 ms apart: routing by cache
    has something to find."""
    with open(path, "w") as f:
        for i in range(REQUESTS):
            g = i % 4
            ids = [1000 * g + k for k in range(4)] + [100000 + i]
            f.write(json.dumps({"timestamp": 50 * i, "input_length": len(ids) * BLOCK,
                                "output_length": 4 + i % 5, "hash_ids": ids}) + "\n")


OUTCOME = re.compile(r"outcome (\d+) on (\d+)/(\d+) ttft=(\d+) e2e=(\d+) prompt=(\d+) "
                     r"cached=(\d+) output=(\d+) flags=(\d+)")


def check_outcomes(stderr, requests_out, engines):
    outcomes = {}
    for m in OUTCOME.finditer(stderr):
        rid = int(m.group(1))
        if rid in outcomes:
            fail("request %d got two outcomes" % rid)
        outcomes[rid] = [int(x) for x in m.groups()[1:]]
    if sorted(outcomes) != list(range(1, REQUESTS + 1)):
        fail("outcomes for %s, expected one for each of 1..%d:\n%s"
             % (sorted(outcomes), REQUESTS, stderr))
    sent = {}
    with open(requests_out) as f:
        for line in f:
            r = json.loads(line)
            sent[r["index"]] = r
    per_rank = {}
    for rid, (w, rank, ttft, e2e, prompt, cached, output, flags) in outcomes.items():
        r = sent[rid - 1]
        if r["ok"] != 1 or flags != 0:
            fail("request %d failed: %s, flags %d" % (rid, r, flags))
        if (w, rank) != (r["url"], r["dp_rank"]):
            fail("request %d: outcome on %d/%d, sent to %d/%d"
                 % (rid, w, rank, r["url"], r["dp_rank"]))
        if not 0 < ttft <= e2e:
            fail("request %d: ttft %d, e2e %d" % (rid, ttft, e2e))
        if (prompt, cached, output) != (r["prompt_tokens"], r["cached_tokens"],
                                        r["completion_tokens"]):
            fail("request %d: outcome tokens %s, engine's %s" % (rid, (prompt, cached, output), r))
        # The replay's own times, in model time (as in --requests-out).
        if abs(ttft - r["ttft_ms"] * 1000) > 1 or abs(e2e - r["e2e_ms"] * 1000) > 1:
            fail("request %d: outcome times %d/%d us, replay's %s/%s ms"
                 % (rid, ttft, e2e, r["ttft_ms"], r["e2e_ms"]))
        per_rank[(w, rank)] = per_rank.get((w, rank), 0) + 1
    for w, e in enumerate(engines):
        got = finished_per_rank(e)
        for rank, n in got.items():
            if per_rank.get((w, rank), 0) != n:
                fail("engine %d rank %d finished %d requests, %d were routed there"
                     % (w, rank, n, per_rank.get((w, rank), 0)))
    return per_rank


def replay(wsel, urls_args, recorder, trace, out_file, extra):
    cmd = [wsel, "replay", "--no-progress", "--trace", trace, "--trace-block-size",
           str(BLOCK), "--time-scale", "20", "--plugin", recorder,
           "--requests-out", out_file] + urls_args + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=CEILING_S * 5)
    if p.returncode != 0:
        fail("wsel replay exited %d:\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
    return p.stdout, p.stderr


def case_routed(engine_exe, wsel, recorder, workdir, events):
    kv = ["--kv-events", "tcp://127.0.0.1:0"] if events else []
    engines = [Engine(engine_exe, workdir, "e%d" % w,
                      ["--time-scale", "20", "--dp", dp] + kv)
               for w, dp in enumerate(["2", "1"])]
    try:
        trace = os.path.join(workdir, "trace.jsonl")
        make_trace(trace)
        args = []
        for e in engines:
            args += ["--url", e.url]
            if events:
                args += ["--kv-events", ",".join(e.kv[r] for r in sorted(e.kv))]
        args += ["--dp", "2,1"]
        out_file = os.path.join(workdir, "requests.jsonl")
        stdout, stderr = replay(wsel, args, recorder, trace, out_file,
                                ["--json"] if events else [])
        per_rank = check_outcomes(stderr, out_file, engines)
        if events:
            routing = json.loads(stdout)["routing"]
            if (routing["policy"], routing["routed"], routing["outcomes"],
                    routing["plugin_answers"]) != ("outcome_recorder", REQUESTS,
                                                   REQUESTS, REQUESTS):
                fail("routing member: %s" % routing)
            for r in routing["ranks"]:
                if per_rank.get((r["worker"], r["dp_rank"]), 0) != r["requests"]:
                    fail("routing rank %s, outcomes %s" % (r, per_rank))
        else:
            want = ("routing: policy outcome_recorder (%s); %d routed: %d by the plugin, "
                    "0 by the host's fallback, 0 refused; %d outcomes delivered"
                    % (recorder, REQUESTS, REQUESTS, REQUESTS))
            if want not in stdout:
                fail("expected '%s' in:\n%s" % (want, stdout))
            for w, e in enumerate(engines):
                ranks = 2 if w == 0 else 1
                line = "  worker %d %s:" % (w, e.url) + ",".join(
                    " rank %d: %d" % (k, per_rank.get((w, k), 0)) for k in range(ranks))
                if line not in stdout:
                    fail("expected '%s' in:\n%s" % (line, stdout))
    finally:
        for e in engines:
            e.stop()


def case_usage(wsel):
    for args, msg in [
            (["--dp", "2"], "need --plugin"),
            (["--plugin", "softmax", "--url", "http://127.0.0.1:9", "--dp", "2,1,3"],
             "--dp lists 3 sizes for 2 --url"),
            (["--kv-events", "tcp://127.0.0.1:1"], "must follow its --url")]:
        cmd = [wsel, "replay", "--workload", "chat"] + args
        if args[0] != "--kv-events":
            cmd = [wsel, "replay", "--workload", "chat", "--url", "http://127.0.0.1:9"] + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CEILING_S)
        if p.returncode != 2 or msg not in p.stderr:
            fail("%s: exit %d, stderr %r" % (args, p.returncode, p.stderr))


def main():
    if len(sys.argv) != 6:
        fail(__doc__)
    case, engine_exe, wsel, recorder, workdir = sys.argv[1:]
    os.makedirs(workdir, exist_ok=True)
    if case == "history":
        case_routed(engine_exe, wsel, recorder, workdir, events=False)
    elif case == "events":
        case_routed(engine_exe, wsel, recorder, workdir, events=True)
    elif case == "usage":
        case_usage(wsel)
    else:
        fail("unknown case " + case)
    print("ok: " + case)


if __name__ == "__main__":
    main()
