# SPDX-License-Identifier: Apache-2.0
"""Dynamo's standalone KV indexer as a differential oracle for
libwsel-router's KV index.

One stream of vLLM-format KV event batches (three frames: topic, big-endian
sequence, msgpack ``[ts, events, data_parallel_rank]``) from simulated
engines (several workers and DP ranks, an LRU cache per rank that evicts
blocks tail first, as vLLM's free queue does, and requests sharing
prefixes) goes to both: over ZeroMQ to ``python -m dynamo.indexer`` (one
PUB socket per rank, registered with ``POST /register``) and, frame for
frame, to a ``wsel.Router`` in KV-event mode (``apply_kv_message``). At
checkpoints (a sentinel block per rank, stored last, seen by Dynamo: ZeroMQ
keeps each socket's order, so everything before it was applied) every
request's overlap on every (worker, rank) is compared: Dynamo's
``POST /query`` against ``Router.overlaps``, and both against the
simulated caches themselves. wsel matches the caches always; Dynamo matches
wsel in engine order. With hostile events mixed in (blocks removed before
their descendants, whole ranks cleared) Dynamo may stop a rank's prefix at
a block whose ancestor was removed and stored again while the block stayed
cached ("orphaned"): whether it does depends on the order in which other
ranks' events reach it. Such differences are counted as explained; any
other is not.

    python test_kv_oracle.py [--requests N] [--seed S] [--capacity C]

runs a larger stream and prints the differences (pytest runs a small one).
"""
import argparse
import hashlib
import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import OrderedDict

import pytest

import wsel

BLOCK = 16
MODEL = "oracle"
# Ids of every width: small, past 2**63, near 2**64.
WORKERS = (3, 2**63 + 7, 2**64 - 5)
DP = 2
VOCAB = 32000


def need_dynamo():
    try:
        import msgspec  # noqa: F401
        import zmq  # noqa: F401

        import dynamo.llm  # noqa: F401
    except ImportError as e:
        pytest.skip(f"ai-dynamo is not installed ({e}); scripts/install-peers.sh installs it")


