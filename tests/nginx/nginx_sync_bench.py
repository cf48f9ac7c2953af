#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_sync_bench.py -- what wsel_sync costs a request in nginx: one
worker in front of two fast wsel-engines (--time-scale 1000), N
sequential completions (192-token prompts), without and with wsel_sync
on a local nats-server; prints latency p50/p99 at the client and the
worker process's CPU per request (its NATS threads included).

usage: nginx_sync_bench.py BUILD_DIR off|on [N]    (docs/replicas.md)
"""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, os.pardir, "support"))
from engines import Engine, start_process, stop_process, unused_port  # noqa: E402
from nginx_test import Nginx, complete  # noqa: E402
from nginx_sync_test import children, find_nats_server  # noqa: E402


def worker_cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main():
    build, mode = os.path.abspath(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    wd = os.path.join(build, "tests", "nginx", "sync_bench_" + mode)
    os.makedirs(wd, exist_ok=True)
    nats, extra = None, []
    if mode == "on":
        port = unused_port()
        nats = start_process([find_nats_server(), "-a", "127.0.0.1", "-p", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        extra = ["wsel_sync nats://127.0.0.1:%d" % port]
    engines = [Engine(os.path.join(build, "bin", "wsel-engine"), wd, "e%d" % i,
                      ["--dp", "2", "--time-scale", "1000", "--kv-blocks", "4096",
                       "--quiet", "--kv-events", "tcp://127.0.0.1:0"]) for i in range(2)]
    ng = Nginx("/usr/sbin/nginx", os.path.join(build, "nginx",
                                               "ngx_http_upstream_wsel_module.so"),
               wd, engines)
    ng.write_conf(os.path.join(build, "plugins", "softmax.so"), extra_upstream=extra)
    ng.start()
    w = children(ng.proc.pid)[0]
    prompt = [list(range(k * 100, k * 100 + 192)) for k in range(8)]
    for i in range(200):
        complete(ng.port, prompt[i % 8])
    c0, lat, t0 = worker_cpu(w), [], time.monotonic()
    for i in range(n):
        s = time.perf_counter()
        st, _ = complete(ng.port, prompt[i % 8])
        lat.append(time.perf_counter() - s)
        if st != 200:
            sys.exit("a request answered %d" % st)
    wall, c1 = time.monotonic() - t0, worker_cpu(w)
    lat.sort()
    s = ng.get_status()
    print("%s: %d requests, p50 %.0f us, p99 %.0f us, worker CPU %.1f us/request, "
          "%.0f requests/s, %.2f messages/request"
          % (mode, n, lat[n // 2] * 1e6, lat[int(n * .99)] * 1e6, (c1 - c0) / n * 1e6,
             n / wall, (s["sync_updates_sent"] + s["sync_snapshots_sent"]) / (n + 200)))
    ng.stop()
    if nats:
        stop_process(nats)


if __name__ == "__main__":
    main()
