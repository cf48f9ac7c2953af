# SPDX-License-Identifier: Apache-2.0
"""Requests sent to Dynamo's frontend are routed by the wsel policy that
wsel-dynamo loaded by path, to Dynamo's CPU mocker engines (2 workers x 2
DP ranks), and a switch by path changes the routing without a restart."""
import os

import wsel

from conftest import BLOCK, DP, WORKERS, deadline

SEED = 0  # wsel-dynamo's default --seed


def prompt(first: int, blocks: int = 3):
    return [first] + list(range(2, 2 + blocks * BLOCK - 1))


def decisions(d, last):
    return d.control("status", {"last": last})["decisions"]


def replay(plugin_dir, decision, policy="softmax.so", config='{"temperature": 0}'):
    """What a fresh host with the same seed, policy and table answers."""
    with wsel.Host(seed=SEED) as host:
        host.switch(os.path.join(plugin_dir, policy), config)
        req = host.request(decision["request_id"], decision["isl"], block_size=BLOCK)
        ranks = [wsel.RankState(**r) for r in decision["ranks"]]
        c = host.select(req, wsel.Table(len(ranks)).build(req, ranks))
        return c.worker_id, c.dp_rank


def wait_cached(d, tokens, where):
    """Until Dynamo's indexer (the mockers' KV events) shows the prompt's
    blocks on the rank ``where``."""
    for _ in deadline(f"KV events of {where}"):
        for r in d.ranks(tokens):
            if (r["worker_id"], r["dp_rank"]) == where and r["overlap_blocks"] == len(tokens) // BLOCK:
                return


def test_requests_are_routed_by_the_wsel_policy(deployment, plugin_dir):
    d = deployment
    before = d.control("status", {})
    prompts = [prompt(5000 + i) for i in range(4)]
    for p in prompts:
        assert d.complete(p)["usage"]["prompt_tokens"] == len(p)
    first = decisions(d, len(prompts))
    for p, dec in zip(prompts, first):
        assert len(dec["ranks"]) == WORKERS * DP
        assert dec["policy"] == "softmax"
        assert (dec["worker_id"], dec["dp_rank"]) == replay(plugin_dir, dec)
        wait_cached(d, p, (dec["worker_id"], dec["dp_rank"]))  # it went there
    for p in prompts:  # again: the cached rank wins, and the engine reuses it
        assert d.complete(p)["usage"]["prompt_tokens_details"]["cached_tokens"] >= 2 * BLOCK
    again = decisions(d, len(prompts))
    for a, b in zip(first, again):
        assert (b["worker_id"], b["dp_rank"]) == (a["worker_id"], a["dp_rank"])
        assert (b["worker_id"], b["dp_rank"]) == replay(plugin_dir, b)
        assert max(r["overlap_blocks"] for r in b["ranks"]) == 3
    after = d.control("status", {})
    n = 2 * len(prompts)
    assert after["counters"]["selects"] - before["counters"]["selects"] == n
    assert after["counters"]["plugin_answers"] - before["counters"]["plugin_answers"] == n
    assert after["counters"]["fallbacks"] == 0
    assert after["outcomes"] - before["outcomes"] == n and after["failed"] == 0


def test_a_switch_by_path_changes_routing_without_a_restart(deployment, plugin_dir):
    d = deployment
    pid = d.adapter.pid
    p = prompt(7000)
    d.complete(p)
    home = decisions(d, 1)[0]
    wait_cached(d, p, (home["worker_id"], home["dp_rank"]))
    d.complete(p)
    assert decisions(d, 1)[0]["worker_id"] == home["worker_id"]

    got = d.control("policy", {"path": os.path.join(plugin_dir, "roundrobin.so")})
    assert got["policy"] == "roundrobin" and "error" not in got
    for _ in range(WORKERS * DP):
        d.complete(p)
    rr = decisions(d, WORKERS * DP)
    assert {dec["policy"] for dec in rr} == {"roundrobin"}
    assert len({(dec["worker_id"], dec["dp_rank"]) for dec in rr}) == WORKERS * DP

    bad = d.control("policy", {"path": os.path.join(plugin_dir, "no-such-policy.so")})
    assert "error" in bad and bad["policy"] == "roundrobin"  # the live one keeps serving

    got = d.control("policy", {"path": os.path.join(plugin_dir, "softmax.so"),
                               "config": {"temperature": 0}})
    assert got["policy"] == "softmax"
    d.complete(prompt(7001))
    dec = decisions(d, 1)[0]
    assert (dec["worker_id"], dec["dp_rank"]) == replay(plugin_dir, dec)
    assert got["counters"]["switches"] == 3 and got["counters"]["failed_switches"] == 1
    assert d.adapter.pid == pid and d.adapter.poll() is None