def ext_hash(parent, tokens):
    """An engine's own block hash: chained, the same on every rank (vLLM's
    are too), any 64-bit value."""
    h = hashlib.blake2b(repr((parent, tokens)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


class Rank:
    """One engine rank's prefix cache: LRU of blocks, evicted tail first."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.lru = OrderedDict()  # ext hash -> None, least recent first
        self.parent = {}  # ext hash -> parent ext hash (None at the root)
        self.orphans = set()  # cached blocks stored before an ancestor's removal

    def held(self, blocks):
        """The leading run of ``blocks`` this rank caches: the overlap."""
        n = 0
        while n < len(blocks) and blocks[n][0] in self.lru:
            n += 1
        return n

    def forget(self, ext):
        del self.lru[ext]
        self.parent.pop(ext, None)
        self.orphans.discard(ext)

    def remove_early(self, ext):
        """``ext`` removed before its descendants, which become orphans."""
        self.forget(ext)
        for d in self.lru:
            a = self.parent.get(d)
            while a is not None and a != ext:
                a = self.parent.get(a)
            if a == ext:
                self.orphans.add(d)

    def admit(self, blocks):
        """Cache a request's blocks [(ext, parent, tokens)]; returns its
        events (one BlockStored for the new blocks, BlockRemoved for the
        evicted ones), vLLM's array form."""
        hit = self.held(blocks)
        events = []
        new = blocks[hit:]
        if new:
            events.append(["BlockStored", [b[0] for b in new], new[0][1],
                           [t for b in new for t in b[2]], BLOCK, None, "GPU"])
        for ext, parent, _ in new:
            self.parent[ext] = parent
            self.orphans.discard(ext)
        for ext, _, _ in reversed(blocks):  # the tail is freed first: least recent
            self.lru[ext] = None
            self.lru.move_to_end(ext, last=False)
        for ext, _, _ in blocks:  # then the request holds them: most recent
            self.lru.move_to_end(ext)
        gone = []
        while len(self.lru) > self.capacity:
            gone.append(next(iter(self.lru)))
            self.forget(gone[-1])
        if gone:
            events.append(["BlockRemoved", gone, "GPU"])
        return events


class Stream:
    """Requests over documents with shared prefixes, placed on random ranks."""

    def __init__(self, seed, capacity, documents=8, hostile=False):
        self.rng = random.Random(seed)
        self.hostile = hostile
        self.ranks = {(w, r): Rank(capacity) for w in WORKERS for r in range(DP)}
        self.docs = [self.tokens(self.rng.randint(1, 6) * BLOCK) for _ in range(documents)]
        self.seq = {k: 0 for k in self.ranks}
        self.prompts = []

    def tokens(self, n):
        return [self.rng.randrange(2, VOCAB) for _ in range(n)]

    def prompt(self):
        doc = self.rng.choice(self.docs)
        cut = self.rng.randint(1, len(doc) // BLOCK) * BLOCK
        p = doc[:cut] + self.tokens(self.rng.randint(0, 2) * BLOCK + self.rng.randint(0, 9))
        self.prompts.append(p)
        return p

    @staticmethod
    def blocks(tokens):
        out, parent = [], None
        for i in range(len(tokens) // BLOCK):
            chunk = tokens[i * BLOCK:(i + 1) * BLOCK]
            ext = ext_hash(parent, tuple(chunk))
            out.append((ext, parent, chunk))
            parent = ext
        return out

    def message(self, key, events):
        """The three frames of one batch on rank ``key``."""
        import msgspec

        seq = self.seq[key]
        self.seq[key] += 1
        payload = msgspec.msgpack.encode([time.time(), events, key[1]])
        return [b"", struct.pack(">Q", seq), payload]

    def step(self):
        """(rank, frames) of 1-3 requests admitted on one random rank."""
        key = self.rng.choice(sorted(self.ranks))
        events = []
        for _ in range(self.rng.randint(1, 3)):
            events += self.ranks[key].admit(self.blocks(self.prompt()))
        if self.hostile:
            events += self.hostile_events(self.ranks[key])
        return key, self.message(key, events)

    def hostile_events(self, rank):
        """What an engine does not do in order: a block removed before its
        descendants (say, offloaded), or the whole cache cleared."""
        u = self.rng.random()
        if u < 0.15 and rank.lru:
            ext = self.rng.choice(list(rank.lru))
            rank.remove_early(ext)
            return [["BlockRemoved", [ext], "GPU"]]
        if u < 0.18:
            for ext in list(rank.lru):
                rank.forget(ext)
            return [["AllBlocksCleared"]]
        return []


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DynamoIndexer:
    """``python -m dynamo.indexer`` and one ZeroMQ PUB socket per rank."""

    def __init__(self, work):
        import zmq

        self.ctx = zmq.Context()
        self.pubs = {}
        for attempt in range(3):  # another process may take the free port first
            self.port = unused_port()
            self.log = open(os.path.join(work, f"dynamo-indexer-{attempt}.log"), "w")
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dynamo.indexer", "--block-size", str(BLOCK),
                 "--port", str(self.port), "--threads", "1"],
                stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, DYN_LOG="warn"))
            try:
                self.wait(lambda: self.get("/workers") is not None, "the indexer to listen")
                return
            except RuntimeError:
                continue
        raise RuntimeError(f"dynamo.indexer did not start (logs in {work})")

    def get(self, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            if self.proc.poll() is not None:
                raise RuntimeError(f"dynamo.indexer exited with {self.proc.returncode}")
            return None

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def wait(self, cond, what, seconds=60.0):
        end, delay = time.monotonic() + seconds, 0.02
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(delay)
            delay = min(2 * delay, 0.25)
        raise TimeoutError(f"timed out waiting for {what} (log: {self.log.name})")

    def add(self, key):
        import zmq

        pub = self.ctx.socket(zmq.PUB)
        port = pub.bind_to_random_port("tcp://127.0.0.1")
        self.pubs[key] = pub
        self.post("/register", {"instance_id": key[0], "dp_rank": key[1], "block_size": BLOCK,
                                "endpoint": f"tcp://127.0.0.1:{port}", "model_name": MODEL})

    def overlaps(self, tokens):
        """(worker, rank) -> overlap blocks of ``tokens``."""
        got = self.post("/query", {"token_ids": tokens, "model_name": MODEL})
        return {(int(w), int(r)): n // BLOCK
                for w, ranks in got.get("scores", {}).items() for r, n in ranks.items()}

    def close(self):
        for pub in self.pubs.values():
            pub.close(linger=0)
        self.ctx.term()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Comparison:
    """Overlaps compared; wsel's that differ from the cache (``wrong``:
    (prompt, rank, wsel, cache)); Dynamo's that differ from wsel's, either
    at a rank's first orphaned block (``explained``, a count) or otherwise
    (``unexplained``: (prompt, rank, wsel, Dynamo))."""

    def __init__(self):
        self.compared = self.explained = 0
        self.wrong, self.unexplained = [], []


class Oracle:
    """The stream into both indexes, and their comparison."""

    def __init__(self, work, seed, capacity, hostile=False):
        self.stream = Stream(seed, capacity, hostile=hostile)
        self.dyn = DynamoIndexer(work)
        self.host = wsel.Host(seed=1)
        self.router = wsel.Router(self.host, block_size=BLOCK, kv_events=True)
        for w in WORKERS:
            self.router.add_worker(w, f"w{w}", dp_size=DP)
        self.rows = [(r.worker_id, r.dp_rank) for r in self.router.ranks()]
        for key in sorted(self.stream.ranks):
            self.dyn.add(key)
        self.sentinels = 0

    def send(self, key, frames):
        self.dyn.pubs[key].send_multipart(frames)
        self.router.apply_kv_message(key[0], key[1], frames)

    def barrier(self):
        """A fresh one-block sentinel on every rank, sent until Dynamo shows
        it (the first ones may go before the subscription joins; storing a
        block twice is harmless), so both have applied the same stream."""
        self.sentinels += 1
        for key in sorted(self.stream.ranks):
            # Token 1 leads no prompt: a block no query shares.
            toks = [1, self.sentinels, WORKERS.index(key[0]), key[1]] + [1] * (BLOCK - 4)
            ext = ext_hash(("sentinel", self.sentinels, key), tuple(toks))
            ev = [["BlockStored", [ext], None, toks, BLOCK, None, "GPU"]]

            def seen():
                self.send(key, self.stream.message(key, ev))
                return self.dyn.overlaps(toks).get(key) == 1
            self.dyn.wait(seen, f"rank {key} to reach Dynamo's indexer")

    def compare(self, prompts, out):
        """Every (prompt, worker, rank) overlap of wsel, Dynamo and the
        cache itself: into ``out``, a Comparison."""
        for i, p in enumerate(prompts):
            ours = dict(zip(self.rows, self.router.overlaps(p)))
            theirs = self.dyn.overlaps(p)
            blocks = Stream.blocks(p)
            for key in self.rows:
                rank = self.stream.ranks[key]
                truth, w, d = rank.held(blocks), ours.get(key, 0), theirs.get(key, 0)
                out.compared += 1
                if w != truth:
                    out.wrong.append((i, key, w, truth))
                if w == d:
                    continue
                orphan = next((j for j in range(truth) if blocks[j][0] in rank.orphans), None)
                if w == truth and d == orphan:
                    out.explained += 1
                else:
                    out.unexplained.append((i, key, w, d))

    def run(self, requests, checkpoints=3):
        """The stream to both, compared at each checkpoint: a Comparison."""
        self.barrier()
        out = Comparison()
        per = max(requests // checkpoints, 1)
        while len(self.stream.prompts) < requests:
            start = len(self.stream.prompts)
            while len(self.stream.prompts) < min(start + per, requests):
                self.send(*self.stream.step())
            self.barrier()
            self.compare(self.stream.prompts + [self.stream.tokens(3 * BLOCK)], out)
        return out

    def close(self):
        self.router.close()
        self.host.close()
        self.dyn.close()


@pytest.mark.parametrize("hostile", [False, True], ids=["engine_order", "hostile"])
def test_dynamos_indexer_and_wsels_agree_on_every_overlap(tmp_path, hostile):
    need_dynamo()
    o = Oracle(str(tmp_path), seed=7, capacity=24, hostile=hostile)
    try:
        out = o.run(requests=150)
        c = o.router.counters()
        assert c.kv_blocks_removed > 0  # the stream evicted
        assert c.kv_skipped == {}
    finally:
        o.close()
    assert out.compared > 1000
    assert out.wrong == []
    assert out.unexplained == []
    if not hostile:
        assert out.explained == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--capacity", type=int, default=64)
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument("--hostile", action="store_true",
                    help="also remove blocks before their descendants and clear whole ranks")
    a = ap.parse_args()
    work = os.environ.get("TMPDIR", "/tmp")
    o = Oracle(work, a.seed, a.capacity, a.hostile)
    try:
        t0 = time.monotonic()
        out = o.run(a.requests, a.checkpoints)
        c = o.router.counters()
        print(f"requests {a.requests}, (request, worker, rank) overlaps compared {out.compared}, "
              f"wsel off the cache {len(out.wrong)}, Dynamo off wsel {len(out.unexplained)} "
              f"(+{out.explained} at an orphaned block); blocks stored {c.kv_blocks_stored}, "
              f"removed {c.kv_blocks_removed}, messages {c.kv_messages}, skipped "
              f"{c.kv_skipped}; {time.monotonic() - t0:.1f} s")
        for d in out.wrong[:20]:
            print("prompt %d on %s: wsel %d, cache %d" % d)
        for d in out.unexplained[:20]:
            print("prompt %d on %s: wsel %d, Dynamo %d" % d)
    finally:
        o.close()
    return 1 if out.wrong or out.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
