# SPDX-License-Identifier: Apache-2.0
"""Dynamo's overlap and load answers become wsel rank states whose table
reproduces Dynamo's potentials (no Dynamo needed)."""
import wsel

from wsel_dynamo import ranks_from_dynamo, request_share

W1, W2 = 15350432925867578624, 9191415594411319232  # u64 ids past 2**63


def scores(*rows):
    return {"block_size": 16, "workers": [
        {"worker_id": w, "dp_rank": r, "device_blocks": b} for w, r, b in rows]}


def load(w, r, prefill, decode, active=0):
    return {"worker_id": w, "dp_rank": r, "potential_prefill_tokens": prefill,
            "potential_decode_blocks": decode, "active_requests": active}


def test_request_share_counts_uncached_tokens_and_new_full_blocks():
    assert request_share(33, 16, 0) == (33, 2)
    assert request_share(33, 16, 2) == (1, 0)
    assert request_share(32, 16, 2) == (0, 0)


def test_ranks_are_sorted_by_worker_then_rank():
    got = ranks_from_dynamo(33, 16, scores(), [load(W1, 1, 33, 2), load(W2, 0, 33, 2),
                                                load(W1, 0, 33, 2)])
    assert [(r.worker_id, r.dp_rank) for r in got] == [(W2, 0), (W1, 0), (W1, 1)]


def test_the_request_share_is_taken_off_the_potentials():
    got = ranks_from_dynamo(100, 16, scores((W1, 0, 6)),
                            [load(W1, 0, 4 + 40, 0 + 10, active=3), load(W1, 1, 100, 6)])
    assert got[0] == wsel.RankState(W1, 0, overlap_blocks=6, active_prefill_tokens=40,
                                    active_blocks=10, active_requests=3)
    assert got[1] == wsel.RankState(W1, 1)


def test_the_table_cost_is_dynamos_default_cost():
    loads = [load(W2, 0, 500, 40, 2), load(W1, 0, 17, 9, 1)]
    ranks = ranks_from_dynamo(97, 16, scores((W1, 0, 5)), loads)
    with wsel.Host(seed=1) as host:
        req = host.request(1, 97, block_size=16)
        table = wsel.Table(4).build(req, ranks)
        for row, dyn in enumerate(loads):  # W2 < W1: table order
            want = dyn["potential_prefill_tokens"] / 16 + dyn["potential_decode_blocks"]
            assert table.cost(row) == want


def test_a_rank_with_an_overlap_but_no_load_is_flagged():
    got = ranks_from_dynamo(33, 16, scores((W2, 1, 1)), [load(W1, 0, 33, 2)])
    assert (got[0].worker_id, got[0].flags) == (W2, wsel.ROW_NO_LOAD)
    assert got[0].overlap_blocks == 1
