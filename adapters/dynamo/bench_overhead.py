# SPDX-License-Identifier: Apache-2.0
"""bench_overhead.py [REQUESTS] -- what routing through wsel-dynamo costs.

With WSEL_PLUGIN_DIR set (an installed plugin folder) and ai-dynamo
importable, it starts Dynamo's mocker engines (2 workers x 2 DP ranks, no
simulated model time: --speedup-ratio 0), wsel-dynamo with softmax, and two
frontends on loopback: one routing through the adapter, one with Dynamo's
own KV router straight to the same engines. It sends REQUESTS [300]
sequential completions (one token, 64-token prompts, each block unique)
through each and prints the client's latency p50 / p99 for both, and the
adapter's own per-request split: Dynamo's two KvRouter queries against the
wsel part (rank states, table, select through the binding).
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests"))
from conftest import MODEL, Deployment, http, unused_port  # noqa: E402


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def timed(port, n, first):
    out = []
    for i in range(n):
        prompt = [first + i] + [(first + i * 64 + t) % 30000 + 2 for t in range(63)]
        t0 = time.perf_counter_ns()
        http(port, "/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 1})
        out.append((time.perf_counter_ns() - t0) / 1000.0)
    return out


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    plugins = os.environ["WSEL_PLUGIN_DIR"]
    with tempfile.TemporaryDirectory() as work:
        d = Deployment(work, plugins)
        try:
            d.start_all(os.path.join(plugins, "softmax.so"), '{"temperature": 0}', speedup="0")
            d.wait_ready(list(range(1000, 1032)))
            kv_port = unused_port()
            d.start("frontend-kv", ["-m", "dynamo.frontend", "--http-host", "127.0.0.1",
                                    "--http-port", str(kv_port), "--router-mode", "kv",
                                    "--namespace", "pool", "--kv-cache-block-size", "16"])
            for _ in range(600):
                try:
                    http(kv_port, "/v1/completions", {"model": MODEL, "prompt": [3] * 20,
                                                     "max_tokens": 1})
                    break
                except OSError:
                    time.sleep(0.1)
            timed(d.frontend_port, 20, 20000)  # warm both
            timed(kv_port, 20, 21000)
            via = timed(d.frontend_port, n, 100)
            kv = timed(kv_port, n, 100 + n)
            st = d.control("status", {})
        finally:
            d.stop()
    print(f"{n} sequential requests, client latency p50 / p99 (us):")
    print(f"  frontend -> wsel-dynamo -> engines  {pct(via, .5):8.0f} / {pct(via, .99):8.0f}")
    print(f"  frontend (Dynamo KV router) -> engines {pct(kv, .5):5.0f} / {pct(kv, .99):8.0f}")
    t = st["timing_us"]
    print("inside wsel-dynamo per request, p50 / p99 (us): Dynamo's queries "
          f"{t['dynamo_queries']['p50']:.0f} / {t['dynamo_queries']['p99']:.0f}, "
          f"wsel (rank states + table + select) {t['wsel']['p50']:.1f} / {t['wsel']['p99']:.1f}")


if __name__ == "__main__":
    main()
