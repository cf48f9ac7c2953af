#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""engine_test.py -- wsel-engine and wsel replay as real processes.

usage: engine_test.py CASE WSEL_ENGINE WSEL KV_FETCH WORKDIR

Cases:
  usage       two engines, a generated trace replayed through both by
              `wsel replay`: prompt, cached and completion tokens of every
              request equal what the trace implies, computed here
  kv_events   one engine with --dp 2 and a small cache: the KV event batches
              (fetched through vLLM's replay socket, decoded by the msgpack
              reader below, not the engine's encoder) replayed per rank give
              exactly the blocks the engine reports cached, and every
              BlockStored carries the tokens that were sent
  bad_input   every bad request gets vLLM's status and the engine keeps
              serving (a client that leaves mid-stream included)
  concurrent  1,000 streamed requests at once through one engine, all 200
  replay_errors  a closed port and 400 answers are counted by status by
              wsel replay, which exits 0; a bad trace line is named
  replay_failover  with --failover, requests sent to a refusing URL go to
              the next one: none lost, each counted as a retry; a request
              that names its rank is answered X-wsel-served-by HOST:PORT/RANK

Everything waits for conditions (a port file, /health, a count) under
generous ceilings, never for a fixed time; only 127.0.0.1 is used. The
engines are started and reaped by tests/support/engines.py.
"""
import http.client
import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                "support"))
from engines import (BLOCK, CEILING_S, Engine, deadline_loop, fail,  # noqa: E402
                     refusing_socket, start_process, stop_process)

TRACE_BLOCK = 512


# --- the expectations, from the trace alone -----------------------------------

def make_trace(path, n, seed):
    """Requests in groups sharing prefixes of whole trace blocks, so hits
    happen; lengths and outputs vary; timestamps increase."""
    rnd = random.Random(seed)
    groups = [[1000 * g + k for k in range(6)] for g in range(3)]
    reqs = []
    for i in range(n):
        g = groups[rnd.randrange(len(groups))]
        shared = rnd.randrange(0, 4)
        isl = rnd.randrange(100, 2500)
        nblocks = (isl + TRACE_BLOCK - 1) // TRACE_BLOCK
        ids = g[:min(shared, nblocks)]
        ids += [100000 + i * 10 + k for k in range(nblocks - len(ids))]
        reqs.append({"timestamp": i * 5, "input_length": isl,
                     "output_length": rnd.randrange(1, 24), "hash_ids": ids})
    with open(path, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    return reqs


def common_tokens(a, b):
    k = 0
    while k < len(a["hash_ids"]) and k < len(b["hash_ids"]) and \
            a["hash_ids"][k] == b["hash_ids"][k]:
        k += 1
    return min(k * TRACE_BLOCK, a["input_length"], b["input_length"])


def expected_cached(earlier, b):
    """The engine's rule: whole blocks of the longest prefix an earlier
    request on this engine computed, at most isl - 1."""
    best = max([common_tokens(a, b) for a in earlier] + [0])
    m = min(best // BLOCK, b["input_length"] // BLOCK)
    cached = m * BLOCK
    return b["input_length"] - 1 if cached >= b["input_length"] else cached


def case_usage(engine_exe, wsel, kv_fetch, workdir):
    trace = os.path.join(workdir, "usage_trace.jsonl")
    reqs = make_trace(trace, 24, seed=7)
    engines = [Engine(engine_exe, workdir, "usage%d" % i,
                      ["--time-scale", "50", "--kv-blocks", "4096", "--quiet"])
               for i in range(2)]
    try:
        out = os.path.join(workdir, "usage_requests.jsonl")
        cmd = [wsel, "replay", "--trace", trace, "--concurrency", "1", "--no-progress",
               "--timeout", str(CEILING_S), "--requests-out", out]
        for e in engines:
            cmd += ["--url", e.url]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=CEILING_S * 4)
        print(p.stdout.decode())
        if p.returncode != 0:
            fail("wsel replay exited with %d" % p.returncode)
        got = {}
        with open(out) as f:
            for line in f:
                r = json.loads(line)
                got[r["index"]] = r
        if len(got) != len(reqs):
            fail("%d results for %d requests" % (len(got), len(reqs)))
        hits = 0
        for i, want in enumerate(reqs):
            r = got[i]
            earlier = [reqs[j] for j in range(i) if j % 2 == i % 2]
            cached = expected_cached(earlier, want)
            hits += cached > 0
            checks = [("status", r["status"], 200),
                      ("prompt_tokens", r["prompt_tokens"], want["input_length"]),
                      ("completion_tokens", r["completion_tokens"], want["output_length"]),
                      ("tokens_received", r["tokens_received"], want["output_length"]),
                      ("cached_tokens", r["cached_tokens"], cached)]
            for name, have, exp in checks:
                if have != exp:
                    fail("request %d: %s %s, expected %s" % (i, name, have, exp))
        if hits < 5:
            fail("the trace made only %d cache hits; it should test more" % hits)
        print("usage: %d requests exact, %d with cached prefixes" % (len(reqs), hits))
    finally:
        for e in engines:
            e.stop()


# --- msgpack, read by hand (independent of the engine's encoder) -------------

class Reader:
    def __init__(self, data):
        self.d = data
        self.i = 0

    def take(self, n):
        if self.i + n > len(self.d):
            fail("msgpack: truncated")
        b = self.d[self.i:self.i + n]
        self.i += n
        return b

    def uint(self, n):
        return int.from_bytes(self.take(n), "big")

    def value(self):
        t = self.take(1)[0]
        if t <= 0x7f:
            return t
        if t >= 0xe0:
            return t - 0x100
        if 0x80 <= t <= 0x8f:
            return self.map(t & 0x0f)
        if 0x90 <= t <= 0x9f:
            return [self.value() for _ in range(t & 0x0f)]
        if 0xa0 <= t <= 0xbf:
            return self.take(t & 0x1f).decode()
        simple = {0xc0: None, 0xc2: False, 0xc3: True}
        if t in simple:
            return simple[t]
        if t in (0xcc, 0xcd, 0xce, 0xcf):
            return self.uint(1 << (t - 0xcc))
        if t in (0xd0, 0xd1, 0xd2, 0xd3):
            n = 1 << (t - 0xd0)
            return int.from_bytes(self.take(n), "big", signed=True)
        if t == 0xca:
            return struct.unpack(">f", self.take(4))[0]
        if t == 0xcb:
            return struct.unpack(">d", self.take(8))[0]
        if t in (0xd9, 0xda, 0xdb):
            return self.take(self.uint(1 << (t - 0xd9))).decode()
        if t in (0xc4, 0xc5, 0xc6):
            return self.take(self.uint(1 << (t - 0xc4)))
        if t in (0xdc, 0xdd):
            return [self.value() for _ in range(self.uint(2 if t == 0xdc else 4))]
        if t in (0xde, 0xdf):
            return self.map(self.uint(2 if t == 0xde else 4))
        fail("msgpack: type byte 0x%02x not expected here" % t)

    def map(self, n):
        m = {}
        for _ in range(n):
            k = self.value()
            m[k] = self.value()
        return m


def decode(payload):
    r = Reader(payload)
    v = r.value()
    if r.i != len(payload):
        fail("msgpack: %d bytes after the batch" % (len(payload) - r.i))
    return v


def fetch_lines(kv_fetch, endpoint):
    p = subprocess.run([kv_fetch, endpoint, "0", str(CEILING_S * 1000)],
                       stdout=subprocess.PIPE, timeout=CEILING_S * 2)
    if p.returncode != 0:
        fail("kv_fetch %s exited with %d" % (endpoint, p.returncode))
    return p.stdout.decode().splitlines()


def fetch_batches(kv_fetch, endpoint):
    out = []
    for line in fetch_lines(kv_fetch, endpoint):
        seq, hexdata = line.split()
        out.append((int(seq), decode(bytes.fromhex(hexdata))))
    return out


class Subscriber:
    """kv_fetch --sub on one rank's PUB socket: the (seq, payload) lines."""

    def __init__(self, kv_fetch, endpoint, topic):
        self.proc = start_process([kv_fetch, "--sub", endpoint, topic],
                                  stdout=subprocess.PIPE)
        self.lines = []
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        for line in self.proc.stdout:
            self.lines.append(line.decode().strip())

    def stop(self):
        stop_process(self.proc, kill=True)


def case_kv_events(engine_exe, wsel, kv_fetch, workdir):
    dp = 2
    e = Engine(engine_exe, workdir, "kv", ["--dp", str(dp), "--kv-blocks", "48",
                                            "--time-scale", "50", "--quiet",
                                            "--kv-events", "tcp://127.0.0.1:0",
                                            "--kv-events-replay", "tcp://127.0.0.1:0",
                                            "--kv-events-topic", "kv@wsel"])
    subs = []
    try:
        # Live subscribers first; a PUB socket drops what is sent before a
        # subscription reaches it, so warm up until each has seen a batch.
        for rank in range(dp):
            subs.append(Subscriber(kv_fetch, e.lines[("kv_events", str(rank))], "kv@wsel"))
        for rank in range(dp):
            k = 0
            for _ in deadline_loop("rank %d's subscriber to see a batch" % rank):
                if subs[rank].lines:
                    break
                k += 1
                e.post("/v1/completions", {"prompt": [k % 32000] * (BLOCK + 1),
                                           "max_tokens": 1},
                       {"X-data-parallel-rank": str(rank)})
        rnd = random.Random(3)
        prefixes = [[rnd.randrange(32000) for _ in range(BLOCK * 6)] for _ in range(3)]
        prompts = []
        for i in range(30):
            p = prefixes[rnd.randrange(3)][:BLOCK * rnd.randrange(0, 7)]
            p = p + [rnd.randrange(32000) for _ in range(rnd.randrange(1, 700))]
            rank = rnd.randrange(dp)
            status, body = e.post("/v1/completions",
                                  {"prompt": p, "max_tokens": rnd.randrange(1, 8)},
                                  {"X-data-parallel-rank": str(rank)})
            if status != 200:
                fail("request %d: status %d %s" % (i, status, body[:200]))
            prompts.append(p)
        for k in range(2001):  # the warm-up prompts' blocks (k stays small)
            prompts.append([k] * (BLOCK + 1))
        by_tokens = {}
        for p in prompts:
            for b in range(len(p) // BLOCK):
                by_tokens[tuple(p[b * BLOCK:(b + 1) * BLOCK])] = True
        for rank in range(dp):
            ep = e.lines[("kv_events_replay", str(rank))]
            cached = set(e.get_json("/wsel/kv_blocks?rank=%d" % rank)["blocks"])
            for _ in deadline_loop("rank %d's events to match its cache" % rank):
                batches = fetch_batches(kv_fetch, ep)
                held, tokens_of, stored, removed = set(), {}, 0, 0
                for n, (seq, batch) in enumerate(batches):
                    if seq != n:
                        fail("rank %d: sequence %d at position %d" % (rank, seq, n))
                    if set(batch) != {"ts", "events", "data_parallel_rank"} or \
                            batch["data_parallel_rank"] != rank or \
                            not isinstance(batch["ts"], float):
                        fail("rank %d: batch %d is %r" % (rank, seq, batch))
                    for ev in batch["events"]:
                        if ev["type"] == "BlockStored":
                            hashes = ev["block_hashes"]
                            toks = ev["token_ids"]
                            if ev["block_size"] != BLOCK or ev["medium"] != "GPU" or \
                                    len(toks) != len(hashes) * BLOCK or \
                                    "lora_id" not in ev or "lora_name" not in ev:
                                fail("rank %d: BlockStored %r" % (rank, ev))
                            parent = ev["parent_block_hash"]
                            if parent is not None and parent not in tokens_of:
                                fail("rank %d: parent %d never stored" % (rank, parent))
                            for k, h in enumerate(hashes):
                                t = tuple(toks[k * BLOCK:(k + 1) * BLOCK])
                                if t not in by_tokens:
                                    fail("rank %d: stored tokens no prompt had" % rank)
                                if tokens_of.get(h, t) != t:
                                    fail("rank %d: hash %d with two contents" % (rank, h))
                                tokens_of[h] = t
                                held.add(h)
                                stored += 1
                        elif ev["type"] == "BlockRemoved":
                            if ev["medium"] != "GPU":
                                fail("rank %d: BlockRemoved %r" % (rank, ev))
                            for h in ev["block_hashes"]:
                                if h not in held:
                                    fail("rank %d: removed %d, not held" % (rank, h))
                                held.discard(h)
                                removed += 1
                        else:
                            fail("rank %d: event %r" % (rank, ev))
                if held == cached:
                    break
                cached = set(e.get_json("/wsel/kv_blocks?rank=%d" % rank)["blocks"])
            if removed == 0:
                fail("rank %d: no eviction happened; the cache should be smaller" % rank)
            # The live stream: the same three frames' payloads as the replay.
            raw = {}
            for seq, hexdata in (l.split() for l in fetch_lines(kv_fetch, ep)):
                raw[int(seq)] = hexdata
            last = max(raw)
            for _ in deadline_loop("rank %d's subscriber to reach batch %d" % (rank, last)):
                if any(l.startswith("%d " % last) for l in list(subs[rank].lines)):
                    break
            live = list(subs[rank].lines)
            if "BAD" in live:
                fail("rank %d: a PUB message not [topic, seq, payload]" % rank)
            seqs = [int(l.split()[0]) for l in live]
            if seqs != list(range(seqs[0], last + 1)):
                fail("rank %d: live sequence numbers %s..." % (rank, seqs[:5]))
            for l in live:
                seq, hexdata = l.split()
                if raw.get(int(seq)) != hexdata:
                    fail("rank %d: live batch %s differs from its replay" % (rank, seq))
            print("kv_events rank %d: %d live batches (%d..%d) equal the replayed ones"
                  % (rank, len(live), seqs[0], last))
            print("kv_events rank %d: %d batches, %d stored, %d removed, %d held = cache"
                  % (rank, len(batches), stored, removed, len(held)))
    finally:
        for sub in subs:
            sub.stop()
        e.stop()


# --- bad input ----------------------------------------------------------------

def case_bad_input(engine_exe, wsel, kv_fetch, workdir):
    e = Engine(engine_exe, workdir, "bad", ["--dp", "2", "--kv-blocks", "64",
                                             "--time-scale", "5"])
    try:
        cases = [
            ("malformed JSON", "/v1/completions", b'{"prompt": [1, 2', 400),
            ("not an object", "/v1/completions", b'[1, 2, 3]', 400),
            ("wrong type", "/v1/completions", {"prompt": [1, 2], "max_tokens": "9"}, 400),
            ("no prompt", "/v1/completions", {"max_tokens": 3}, 400),
            ("empty prompt", "/v1/completions", {"prompt": [], "max_tokens": 3}, 400),
            ("token out of vocabulary", "/v1/completions", {"prompt": [32000]}, 400),
            ("max_tokens 0", "/v1/completions", {"prompt": [1, 2], "max_tokens": 0}, 400),
            ("max_tokens negative", "/v1/completions", {"prompt": [1], "max_tokens": -5},
             400),
            ("max_tokens absurd", "/v1/completions",
             {"prompt": [1, 2], "max_tokens": 10 ** 15}, 400),
            ("prompt larger than the KV cache", "/v1/completions",
             {"prompt": [7] * (64 * BLOCK + 1), "max_tokens": 1}, 400),
            ("another model", "/v1/completions", {"model": "gpt-x", "prompt": [1]}, 404),
            ("unknown fields", "/v1/completions",
             {"prompt": [1, 2, 3], "max_tokens": 2, "frobnicate": {"a": [1]}}, 200),
            ("chat without messages", "/v1/chat/completions", {"max_tokens": 2}, 400),
            ("chat", "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}, 200),
        ]
        for name, path, body, want in cases:
            status, data = e.post(path, body)
            if status != want:
                fail("%s: status %d, expected %d: %s" % (name, status, want, data[:200]))
            if want != 200 and "error" not in json.loads(data):
                fail("%s: no error object: %s" % (name, data[:200]))
        for name, method, path, want in [("unknown path", "GET", "/v2/nothing", 404),
                                         ("GET completions", "GET", "/v1/completions", 405)]:
            status, _ = e.request(method, path)
            if status != want:
                fail("%s: status %d, expected %d" % (name, status, want))
        status, _ = e.post("/v1/completions", {"prompt": [1], "max_tokens": 1},
                           {"X-data-parallel-rank": "2"})
        if status != 400:
            fail("DP rank 2 of 2: status %d, expected 400" % status)

        # A client that leaves mid-stream: the engine stops its request.
        s = socket.create_connection(("127.0.0.1", e.port), timeout=CEILING_S)
        body = json.dumps({"prompt": [5] * 100, "max_tokens": 3000, "stream": True})
        s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                   "application/json\r\nContent-Length: %d\r\n\r\n%s"
                   % (len(body), body)).encode())
        got = b""
        while b"data: " not in got:
            chunk = s.recv(4096)
            if not chunk:
                fail("the stream ended before its first event")
            got += chunk
        s.close()
        for _ in deadline_loop("the abandoned request to stop"):
            if e.metric("vllm:num_requests_running") == 0 and \
                    e.metric("vllm:num_requests_waiting") == 0:
                break
        generated = e.metric("vllm:generation_tokens_total")
        if generated >= 3000:
            fail("the abandoned request ran to its end (%d tokens)" % generated)
        status, data = e.post("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 4})
        if status != 200 or json.loads(data)["usage"]["completion_tokens"] != 4:
            fail("the engine does not serve after a client left: %d %s" % (status, data))
        print("bad_input: %d cases with vLLM's status; a client leaving mid-stream "
              "stopped its request after %d of 3000 tokens" % (len(cases) + 3, generated))
    finally:
        e.stop()


def case_concurrent(engine_exe, wsel, kv_fetch, workdir):
    n = 1000
    trace = os.path.join(workdir, "concurrent_trace.jsonl")
    with open(trace, "w") as f:
        for i in range(n):
            f.write(json.dumps({"timestamp": 0, "input_length": 300, "output_length": 4,
                                "hash_ids": [i % 7]}) + "\n")
    e = Engine(engine_exe, workdir, "conc", ["--dp", "4", "--time-scale", "100",
                                              "--quiet"])
    try:
        out = os.path.join(workdir, "concurrent_requests.jsonl")
        p = subprocess.run([wsel, "replay", "--url", e.url, "--trace", trace,
                            "--concurrency", str(n), "--no-progress", "--timeout",
                            str(CEILING_S * 2), "--requests-out", out],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=CEILING_S * 4)
        print(p.stdout.decode())
        rows = [json.loads(l) for l in open(out)]
        bad = [r for r in rows if r["status"] != 200 or r["completion_tokens"] != 4]
        if p.returncode != 0 or len(rows) != n or bad:
            fail("%d of %d requests failed, e.g. %r" % (len(bad), len(rows), bad[:1]))
        status, _ = e.get("/health")
        if status != 200:
            fail("/health %d after the burst" % status)
        print("concurrent: %d streamed requests at once, all 200" % n)
    finally:
        e.stop()


def case_replay_errors(engine_exe, wsel, kv_fetch, workdir):
    """Targets that refuse or refuse requests are counted, never fatal."""
    trace = os.path.join(workdir, "errors_trace.jsonl")
    with open(trace, "w") as f:
        for i in range(10):  # every other request is larger than the cache
            isl = 300 if i % 2 == 0 else 5000
            f.write(json.dumps({"timestamp": i, "input_length": isl, "output_length": 2,
                                "hash_ids": list(range((isl + 511) // 512))}) + "\n")
    refuser = refusing_socket()
    closed = "http://127.0.0.1:%d" % refuser.getsockname()[1]
    e = Engine(engine_exe, workdir, "errors", ["--kv-blocks", "64", "--time-scale", "100",
                                                "--quiet"])
    try:
        out = os.path.join(workdir, "errors_requests.jsonl")
        p = subprocess.run([wsel, "replay", "--url", e.url, "--url", closed, "--trace",
                            trace, "--no-progress", "--timeout", str(CEILING_S),
                            "--requests-out", out],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=CEILING_S * 2)
        text = p.stdout.decode()
        print(text)
        rows = {r["index"]: r for r in map(json.loads, open(out))}
        for i in range(10):
            want = 0 if i % 2 else 200  # odd ones go to the closed port
            if rows[i]["status"] != want:
                fail("request %d: status %d, expected %d" % (i, rows[i]["status"], want))
        if p.returncode != 0 or "errors by status: no-answer:5" not in text:
            fail("wsel replay should count 5 unanswered requests and exit 0")
        p = subprocess.run([wsel, "replay", "--url", e.url, "--trace", trace,
                            "--no-progress", "--requests-out", out],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=CEILING_S * 2)
        text = p.stdout.decode()
        print(text)
        if p.returncode != 0 or "errors by status: 400:5" not in text:
            fail("wsel replay should count 5 requests answered 400 and exit 0")
        bad = os.path.join(workdir, "bad_trace.jsonl")
        with open(bad, "w") as f:
            f.write('{"timestamp": 0, "input_length": 10, "output_length": 1, '
                    '"hash_ids": [1]}\n{"timestamp": 1, "input_length": 10}\n')
        p = subprocess.run([wsel, "replay", "--url", e.url, "--trace", bad,
                            "--no-progress"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=CEILING_S * 2)
        text = p.stdout.decode()
        if p.returncode != 1 or "bad_trace.jsonl:2:" not in text:
            fail("a bad trace line should be named (file:line), exit 1: %s" % text)
        print("replay_errors: refused and 400 counted by status; bad line named")
    finally:
        e.stop()
        refuser.close()


def case_router_endpoints(engine_exe, wsel, kv_fetch, workdir):
    """What SMG and vllm-router probe before they accept a worker (compat.h)."""
    e = Engine(engine_exe, workdir, "compat", ["--dp", "2", "--block-size", "32",
                                                "--model", "m1", "--time-scale", "5"])
    try:
        for path in ["/version", "/get_model_info", "/get_server_info", "/health_generate"]:
            status, data = e.request("GET", path)
            if status != 200:
                fail("GET %s: status %d: %s" % (path, status, data[:200]))
        if "version" not in e.get_json("/version"):
            fail("/version has no version")
        if e.get_json("/get_model_info")["model_path"] != "m1":
            fail("/get_model_info does not name the model")
        info = e.get_json("/get_server_info")
        if (info["dp_size"], info["page_size"], info["served_model_name"]) != (2, 32, "m1"):
            fail("/get_server_info: %s" % info)
        for body, want in [({"prompt": "5 17 5"}, [5, 17, 5]),
                           ({"model": "m1", "prompt": [3, 1, 4, 1]}, [3, 1, 4, 1])]:
            status, data = e.post("/tokenize", body)
            got = json.loads(data) if status == 200 else {}
            if got.get("tokens") != want or got.get("count") != len(want):
                fail("/tokenize %s: %d %s" % (body, status, data[:200]))
        status, data = e.post("/tokenize", {"messages": [{"role": "user", "content": "hi"}]})
        if status != 200 or json.loads(data)["count"] < 1:
            fail("/tokenize of a chat: %d %s" % (status, data[:200]))
        for name, method, path, body, want in [
                ("a bad body", "POST", "/tokenize", b'{"prompt": [1,', 400),
                ("another model", "POST", "/tokenize", {"model": "x", "prompt": [1]}, 404),
                ("GET /tokenize", "GET", "/tokenize", None, 405),
                ("POST /version", "POST", "/version", {}, 405)]:
            status, _ = e.post(path, body) if method == "POST" else e.request(method, path)
            if status != want:
                fail("%s: status %d, expected %d" % (name, status, want))
        print("router_endpoints: /version, /get_model_info, /get_server_info, "
              "/health_generate, /tokenize answer as vLLM and SGLang do")
    finally:
        e.stop()


def case_replay_text(engine_exe, wsel, kv_fetch, workdir):
    """wsel replay --prompt text sends the same tokens as the default form:
    the same prompt and cached token counts, request by request, on two
    fresh engines."""
    trace = os.path.join(workdir, "trace.jsonl")
    make_trace(trace, 12, seed=7)
    got = {}
    for form in ("tokens", "text"):
        e = Engine(engine_exe, workdir, form, ["--time-scale", "50"])
        try:
            out = os.path.join(workdir, form + ".jsonl")
            p = subprocess.run([wsel, "replay", "--url", e.url, "--trace", trace,
                                "--prompt", form, "--model", "wsel-engine", "--concurrency", "1",
                                "--no-progress", "--requests-out", out],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                fail("replay --prompt %s: %s" % (form, p.stdout[-500:]))
            with open(out) as f:
                rows = sorted((json.loads(line) for line in f if line.strip()),
                              key=lambda r: r["index"])
            got[form] = [(r["ok"], r["isl"], r["prompt_tokens"], r["cached_tokens"])
                         for r in rows]
        finally:
            e.stop()
    if got["text"] != got["tokens"] or not all(r[0] and r[1] == r[2] for r in got["text"]):
        fail("text and token prompts differ: %s / %s" % (got["text"], got["tokens"]))
    print("replay_text: %d requests, the same prompt and cached tokens in both forms "
          "(%d cached)" % (len(got["text"]), sum(r[3] for r in got["text"])))


def case_kv_batch_array(engine_exe, wsel, kv_fetch, workdir):
    """--kv-events-batch array: each batch is [ts, events, rank], its
    events the same maps (the form vllm-router 0.1.17 decodes)."""
    e = Engine(engine_exe, workdir, "kvarray", ["--dp", "2", "--time-scale", "50", "--quiet",
                                                 "--kv-events", "tcp://127.0.0.1:0",
                                                 "--kv-events-replay", "tcp://127.0.0.1:0",
                                                 "--kv-events-batch", "array"])
    try:
        status, _ = e.post("/v1/completions", {"prompt": [9] * (2 * BLOCK + 1), "max_tokens": 1},
                           {"X-data-parallel-rank": "1"})
        if status != 200:
            fail("request: status %d" % status)
        for _ in deadline_loop("rank 1's first batch"):
            batches = fetch_batches(kv_fetch, e.lines[("kv_events_replay", "1")])
            if batches:
                break
        for _, b in batches:
            if not (isinstance(b, list) and len(b) == 3 and isinstance(b[0], float)
                    and b[2] == 1 and all(isinstance(ev, dict) for ev in b[1])):
                fail("not [ts, events, rank]: %r" % (b,))
        stored = [ev for _, b in batches for ev in b[1] if ev["type"] == "BlockStored"]
        if sum(len(ev["block_hashes"]) for ev in stored) != 2:
            fail("expected 2 stored blocks: %r" % (stored,))
        print("kv_batch_array: %d batches as [ts, events, rank]" % len(batches))
    finally:
        e.stop()


def case_replay_failover(engine_exe, wsel, kv_fetch, workdir):
    """A refused connection is retried on the next URL and counted."""
    trace = os.path.join(workdir, "failover_trace.jsonl")
    with open(trace, "w") as f:
        for i in range(10):
            f.write(json.dumps({"timestamp": i, "input_length": 300, "output_length": 2,
                                "hash_ids": [i]}) + "\n")
    refuser = refusing_socket()
    closed = "http://127.0.0.1:%d" % refuser.getsockname()[1]
    e = Engine(engine_exe, workdir, "failover", ["--dp", "2", "--time-scale", "100",
                                                  "--quiet"])
    try:
        c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=CEILING_S)
        c.request("POST", "/v1/completions", json.dumps({"prompt": [1, 2], "max_tokens": 1}),
                  {"Content-Type": "application/json", "X-data-parallel-rank": "1"})
        r = c.getresponse()
        r.read()
        c.close()
        want = "127.0.0.1:%d/1" % e.port
        if r.status != 200 or r.getheader("X-wsel-served-by") != want:
            fail("X-wsel-served-by: %r, expected %r" % (r.getheader("X-wsel-served-by"), want))
        out = os.path.join(workdir, "failover_requests.jsonl")
        p = subprocess.run([wsel, "replay", "--url", e.url, "--url", closed, "--trace",
                            trace, "--failover", "--no-progress", "--json",
                            "--timeout", str(CEILING_S), "--requests-out", out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=CEILING_S * 2)
        doc = json.loads(p.stdout)
        rows = [json.loads(l) for l in open(out)]
        lost = doc["results"][0]["lost_requests"]
        retries = sum(r["retries"] for r in rows)
        if p.returncode != 0 or lost != 0 or doc["replay"]["retries"] != 5 or retries != 5:
            fail("--failover: %d lost, %d retries (expected 0 and 5): %s" % (
                lost, doc["replay"]["retries"], p.stderr.decode()))
        if any(r["url"] != 0 or not r["ok"] for r in rows):
            fail("every request should end 200 on URL 0")
        print("replay_failover: 5 refused requests retried on the next URL, none lost; "
              "X-wsel-served-by names the rank")
    finally:
        e.stop()
        refuser.close()


def main():
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    case, engine_exe, wsel, kv_fetch, workdir = sys.argv[1:]
    os.makedirs(workdir, exist_ok=True)
    {"usage": case_usage, "kv_events": case_kv_events, "bad_input": case_bad_input,
     "concurrent": case_concurrent, "replay_errors": case_replay_errors,
     "router_endpoints": case_router_endpoints, "replay_text": case_replay_text,
     "kv_batch_array": case_kv_batch_array,
     "replay_failover": case_replay_failover}[case](engine_exe, wsel, kv_fetch, workdir)
    print("PASS " + case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
