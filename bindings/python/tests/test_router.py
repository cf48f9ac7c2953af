# SPDX-License-Identifier: Apache-2.0
import os
import struct

import pytest

import wsel

BLOCK = 16


def msgpack(v) -> bytes:
    """The msgpack subset a KVEventBatch needs (no dependency)."""
    if v is None:
        return b"\xc0"
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, int):
        return b"\xcf" + struct.pack(">Q", v)
    if isinstance(v, str):
        b = v.encode()
        return bytes([0xa0 | len(b)]) + b if len(b) < 32 else b"\xd9" + bytes([len(b)]) + b
    if isinstance(v, list):
        return b"\xdd" + struct.pack(">I", len(v)) + b"".join(msgpack(x) for x in v)
    if isinstance(v, dict):
        return b"\xdf" + struct.pack(">I", len(v)) + b"".join(
            msgpack(k) + msgpack(x) for k, x in v.items())
    raise TypeError(v)


def stored_message(tokens, seq=0):
    hashes = wsel.hash_tokens(tokens, BLOCK)
    event = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None,
             "token_ids": list(tokens), "block_size": BLOCK, "lora_id": None,
             "medium": "GPU"}
    batch = {"ts": 1.0, "events": [event], "data_parallel_rank": 0}
    return [b"kv", struct.pack(">Q", seq), msgpack(batch)]


@pytest.fixture
def router(host, plugin_dir):
    host.switch(os.path.join(plugin_dir, "softmax.so"))
    with wsel.Router(host, block_size=BLOCK) as r:
        r.add_worker(1, "127.0.0.1:8001", dp_size=2)
        r.add_worker(2, "127.0.0.1:8002")
        yield r


def test_topology_lists_ranks_in_canonical_order(router):
    assert [(r.worker_id, r.dp_rank) for r in router.ranks()] == [(1, 0), (1, 1), (2, 0)]
    assert router.epoch == 3
    with pytest.raises(wsel.WselError) as exc:
        router.add_worker(1, "127.0.0.1:9")
    assert exc.value.name == "WSEL_ESTATE"


def test_route_accounts_load_until_first_token_and_finish(router):
    res = router.route(list(range(64)))
    assert res.num_blocks == 4 and res.address.startswith("127.0.0.1:800")
    rank = next(r for r in router.ranks() if (r.worker_id, r.dp_rank) ==
                (res.worker_id, res.dp_rank))
    assert rank.active_requests == 1 and rank.active_prefill_tokens == 64
    router.first_token(res.request_id)
    router.finished(res.request_id, output_tokens=10)
    assert all(r.active_requests == 0 for r in router.ranks())
    c = router.counters()
    assert (c.routes, c.plugin_answers, c.prompt_blocks) == (1, 1, 4)
    with pytest.raises(wsel.WselError) as exc:
        router.finished(res.request_id)
    assert exc.value.name == "WSEL_ENOENT"


def test_history_sends_a_repeated_prompt_to_its_cache(router):
    prompt = list(range(128))
    first = router.route(prompt)
    router.finished(first.request_id)
    again = router.route(prompt)
    assert (again.worker_id, again.dp_rank) == (first.worker_id, first.dp_rank)
    assert again.overlap_blocks == 8


def test_drained_and_unavailable_workers_are_not_chosen(router):
    router.drain_worker(2)
    router.set_worker_available(1, False)
    with pytest.raises(wsel.WselError) as exc:
        router.route(list(range(32)))
    assert exc.value.name == "WSEL_ENOCANDIDATE"
    router.set_worker_available(1, True)
    assert router.route(list(range(32))).worker_id == 1


def test_text_prompts_and_overrides_route(router):
    res = router.route(text="hello " * 50, temperature=0.0, overlap_score_weight=2.0)
    assert res.num_blocks > 0
    assert router.route(list(range(16)), builtin=True).answer == wsel.ANSWER_FALLBACK
    assert router.counters().builtin_routes == 1


def test_kv_events_feed_the_index(host, plugin_dir):
    host.switch(os.path.join(plugin_dir, "softmax.so"))
    with wsel.Router(host, block_size=BLOCK, kv_events=True) as r:
        r.add_worker(1, "a", dp_size=1)
        r.add_worker(2, "b", dp_size=1)
        prompt = list(range(5, 5 + 4 * BLOCK))
        r.apply_kv_message(2, 0, stored_message(prompt))
        assert r.counters().kv_blocks_stored == 4
        res = r.route(prompt)
        assert (res.worker_id, res.overlap_blocks) == (2, 4)
        with pytest.raises(wsel.WselError):
            r.apply_kv_message(2, 0, [b"kv"])
        assert r.counters().kv_skipped == {"frames": 1}
        assert r.kv_cpu().messages >= 2


def test_overlaps_are_read_per_row_without_routing(host):
    with wsel.Router(host, block_size=BLOCK, kv_events=True) as r:
        r.add_worker(1, "a", dp_size=2)
        r.add_worker(2, "b", dp_size=1)
        prompt = list(range(5, 5 + 3 * BLOCK))
        r.apply_kv_message(2, 0, stored_message(prompt[:2 * BLOCK]))
        assert r.overlaps(prompt) == [0, 0, 2]
        assert r.overlaps(prompt[BLOCK:]) == [0, 0, 0]
        assert r.counters().routes == 0


def test_hashes_are_chained_per_full_block():
    toks = list(range(40))
    h = wsel.hash_tokens(toks, BLOCK)
    assert len(h) == 2 and h == wsel.hash_tokens(toks[:32], BLOCK)
    assert wsel.hash_tokens(toks[16:], BLOCK)[0] != h[1]
    assert len(wsel.hash_text("x" * 100, 32)) == 3


def test_host_refuses_to_close_under_a_router(plugin_dir):
    h = wsel.Host()
    r = wsel.Router(h)
    with pytest.raises(wsel.WselError):
        h.close()
    r.close()
    h.close()


def test_the_documented_example_runs(plugin_dir):
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "route.py")
    out = subprocess.run([sys.executable, example, plugin_dir], check=True,
                         capture_output=True, text=True).stdout
    assert "cached 8" in out and "reason 1" in out
