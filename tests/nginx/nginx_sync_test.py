#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_sync_test.py -- two nginx instances sharing their load over a real
nats-server with wsel_sync (issue 28).

usage: nginx_sync_test.py CASE NGINX MODULE WSEL_ENGINE WSEL PLUGINS FIXTURES WORKDIR

Case `replicas`: a nats-server on a free loopback port, two wsel-engines
(at a fifth of real time, so the held requests outlast the case),
instance A (`worker_processes 2`, reuseport) and instance B (1 worker),
both `wsel_sync nats://... period=200 lease=3`. Short traffic through B
runs throughout and must see 0 failures.
  1. 8 long requests held through A: B's status counts A's two workers
     live and the 8 requests as the others' load on its ranks;
  2. nats-server killed: B says disconnected and routes (local-only
     routes counted); restarted on the same port: B reconnects and sees
     the 8 again;
  3. A killed (SIGKILL, master and workers: no goodbye): A's load leaves
     B's view within the lease bound (lease + period), printed.
Exits 77 (CTest's skip) when nats-server is missing. Waits for conditions
under deadlines, never for a fixed time.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, os.pardir, "support"))
from engines import (Engine, deadline_loop, fail, start_process,  # noqa: E402
                     stop_process, unused_port)
from nginx_test import Nginx, Traffic, complete, wait_policy  # noqa: E402
from nginx_workers_test import HELD, alive, hold  # noqa: E402

SKIP = 77
PERIOD_MS = 200
LEASE = 3


def find_nats_server():
    for p in (os.environ.get("WSEL_NATS_SERVER"), "/usr/sbin/nats-server",
              "/usr/bin/nats-server", "/usr/local/bin/nats-server",
              shutil.which("nats-server")):
        if p and os.access(p, os.X_OK):
            return p
    return None


class Nats:
    def __init__(self, binary, workdir):
        self.binary = binary
        self.port = unused_port()
        self.log = open(os.path.join(workdir, "nats-server.log"), "a")
        self.proc = None

    def start(self):
        self.proc = start_process([self.binary, "-a", "127.0.0.1", "-p", str(self.port)],
                                  stdout=self.log, stderr=subprocess.STDOUT)

    def kill(self):
        if self.proc:
            stop_process(self.proc, kill=True)
            self.proc = None


def children(pid):
    """The pids of PID's children (nginx's workers)."""
    out = []
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as f:
            out += [int(x) for x in f.read().split()]
    return out


def others(status):
    """The requests in flight the other replicas add to B's ranks."""
    return sum(r["others_active_requests"] for r in status["ranks"])


def wait_b(b, what, cond):
    for _ in deadline_loop(what):
        b.check_running()
        s = b.get_status()
        if cond(s):
            return s


def instance(args, name, engines, url, workers):
    nginx, module = args[0], args[1]
    ng = Nginx(nginx, module, os.path.join(args[6], name), engines)
    ng.write_conf(os.path.join(args[4], "softmax.so"), workers=workers,
                  listen_opts=" reuseport",
                  extra_upstream=["wsel_sync %s period=%d lease=%d" % (url, PERIOD_MS, LEASE)])
    ng.start()
    wait_policy(ng, "softmax")
    return ng


def case_replicas(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    binary = find_nats_server()
    if not binary:
        print("nginx_sync_test: nats-server not found (Debian package nats-server, "
              "or WSEL_NATS_SERVER): skipped")
        sys.exit(SKIP)
    os.makedirs(workdir, exist_ok=True)
    nats = Nats(binary, workdir)
    nats.start()
    url = "nats://127.0.0.1:%d" % nats.port
    engines = [Engine(engine, workdir, "engine%d" % i,
                      ["--dp", "2", "--time-scale", "0.2", "--kv-blocks", "4096",
                       "--quiet", "--kv-events", "tcp://127.0.0.1:0"]) for i in range(2)]
    a = b = traffic = None
    conns = []
    try:
        a = instance(args, "a", engines, url, 2)  # the same engines: B
        b = instance(args, "b", engines, url, 1)  # leaves them to A's stop
        traffic = Traffic(b.port, 2, 2, 11)
        traffic.wait_for(5, "traffic through B")

        conns = [hold(a.port, i) for i in range(HELD)]
        s = wait_b(b, "B to see A's %d held requests" % HELD,
                   lambda s: s["sync_connected"] == 1 and others(s) == HELD
                   and s["sync_replicas_live"] == 2)
        print("B (replica %x) sees A's 2 workers and their %d requests"
              % (s["sync_replica_id"], HELD))

        nats.kill()
        s = wait_b(b, "B disconnected", lambda s: s["sync_connected"] == 0)
        base = s["sync_local_only_routes"]
        for _ in range(4):
            for port in (a.port, b.port):
                st, body = complete(port, list(range(128)))
                if st != 200:
                    fail("a request while NATS is down: %d %s" % (st, body[:200]))
        s = wait_b(b, "B's local-only routes", lambda s: s["sync_local_only_routes"] > base)
        nats.start()
        s = wait_b(b, "B reconnected and converged",
                   lambda s: s["sync_connected"] == 1 and s["sync_reconnects"] >= 1
                   and others(s) == len(alive(conns)))
        print("NATS killed and restarted: B routed %d requests locally, reconnected, "
              "sees %d again" % (s["sync_local_only_routes"], others(s)))

        held = len(alive(conns))
        if held == 0 or others(b.get_status()) != held:
            fail("A's held requests before the kill: %d, B sees %d"
                 % (held, others(b.get_status())))
        pids = children(a.proc.pid) + [a.proc.pid]
        for p in pids:
            os.kill(p, signal.SIGKILL)
        killed = time.monotonic()
        a.proc.wait()
        a.proc = None
        s = wait_b(b, "A's load gone from B", lambda s: others(s) == 0)
        gone_ms = (time.monotonic() - killed) * 1000
        bound_ms = (LEASE + 1) * PERIOD_MS
        if gone_ms > 2 * bound_ms + 1000:
            fail("A's load left B after %.0f ms (bound %d ms)" % (gone_ms, bound_ms))
        print("A killed without a goodbye with %d requests in flight: its load left "
              "B's view after %.0f ms (lease + period %d ms); expired %d"
              % (held, gone_ms, bound_ms, s["sync_replicas_expired"]))
        traffic.wait_for(traffic.done() + 5, "traffic after the kill")
        traffic.stop()
        if traffic.failures:
            fail("requests through B failed: %r" % traffic.failures[:3])
        print("%d requests through B, 0 failed" % traffic.ok)
        traffic = None
    finally:
        if traffic:
            traffic.stop()
        for c in conns:
            c.close()
        if b:
            b.engines = []
            b.stop()
        if a:
            if a.proc and a.proc.poll() is not None:
                a.proc = None
            a.stop()
        else:
            for e in engines:
                e.stop()
        nats.kill()


def main():
    cases = {"replicas": case_replicas}
    if len(sys.argv) != 9 or sys.argv[1] not in cases:
        print(__doc__)
        sys.exit(2)
    cases[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
