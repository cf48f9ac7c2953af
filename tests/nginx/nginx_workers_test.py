#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_workers_test.py -- nginx with two worker processes routing as one
router (issue 28).

usage: nginx_workers_test.py CASE NGINX MODULE WSEL_ENGINE WSEL PLUGINS FIXTURES WORKDIR

nginx runs `worker_processes 2` with `listen ... reuseport` (the kernel
spreads connections over both workers) in front of two wsel-engines.

Cases:
  shared    requests are routed by both workers (each one's status shows
            routes); 8 long requests held open: every status answer, from
            either worker, counts all 8 in flight (the per-rank sums);
            once they are closed, every rank's in-flight is 0 in both
            workers' answers; an admin switch answered by one worker is
            the other's policy too (its status says so)
  kill      8 long requests held open and short traffic; one worker is
            killed (SIGKILL): its held requests die with it, and both the
            surviving and the respawned worker count only the survivors in
            flight, then 0 once those are closed (no phantom load)
  history   wsel_kv_source history under two clients' traffic: both workers
            route, and both indexes end up holding the same blocks per rank
            (each applied the other's routes: history_applied), none lost
  totals    the counters are the upstream's: under traffic every answer,
            from either worker, reports routes that never go back; once
            quiet both report every request routed, the ranks' routed
            summing to it; after a reload (the old workers' counts kept) and
            after a worker killed with SIGKILL (its published counts kept)

Waits for conditions under generous ceilings, never for a fixed time.
"""
import json
import os
import signal
import socket
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, os.pardir, "support"))
from engines import BLOCK, CEILING_S, deadline_loop, fail  # noqa: E402
from nginx_test import Traffic, complete, start_all, wait_exit, wait_policy  # noqa: E402

HELD = 8


def hold(port, i):
    """A connection with a long completion in flight (closed by the test)."""
    body = json.dumps({"prompt": list(range(i * 100, i * 100 + 2 * BLOCK)),
                       "max_tokens": 4000}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=CEILING_S)
    s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % len(body)).encode() + body)
    s.setblocking(False)
    return s


def alive(conns):
    """The held connections nginx has not closed (what they have received,
    the response's head, is read and dropped); their responses are long,
    so one not closed is in flight."""
    left = []
    for c in conns:
        try:
            while c.recv(65536):
                pass
        except BlockingIOError:
            left.append(c)
        except OSError:
            pass
    return left


def statuses(ng, what, pids=None):
    """One status answer per worker (new connections until both answered):
    {pid: status}; only PIDS when given."""
    seen = {}
    for _ in deadline_loop("both workers' status (%s)" % what):
        ng.check_running()
        s = ng.get_status()
        if pids is None or s["worker_pid"] in pids:
            seen[s["worker_pid"]] = s
        if len(seen) >= 2:
            return seen


def wait_in_flight(ng, n, what):
    """Until both workers' answers count n requests in flight, per rank
    summed and in total."""
    for _ in deadline_loop(what):
        seen = statuses(ng, what)
        if all(s["active_requests"] == n and s["workers"] == 2
               and sum(r["active_requests"] for r in s["ranks"]) == n
               for s in seen.values()):
            return seen


def start(args, policy, kv_source="events"):
    ng = start_all(args, time_scale=1)
    ng.write_conf(policy, workers=2, listen_opts=" reuseport", kv_source=kv_source)
    ng.start()
    wait_policy(ng, os.path.basename(policy)[:-3])
    return ng


def case_shared(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    ng = start(args, os.path.join(plugins, "softmax.so"))
    conns = []
    try:
        for _ in deadline_loop("both workers to route"):
            st, _ = complete(ng.port, list(range(3 * BLOCK)))
            if st != 200:
                fail("a request: %d" % st)
            seen = statuses(ng, "routes")
            if all(s["worker_routes"] > 0 for s in seen.values()):
                break
        conns = [hold(ng.port, i) for i in range(HELD)]
        seen = wait_in_flight(ng, HELD, "%d held requests counted by both" % HELD)
        for c in conns:
            c.close()
        conns = []
        wait_in_flight(ng, 0, "0 in flight on every rank after the close")
        st, ans = ng.admin(os.path.join(plugins, "p2c.so"))
        if st != 200 or ans["policy"] != "p2c":
            fail("admin switch: %d %r" % (st, ans))
        for _ in deadline_loop("the other worker to take the switch"):
            both = statuses(ng, "p2c")
            if all(s["policy"] == "p2c" for s in both.values()):
                break
        other = [s for p, s in both.items() if p != ans["worker_pid"]][0]
        # the counters are the upstream's: one admin switch, one follower
        for _ in deadline_loop("both answers to count the switch and its follower"):
            both = statuses(ng, "switch counters")
            if all(s["shared_switches"] == 1 and s["admin_switches"] == 1
                   for s in both.values()):
                break
        st, _ = complete(ng.port, list(range(3 * BLOCK)))
        print("shared: workers %s both routed; %d held requests counted by both; "
              "0 in flight after; an admin switch on %d reached %d"
              % (sorted(seen), HELD, ans["worker_pid"], other["worker_pid"]))
    finally:
        for c in conns:
            c.close()
        ng.stop()


def case_kill(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    ng = start(args, os.path.join(plugins, "softmax.so"))
    conns = []
    traffic = None
    try:
        conns = [hold(ng.port, i) for i in range(HELD)]
        seen = wait_in_flight(ng, HELD, "%d held requests counted" % HELD)
        traffic = Traffic(ng.port, 2, 2, 7)
        traffic.wait_for(10, "traffic before the kill")
        victim = sorted(seen)[0]
        survivor = sorted(seen)[1]
        os.kill(victim, signal.SIGKILL)
        traffic.wait_for(traffic.done() + 10, "traffic after the kill",
                         lambda started, err: True)
        traffic.stop()
        traffic = None
        # the victim's connections close with it: the ones left are the
        # survivor's, and no answer may count more
        for _ in deadline_loop("the survivor's count without the dead share"):
            both = statuses(ng, "after the kill")
            left = alive(conns)
            if all(s["active_requests"] == len(left) for s in both.values()):
                break
        if survivor not in both:
            fail("the surviving worker %d did not answer: %r" % (survivor, sorted(both)))
        n_left = len(left)
        for c in conns:
            c.close()
        conns = []
        wait_in_flight(ng, 0, "0 in flight after the kill and the close")
        print("kill: worker %d killed with %d of %d held requests; the survivor %d and "
              "the respawned worker counted %d, then 0" % (victim, HELD - n_left, HELD,
                                                            survivor, n_left))
    finally:
        if traffic:
            traffic.stop()
        for c in conns:
            c.close()
        ng.stop()


def case_history(args):
    ng = start(args, os.path.join(args[4], "softmax.so"), kv_source="history")
    traffic = None
    try:
        traffic = Traffic(ng.port, 2, 2, 11)
        for _ in deadline_loop("both workers to route"):
            traffic.wait_for(traffic.done() + 4, "traffic")
            if all(s["worker_routes"] > 0 for s in statuses(ng, "routes").values()):
                break
        traffic.stop()
        traffic = None
        for _ in deadline_loop("both indexes to hold the same blocks per rank"):
            both = statuses(ng, "indexes")
            cached = [[r["cached_blocks"] for r in s["ranks"]] for s in both.values()]
            if cached[0] == cached[1] and sum(cached[0]) > 0:
                break
        s = list(both.values())[0]
        if s["history_applied"] == 0 or s["history_lost"] != 0:
            fail("history: applied %d, lost %d" % (s["history_applied"], s["history_lost"]))
        print("history: %d routes by both workers; both indexes hold %r blocks per rank; "
              "%d records applied across, 0 lost"
              % (s["routes"], cached[0], s["history_applied"]))
    finally:
        if traffic:
            traffic.stop()
        ng.stop()


def wait_routes(ng, n, what, seen):
    """Until both workers' answers report n routes and requests, the ranks'
    routed summing to n; every routes value read is appended to seen."""
    for _ in deadline_loop(what):
        both = statuses(ng, what)
        seen.extend(s["routes"] for s in both.values())
        if all(s["routes"] == n and s["requests"] == n
               and sum(r["routed"] for r in s["ranks"]) == n for s in both.values()):
            return both


def monotonic(seen, what):
    if any(b < a for a, b in zip(seen, seen[1:])):
        fail("%s: routes went back: %r" % (what, seen))


def run_traffic(ng, n, seed, seen):
    """n more requests from two clients, every status answer read meanwhile
    kept in seen; returns how many were answered."""
    traffic = Traffic(ng.port, 2, 2, seed)
    try:
        while traffic.done() < n:
            seen.extend(s["routes"] for s in statuses(ng, "under traffic").values())
        traffic.wait_for(n, "traffic")
    finally:
        traffic.stop()
    return traffic.done()


def case_totals(args):
    ng = start(args, os.path.join(args[4], "softmax.so"))
    seen = []
    try:
        total = run_traffic(ng, 30, 3, seen)
        wait_routes(ng, total, "%d routes in both answers" % total, seen)
        monotonic(seen, "under traffic")
        old = set(statuses(ng, "before the reload"))
        ng.reload()
        for _ in deadline_loop("the reload's new workers"):
            both = statuses(ng, "after the reload")
            seen.extend(s["routes"] for s in both.values())
            if not old & set(both):
                break
        for pid in old:
            wait_exit(pid, "the old workers to exit")
        wait_routes(ng, total, "the old workers' routes kept after the reload", seen)
        total += run_traffic(ng, 30, 5, seen)
        both = wait_routes(ng, total, "%d routes after the reload" % total, seen)
        victim = sorted(both)[0]
        os.kill(victim, signal.SIGKILL)
        for _ in deadline_loop("the respawned worker"):
            both = statuses(ng, "after the kill")
            seen.extend(s["routes"] for s in both.values())
            if victim not in both:
                break
        wait_routes(ng, total, "the killed worker's routes kept", seen)
        monotonic(seen, "through the reload and the kill")
        print("totals: %d routes, summed by both workers through traffic, a reload and "
              "a SIGKILL; %d answers read, routes never went back" % (total, len(seen)))
    finally:
        ng.stop()


def main():
    cases = {"shared": case_shared, "kill": case_kill, "history": case_history,
             "totals": case_totals}
    if len(sys.argv) != 9 or sys.argv[1] not in cases:
        print(__doc__)
        sys.exit(2)
    cases[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
