#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_ops_test.py -- the module as an operator runs it (issue 33).

usage: nginx_ops_test.py CASE NGINX MODULE WSEL_ENGINE WSEL PLUGINS FIXTURES WORKDIR

Cases:
  reload_refused
            a running nginx (one worker, two wsel-engines, softmax) is
            reloaded with each kind of configuration the module refuses:
            a balancer (least_conn) after wsel_policy, a broken policy, a
            policy name no plugin has, a wsel_server naming no server and
            one with dp=0. Each is refused
            twice: by `nginx -s reload` (which reads the configuration
            first, says why and signals nothing) and by the master, sent
            SIGHUP directly (it logs why). Through all of them two clients send requests:
            0 fail, the master keeps its pid and the old worker keeps
            serving; then a good reload (to p2c) starts a new worker
  conf_checks
            what `nginx -t` says before anything runs: as root, a policy
            the workers' `user` (nobody) cannot read is refused with that
            user's name and the reason, one it can read passes; text
            prompts with KV events are accepted with a warning (their
            character-chunk hashes never match the engines' token-id
            events), with history they pass silently; a bundled policy
            named without a path (`wsel_policy hysteresis`) is found in
            the plugin folder beside the module, and so is one switched
            to by name at the admin location (an unknown name is refused
            with where it was looked for)
  engine_restart
            two wsel-engines (--dp 2, KV events; the first with a 64-block
            cache per rank on fixed ports) behind nginx with softmax; once
            the module's index matches the first engine's own
            /wsel/kv_blocks, that engine is killed (SIGKILL) under traffic
            and started again on the same ports, its cache empty. Each
            rank is sent requests directly (X-data-parallel-rank), one at
            a time until the index has dropped its old blocks (the
            router's socket has reconnected), then until its cache has
            turned over (what it published before that is evicted); then
            the index
            holds exactly what the engine lists for each rank: the blocks
            of the killed process were dropped when the new one's first
            batch after the disconnection broke the old numbering

Waits for conditions under generous ceilings, never for a fixed time.
"""
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True  # nothing written into the source tree
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, os.pardir, "support"))
from engines import (BLOCK, CEILING_S, Engine, deadline_loop, fail,  # noqa: E402
                     stop_process, unused_port)
from nginx_test import Nginx, complete, start_all, wait_policy  # noqa: E402


class Clients:
    """N threads sending small routed requests until stop(); each status
    other than 200 (or an exception) is a failure."""

    def __init__(self, port, n=2):
        self.port = port
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failed = []
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(n)]
        for t in self.threads:
            t.start()

    def run(self, i):
        k = 0
        while not self.done.is_set():
            k += 1
            try:
                first = (i * 7919 + k) % 30000
                st, body = complete(self.port, list(range(first, first + 2 * BLOCK)))
            except (OSError, http.client.HTTPException) as e:
                st, body = -1, str(e).encode()
            with self.lock:
                if st == 200:
                    self.ok += 1
                else:
                    self.failed.append((st, body[:200]))

    def wait_more(self, what):
        with self.lock:
            start = self.ok
        for _ in deadline_loop(what):
            with self.lock:
                if self.ok >= start + 5:
                    return

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()


def set_conf(ng, old, new):
    """The written configuration with `old` replaced by `new`."""
    with open(ng.conf) as f:
        text = f.read()
    if old not in text:
        fail("%r not in the configuration" % old)
    with open(ng.conf, "w") as f:
        f.write(text.replace(old, new))


def refuse_reload(ng, why):
    """`nginx -s reload` and SIGHUP to the master, each refused with `why`;
    the master and its worker unchanged."""
    pid = ng.get_status()["worker_pid"]
    p = subprocess.run(ng.cmd("-s", "reload"), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=CEILING_S)
    out = p.stdout.decode()
    if p.returncode == 0 or why not in out:
        fail("nginx -s reload did not refuse with %r: %s" % (why, out))
    log_before = len(ng.log())
    os.kill(ng.proc.pid, signal.SIGHUP)
    for _ in deadline_loop("the master to log %r" % why):
        ng.check_running()
        if why in ng.log()[log_before:]:
            break
    for _ in deadline_loop("the master to go back to its loop"):
        if "reconfiguring" in ng.log()[log_before:]:
            break
    ng.check_running()
    s = ng.get_status()
    if s["worker_pid"] != pid or s["policy"] != "softmax":
        fail("after a refused reload (%s): %r" % (why, s))


def case_reload_refused(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    broken = os.path.join(fixtures, "fx_no_entry.so")
    ng = start_all(args)
    clients = None
    try:
        ng.write_conf(softmax)
        ng.start()
        wait_policy(ng, "softmax")
        master = ng.proc.pid
        clients = Clients(ng.port)
        clients.wait_more("requests before the reloads")
        refusals = (
            (dict(after_policy=["least_conn"]), "another load balancing method"),
            (dict(policy=broken), "refused"),
            (dict(policy="no_such_policy"), "no plugin named"),
            (dict(extra_upstream=["wsel_server 127.0.0.1:9 dp=2"]), "names no server"),
            (dict(extra_upstream=["wsel_server %s dp=0" % ng.engines[0].addr]), "dp= outside 1..64"),
            (dict(extra_upstream=["wsel_sync http://127.0.0.1:4222"]),
             "needs a nats://HOST:PORT URL first in %s:" % ng.conf),
            (dict(extra_upstream=["wsel_sync nats://127.0.0.1:4222 lease=1"]),
             "has a bad lease= (2..100 periods) in %s:" % ng.conf),
        )
        for kw, why in refusals:
            conf = dict(policy=softmax)
            conf.update(kw)
            ng.write_conf(**conf)
            refuse_reload(ng, why)
            clients.wait_more("requests after a refused reload (%s)" % why)
        if ng.proc.pid != master or ng.proc.poll() is not None:
            fail("the master changed or exited")
        # a good reload still works
        old = ng.get_status()["worker_pid"]
        ng.write_conf(os.path.join(plugins, "p2c.so"))
        ng.reload()
        wait_policy(ng, "p2c", old)
        clients.wait_more("requests after the good reload")
        clients.stop()
        if clients.failed:
            fail("%d of %d requests failed, first %r" % (
                len(clients.failed), clients.ok + len(clients.failed), clients.failed[0]))
        print("reload_refused: %d refused configurations, each by nginx -s reload and "
              "by the master; master %d alive throughout; %d requests, 0 failed; a good "
              "reload then started a new worker" % (len(refusals), master, clients.ok))
    finally:
        if clients:
            clients.stop()
        ng.stop()


def test_conf(ng):
    p = ng.test_conf()
    return p.returncode, p.stdout.decode()


def check_worker_user(ng, softmax):
    """As root: a policy `nobody` cannot read is refused by nginx -t."""
    if os.geteuid() != 0:
        print("conf_checks: not root, the worker user's check is not run")
        return
    me = pwd.getpwuid(0).pw_name
    ok_dir = tempfile.mkdtemp(prefix="wsel-ops-")
    os.chmod(ok_dir, 0o755)
    try:
        shut = os.path.join(ok_dir, "private")
        os.mkdir(shut, 0o700)
        for d in (ok_dir, shut):
            shutil.copy(softmax, d)
        user_line = "user %s" % me
        for path, want_ok in ((os.path.join(ok_dir, "softmax.so"), True),
                              (os.path.join(shut, "softmax.so"), False)):
            ng.write_conf(path)
            with open(ng.conf) as f:
                text = f.read()
            with open(ng.conf, "w") as f:
                f.write("\n".join("user nobody nogroup;" if line.startswith(user_line) else line
                                  for line in text.split("\n")))
            rc, out = test_conf(ng)
            if want_ok and rc != 0:
                fail("a policy nobody can read refused: %s" % out)
            if not want_ok and (rc == 0 or 'as user "nobody"' not in out
                                or "Permission denied" not in out):
                fail("a policy nobody cannot read passed nginx -t: %s" % out)
        print("conf_checks: a policy the worker user cannot read is refused by nginx -t")
    finally:
        shutil.rmtree(ok_dir)


def check_text_events(ng, softmax):
    warning = "text prompts with KV events"
    for kv, want in (("events", True), ("history", False)):
        ng.write_conf(softmax, kv_source=kv)
        set_conf(ng, "wsel_prompt tokens;", "wsel_prompt text;")
        rc, out = test_conf(ng)
        if rc != 0 or (warning in out) != want or (want and "[warn]" not in out):
            fail("wsel_prompt text with %s: rc %d, warning %s expected: %s"
                 % (kv, rc, want, out))
    print("conf_checks: text prompts with KV events draw a warning at nginx -t")


def check_names(ng, plugins):
    ng.write_conf("hysteresis")
    rc, out = test_conf(ng)
    if rc != 0:
        fail("wsel_policy hysteresis: %s" % out)
    ng.start()
    s = wait_policy(ng, "hysteresis")
    if s["policy_path"] != os.path.realpath(os.path.join(plugins, "hysteresis.so")):
        fail("hysteresis resolved to %r" % s["policy_path"])
    st, ans = ng.admin("p2c")
    if st != 200 or not ans["ok"] or ans["policy"] != "p2c":
        fail("admin switch to p2c by name: %d %r" % (st, ans))
    st, ans = ng.admin("no_such_policy")
    if st != 409 or ans["policy"] != "p2c" or "no_such_policy.so" not in ans["error"]:
        fail("admin switch to an unknown name: %d %r" % (st, ans))
    st, body = complete(ng.port, list(range(3 * BLOCK)))
    if st != 200:
        fail("a request after the switches by name: %d" % st)
    print("conf_checks: bundled policies by name in wsel_policy and at the admin location")


def case_conf_checks(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    ng = start_all(args)
    try:
        check_worker_user(ng, softmax)
        check_text_events(ng, softmax)
        check_names(ng, plugins)
    finally:
        ng.stop()


RESTART_KV_BLOCKS = 64  # the restarted engine's cache per rank, turned over


def restart_engine_args(port, kv_port):
    args = ["--dp", "2", "--time-scale", "50", "--kv-blocks", str(RESTART_KV_BLOCKS),
            "--quiet", "--kv-events", "tcp://127.0.0.1:%d" % kv_port]
    return args + (["--port", str(port)] if port else [])


def free_port_pair():
    """A port P with P and P + 1 free now (rank R publishes on P + R)."""
    for _ in deadline_loop("two adjacent free ports"):
        p = unused_port()
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            pass


def engine_blocks(e, rank):
    st, data = e.get("/wsel/kv_blocks?rank=%d" % rank)
    if st != 200:
        fail("%s /wsel/kv_blocks: %d" % (e.name, st))
    return len(json.loads(data)["blocks"])


def index_blocks(ng, e, rank):
    for r in ng.get_status()["ranks"]:
        if r["server"] == e.addr and r["dp_rank"] == rank:
            return r["cached_blocks"]
    fail("no rank %d of %s in the status" % (rank, e.addr))


KV_COUNTERS = ("kv_messages", "kv_cleared", "kv_seq_gaps", "kv_blocks_stored",
               "kv_blocks_removed")


def kv_state(ng):
    st = ng.get_status()
    return ", ".join("%s %s" % (k, st.get(k)) for k in KV_COUNTERS)


def wait_index_matches(ng, e, what):
    """Until the index's blocks per rank of E equal E's own; each pair of
    counts printed as it changes, so a timeout shows where it stopped."""
    last = None
    for _ in deadline_loop(what):
        pairs = [(index_blocks(ng, e, k), engine_blocks(e, k)) for k in (0, 1)]
        if all(a == b and b > 0 for a, b in pairs):
            return pairs
        if pairs != last:
            print("(index, %s) blocks per rank: %r; %s" % (e.name, pairs, kv_state(ng)),
                  flush=True)
            last = pairs


def turn_over(e, rank, seed):
    """Requests straight to one rank until it has stored more new blocks
    than its cache holds."""
    for i in range(RESTART_KV_BLOCKS // 2 + 8):
        base = 7000 * seed + i * 2 * BLOCK  # under the vocabulary's 32000
        st, body = e.post("/v1/completions",
                          {"prompt": list(range(base, base + 2 * BLOCK)), "max_tokens": 2},
                          headers={"X-data-parallel-rank": str(rank)})
        if st != 200:
            fail("%s rank %d: %d %s" % (e.name, rank, st, body[:200]))


def learn(e, seed, done):
    """Requests straight to each rank of E in turn, one block each, until
    done() says the router receives what its sockets publish; then each
    rank's cache turned over, so that what it published before (while the
    router's sockets were connecting) is evicted from it too."""
    i = 0
    for _ in deadline_loop("%s's events to reach the index" % e.name):
        if done():
            break
        i += 1
        rank = i % 2
        base = 29000 + (20 * i + 10 * seed + rank) % 2900
        st, body = e.post("/v1/completions",
                          {"prompt": list(range(base, base + BLOCK)), "max_tokens": 1},
                          headers={"X-data-parallel-rank": str(rank)})
        if st != 200:
            fail("%s rank %d: %d %s" % (e.name, rank, st, body[:200]))
    for rank in (0, 1):
        turn_over(e, rank, seed + rank)


def kv_cleared(ng):
    return ng.get_status()["kv_cleared"]


def case_engine_restart(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    os.makedirs(workdir, exist_ok=True)
    kv_port = free_port_pair()
    first = Engine(engine, workdir, "engine0", restart_engine_args(0, kv_port))
    other = Engine(engine, workdir, "engine1",
                   ["--dp", "2", "--time-scale", "50", "--kv-blocks", "4096", "--quiet",
                    "--kv-events", "tcp://127.0.0.1:0"])
    ng = Nginx(nginx, module, workdir, [first, other])
    clients = None
    try:
        ng.write_conf(os.path.join(plugins, "softmax.so"),
                      next_upstream="error timeout non_idempotent")
        ng.start()
        wait_policy(ng, "softmax")
        learn(first, 0, lambda: all(index_blocks(ng, first, k) > 0 for k in (0, 1)))
        before = wait_index_matches(ng, first, "the index to match engine0 at first")
        clients = Clients(ng.port)
        clients.wait_more("requests before the restart")
        cleared = kv_cleared(ng)
        stop_process(first.proc, kill=True)
        again = Engine(engine, workdir, "engine0b",
                       restart_engine_args(first.port, kv_port))
        ng.engines[0] = again
        # Each rank's first batch from the new process clears it, once.
        learn(again, 2, lambda: kv_cleared(ng) >= cleared + 2)
        print("engine_restart: both ranks cleared: %s" % kv_state(ng), flush=True)
        clients.wait_more("requests after the restart")
        clients.stop()
        after = wait_index_matches(ng, again, "the index to match the restarted engine0")
        print("engine_restart: index = engine0's kv_blocks per rank %r before, %r after "
              "its restart; %d requests through nginx meanwhile (%d failed, cut by the "
              "kill)" % (before, after, clients.ok, len(clients.failed)))
    finally:
        if clients:
            clients.stop()
        ng.stop()


def main():
    if len(sys.argv) != 9:
        fail(__doc__)
    {"reload_refused": case_reload_refused,
     "conf_checks": case_conf_checks,
     "engine_restart": case_engine_restart}[sys.argv[1]](sys.argv[2:])
    print("PASS")


if __name__ == "__main__":
    main()
