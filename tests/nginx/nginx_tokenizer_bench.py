#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_tokenizer_bench.py -- what wsel_tokenizer costs inside nginx (by hand).

usage: nginx_tokenizer_bench.py NGINX MODULE WSEL_ENGINE PLUGINS WORKDIR MODEL_DIR [N]

Two wsel-engines (--tokenizer MODEL_DIR) behind nginx with
`wsel_tokenizer MODEL_DIR pool=wsel_tok large_pool=wsel_big;` (`thread_pool
wsel_tok threads=2; thread_pool wsel_big threads=1;`: prompts of 64 KiB or
more, about 16k tokens, tokenize at the lowest priority, SCHED_IDLE).
Each figure is the module's own route time of a request (status
route_time_ns_sum, one request at a time; body read to route, tokenizing in
the pool included), N requests per row (default 50):

  text     p50/p99 and tokens/s of /v1/completions text prompts of about
           2k, 8k and 32k tokens, and of the same 2k prompt as token ids
  chat     a 4k-token system prompt and a short user message, with the
           prefix cache (default) and without (cache=0)
  hol      HOL_N 1k-token text requests sent one after another while
           another client keeps a 100k-token text prompt tokenizing: their
           route times against the same requests alone (samples during
           which the 100k request was routed are dropped)
"""
import json
import os
import sys
import threading

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "support"))
sys.path.insert(0, HERE)
from engines import Engine, fail, post_json  # noqa: E402
import nginx_test  # noqa: E402
from nginx_tokenizer_test import TokNginx, words  # noqa: E402


HOL_N = 1000  # the p99 of the head-of-line rows is their 10 slowest


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(ng, path, body):
    """The request's route time in ms (None if another route ended meanwhile)
    and the engine's prompt tokens."""
    b = ng.get_status()
    st, data = post_json(ng.port, path, body)
    if st != 200:
        fail("%s: %d %s" % (path, st, data[:200]))
    a = ng.get_status()
    if a["route_time_count"] - b["route_time_count"] != 1:
        return None, 0
    return ((a["route_time_ns_sum"] - b["route_time_ns_sum"]) / 1e6,
            json.loads(data)["usage"]["prompt_tokens"])


def row(ng, name, path, bodies):
    ms, toks = [], 0
    for body in bodies:
        t, n = timed(ng, path, body)
        ms.append(t)
        toks += n
    print("%-28s tokens %6d  p50 %7.3f ms  p99 %7.3f ms  tokens/s %9.0f"
          % (name, toks // len(bodies), pct(ms, 0.5), pct(ms, 0.99), toks / (sum(ms) / 1e3)))
    return ms


def start(args, model, opts):
    nginx, module, engine, plugins, workdir = args
    os.makedirs(workdir, exist_ok=True)
    engines = [Engine(engine, workdir, "engine%d" % i,
                      ["--dp", "2", "--time-scale", "1000", "--kv-blocks", "65536",
                       "--quiet", "--kv-events", "tcp://127.0.0.1:0", "--tokenizer", model,
                       "--vocab-size", "200000"])
               for i in range(2)]
    ng = TokNginx(nginx, module, workdir, engines)
    ng.tokenizer = "%s pool=wsel_tok large_pool=wsel_big %s" % (model, opts)
    ng.write_conf(os.path.join(plugins, "softmax.so"))
    with open(ng.conf) as f:
        text = f.read().replace("events {", "thread_pool wsel_tok threads=2;\nthread_pool wsel_big threads=1;\nevents {", 1)
    with open(ng.conf, "w") as f:
        f.write(text)
    ng.write_conf = lambda *a, **k: None  # keep the pool line on a port retry
    ng.start()
    return ng


def bench_text(ng, n):
    for size in (2000, 8000, 32000):
        row(ng, "text %dk" % (size // 1000), "/v1/completions",
            [{"prompt": words(100 * size + i, size), "max_tokens": 1} for i in range(n)])
    ids = []
    for i in range(n):
        st, data = ng.engines[0].post("/tokenize", {"prompt": words(100 * 2000 + i, 2000)})
        ids.append(json.loads(data)["tokens"])
    row(ng, "token ids 2k", "/v1/completions",
        [{"prompt": t, "max_tokens": 1} for t in ids])


def chat_bodies(n):
    system = {"role": "system", "content": words(9, 4000)}
    return [{"messages": [system, {"role": "user", "content": words(10 + i, 50)}],
             "max_tokens": 1} for i in range(n)]


def bench_hol(ng):
    small = [{"prompt": words(7000 + i, 1000), "max_tokens": 1} for i in range(HOL_N)]
    alone = [t for t in (timed(ng, "/v1/completions", b)[0] for b in small) if t]
    stop = threading.Event()
    big = json.dumps({"prompt": words(424242, 100000), "max_tokens": 1})

    def hog():
        while not stop.is_set():
            post_json(ng.port, "/v1/completions", big)

    th = threading.Thread(target=hog)
    th.start()
    try:
        busy = [t for t in (timed(ng, "/v1/completions", b)[0] for b in small) if t]
    finally:
        stop.set()
        th.join()
    print("1k text alone (%d)          p50 %7.3f ms  p99 %7.3f ms"
          % (len(alone), pct(alone, 0.5), pct(alone, 0.99)))
    print("1k text beside 100k (%d)    p50 %7.3f ms  p99 %7.3f ms  delay p99 %.3f ms"
          % (len(busy), pct(busy, 0.5), pct(busy, 0.99), pct(busy, 0.99) - pct(alone, 0.99)))


def main():
    if len(sys.argv) not in (7, 8):
        fail(__doc__)
    args, model = sys.argv[1:6], sys.argv[6]
    n = int(sys.argv[7]) if len(sys.argv) == 8 else 50
    ng = start(args, model, "")
    try:
        bench_text(ng, n)
        row(ng, "chat 4k system, cache", "/v1/chat/completions", chat_bodies(n))
        bench_hol(ng)
    finally:
        ng.stop()
    ng = start(args, model, "cache=0")
    try:
        row(ng, "chat 4k system, cache=0", "/v1/chat/completions", chat_bodies(n))
    finally:
        ng.stop()


if __name__ == "__main__":
    main()
