#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_test.py -- ngx_http_upstream_wsel_module in Debian's nginx.

usage: nginx_test.py CASE NGINX MODULE WSEL_ENGINE WSEL PLUGINS FIXTURES WORKDIR
                    [ISO_FIXTURES HELPER]

Cases:
  route     nginx (one worker, its own prefix, conf, pid and logs, on a free
            loopback port) in front of two wsel-engines (--dp 2, KV events):
            a replayed workload through nginx with the bundled softmax
            policy, every request 200; once the KV events are in the
            index, a request finds its prefix cached on the rank chosen
            (the workload's start replayed again until one does); the
            status figures (JSON and Prometheus) add up exactly for a
            known batch; a body is copied only when nginx read it in
            pieces (body_copies: 0 for a small one, 1 for 23 KB over the
            default 1k header buffer, 0 with a 64k one); a request without
            a usable prompt is answered by the built-in policy and counted;
            the policy switched both ways under traffic (admin location and
            nginx -s reload), with no failed request
  refused   a broken plugin is refused by the admin location (409, the old
            policy keeps serving), by nginx -t and by a reload (the old
            worker keeps serving); a KV thread class other than
            threads=low|normal is refused with the reason, and so is one
            given without events
  isolated  a plugin that crashes its helper (tests/isolated's iso_segv) in
            isolated mode: every request is answered 200, the crashes are
            counted as fallbacks
  switches  issue 16's floor: at least 100 accepted policy switches under a
            steady stream of requests from 4 clients, by the admin location
            (4 of 5) and nginx -s reload (1 of 5), cycling softmax, p2c and
            hysteresis with configs; every 10th attempt is one that must be
            refused (an untrusted world-writable copy or a broken plugin; by
            the admin location, nginx -s reload or SIGHUP to the master) and
            the old policy keeps serving, with the reason. Every switch is
            seen in the status; 0 failed requests
  kill      one of three engines is killed (SIGKILL) while requests flow
            and one is in flight there (proxy_next_upstream error timeout
            non_idempotent, max_fails=1). wsel-engine sends its 200 header
            when it accepts a request, so the responses it had in flight are
            cut (the clients see short reads, at most one per client, nginx
            logs each); nginx retries what it can (connections refused or
            reset before a header) on a live engine: every request started
            after the kill is answered 200. The status counts the upstream
            failures and retries, and the cut responses (responses_cut, as
            many as the clients saw), and no load is left on the dead ranks.
            nginx holds the dead engine down and the module tells the
            router: its ranks are excluded (peers_down 1, rank flags), and
            20 more requests go to live engines by the policy's own choice
            (peer_unavailable, retries and upstream_failures do not grow)
  fail_timeout
            the exclusion follows nginx's fail_timeout: one of two engines
            killed (max_fails=1 fail_timeout=1s); sequential requests until
            nginx counts it failed and the module excludes it, then until
            the exclusion has lifted after fail_timeout, the policy chose it
            again, nginx counted that failure and it is excluded again
            (upstream_failures = peers_marked_down, every request 200)
  outcomes  tests/router's outcome fixture as the policy (it logs every
            outcome it is told; path in WSEL_OUTCOME_FIXTURE): 10 clean
            requests give 10 outcomes with the prompt's tokens, the
            response's output tokens and no failed flag, and the status's
            failed_outcomes stays 0; a routed request the engine answers
            400 (max_tokens not an integer) gives a failed outcome and
            failed_outcomes 1

  audit     what an audit of the module found, each fixed:
            (0) nginx -t refuses wsel_capacity_blocks and wsel_busy
            requests= past 2^32 - 1 (they wrapped: 2^32 became 0, the
            default), and a balancer (least_conn) after wsel_policy,
            which replaced the module's (routes and rank headers went to
            servers least_conn chose);
            (1) a response nginx makes itself (a 502 when the only server
            refuses and proxy_next_upstream is off) is no first token:
            the outcome's ttft is 0 (with the outcome fixture as the
            policy, when WSEL_OUTCOME_FIXTURE is set); (2) a backup server
            that fails is no router worker: peers_down stays 0 when only
            the backup is held down (it was taken for worker 1); (3) the
            admin location decodes JSON \\uXXXX escapes (what Python's
            json.dumps sends for any non-ASCII byte) in "path" and in a
            "config" string, and refuses one that is not a character
            rather than running the policy on "{}" in the config's place;
            (3b) it reads the body with wsel's JSON reader (host/json/,
            compiled into the module, which exports only ngx_modules,
            ngx_module_names and ngx_module_order): a path outside ASCII
            (\\u00e9 and a surrogate pair, as json.dumps sends it), an
            escaped member name and 64 levels inside the object are
            accepted; malformed bodies (a trailing comma, text after the
            object, a leading zero, a bad word, a bad escape, invalid UTF-8,
            a truncated text) and bodies over a limit (65 levels inside,
            over 8,192 values) are refused with the reason, as are a body
            that is no object, a "path" that is missing (or no string) or
            empty, and an empty body, the old policy serving;
            (4) with the fixture: a mirror subrequest to the routed
            upstream takes no routed peer: the request's one outcome is
            not failed and no retry is counted (it was finished, failed,
            at the subrequest's try); (5) with the fixture: a response
            the server cuts after its header (a 200 and one chunk, then
            the connection closed) is a failed outcome (it was a clean
            one: nginx flags nothing when the upstream side cuts it);
            (6) a request is finished when its response ends, not when
            nginx frees it (a lingering close waited for the client to
            close the connection, up to lingering_timeout); (7) a server
            configured `down` is excluded from the policy's table from the
            worker's start (the policy chose it, and the request fell to
            round-robin, counted peer_unavailable, a failed outcome)

Everything waits for conditions (a port file, a status answer, a pid
change) under generous ceilings, never for a fixed time; only 127.0.0.1.
The engines and nginx are started and reaped by tests/support/engines.py.
"""
import grp
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                "support"))
from engines import (BLOCK, CEILING_S, Engine, deadline_loop, fail,  # noqa: E402
                     get_json, http_request, post_json, refusing_socket, start_process,
                     stop_process, unused_port)

WSEL_ROW_EXCLUDED = 0x02  # abi/wsel.h


def worker_user_line():
    """A master started as root runs its workers as `nobody`, which cannot
    read a checkout under a private folder (mktemp -d is mode 0700): run
    them as the user running the test, who owns the build. Empty otherwise
    (nginx ignores `user` without root, with a warning)."""
    if os.geteuid() != 0:
        return ""
    return "user %s %s;\n" % (pwd.getpwuid(os.geteuid()).pw_name,
                               grp.getgrgid(os.getegid()).gr_name)


PORT_TRIES = 5  # starts of nginx, each on a port another process may take


class Nginx:
    """nginx in the foreground (daemon off) with its own prefix, in front of
    ENGINES; stop() stops them with it."""

    def __init__(self, nginx, module, workdir, engines):
        self.nginx = nginx
        self.module = module
        self.dir = os.path.join(workdir, "nginx")
        shutil.rmtree(self.dir, ignore_errors=True)
        for d in ("logs", "tmp", "conf"):
            os.makedirs(os.path.join(self.dir, d))
        self.conf = os.path.join(self.dir, "conf", "nginx.conf")
        self.error_log = os.path.join(self.dir, "logs", "error.log")
        self.engines = engines
        self.port = unused_port()
        self.proc = None

    def write_conf(self, policy, workers=1, config="{}", isolated=None,
                   server_opts="max_fails=0", next_upstream="error timeout",
                   kv_source="events", extra_servers=(), extra_locations=(),
                   extra_upstream=(), after_policy=(), listen_opts=""):
        self.conf_args = (policy, workers, config, isolated, server_opts, next_upstream,
                          kv_source, extra_servers, extra_locations, extra_upstream,
                          after_policy, listen_opts)
        d = self.dir
        ups = "\n".join(["        server %s %s;" % (e.addr, server_opts) for e in self.engines]
                        + ["        server %s;" % x for x in extra_servers]
                        + ["        %s;" % x for x in extra_upstream])
        wsrv = "\n".join(
            "        wsel_server %s dp=2 kv=%s,%s;" % (
                e.addr, e.lines[("kv_events", "0")], e.lines[("kv_events", "1")])
            for e in self.engines)
        text = """# SPDX-License-Identifier: Apache-2.0
load_module %(module)s;
%(user)sworker_processes %(workers)d;
daemon off;
pid %(d)s/logs/nginx.pid;
error_log %(d)s/logs/error.log info;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %(d)s/tmp/body;
    proxy_temp_path %(d)s/tmp/proxy;
    fastcgi_temp_path %(d)s/tmp/fastcgi;
    uwsgi_temp_path %(d)s/tmp/uwsgi;
    scgi_temp_path %(d)s/tmp/scgi;
    upstream engines {
%(ups)s
        wsel_policy %(policy)s '%(config)s';
%(after)s%(wsrv)s
        wsel_block_size %(block)d;
        wsel_kv_source %(kv_source)s;
        wsel_prompt tokens;
        wsel_isolated %(iso)s;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:%(port)d%(listen_opts)s;
        client_body_buffer_size 4m;
        client_max_body_size 16m;
        location /v1/ {
            wsel_route engines;
            proxy_pass http://engines;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-data-parallel-rank $wsel_dp_rank;
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_next_upstream %(next_upstream)s;
        }
        location = /wsel/status { wsel_status engines; }
        location = /wsel/admin { wsel_admin engines; }
%(locs)s
    }
}
""" % dict(module=self.module, workers=workers, d=d, ups=ups, wsrv=wsrv, policy=policy,
           config=config, block=BLOCK, port=self.port,
           iso="on " + isolated if isolated else "off", next_upstream=next_upstream,
           kv_source=kv_source, user=worker_user_line(), listen_opts=listen_opts,
           locs="\n".join("        " + x for x in extra_locations),
           after="".join("        %s;\n" % x for x in after_policy))
        with open(self.conf, "w") as f:
            f.write(text)

    def cmd(self, *args):
        return [self.nginx, "-p", self.dir + "/", "-c", self.conf, "-e",
                self.error_log] + list(args)

    def test_conf(self):
        return subprocess.run(self.cmd("-t"), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=CEILING_S)

    def start(self):
        """nginx, until its worker answers the status location. nginx cannot
        bind port 0 and say which port it got, so its port is chosen here
        (unused_port): if another process binds it first, nginx is started
        again on another port (the configuration written again)."""
        self.out = open(os.path.join(self.dir, "logs", "stdout.log"), "w")
        for _ in range(PORT_TRIES):
            if self.start_once():
                return
            self.port = unused_port()
            self.write_conf(*self.conf_args)
        fail("nginx found its port taken %d times" % PORT_TRIES)

    def start_once(self):
        """True once nginx answers on self.port; False, nginx reaped, if it
        logged the port taken. The port is not asked before nginx has logged
        that it bound it (it starts its worker), lest another process answer."""
        log_before = len(self.log())
        self.proc = start_process(self.cmd(), stdout=self.out, stderr=subprocess.STDOUT)
        for _ in deadline_loop("nginx to bind its port"):
            new = self.log()[log_before:]
            if "Address already in use" in new:
                stop_process(self.proc)
                return False
            if "start worker process" in new:
                break
            self.check_running()
        for _ in deadline_loop("nginx's status location"):
            self.check_running()
            try:
                if self.get_status()["worker_pid"]:
                    return True
            except (OSError, ValueError, KeyError):
                pass

    def check_running(self):
        if self.proc.poll() is not None:
            fail("nginx exited with %d:\n%s" % (self.proc.returncode, self.log()))

    def reload(self):
        p = subprocess.run(self.cmd("-s", "reload"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=CEILING_S)
        if p.returncode != 0:
            fail("nginx -s reload: %s" % p.stdout.decode())

    def get_status(self):
        return get_json(self.port, "/wsel/status")

    def admin(self, path, config=None):
        body = {"path": path}
        if config is not None:
            body["config"] = config
        status, data = post_json(self.port, "/wsel/admin", body)
        return status, json.loads(data)

    def log(self):
        try:
            with open(self.error_log) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        """nginx, then the engines behind it."""
        if self.proc:
            stop_process(self.proc)
            self.out.close()
        for e in self.engines:
            e.stop()


def post_whole(port, path, obj, split=None):
    """POST OBJ as JSON, the headers and the body in one send (http.client
    sends them apart, so nginx may or may not read body bytes with the
    headers), or in two sends cut SPLIT bytes into the body: the status."""
    body = json.dumps(obj).encode()
    head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n" % (path, len(body)))
    whole = head.encode() + body
    cut = len(whole) if split is None else len(head) + split
    with socket.create_connection(("127.0.0.1", port), timeout=CEILING_S) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(whole[:cut])
        if cut < len(whole):
            s.sendall(whole[cut:])
        r = http.client.HTTPResponse(s)
        r.begin()
        r.read()
        return r.status


def complete(port, prompt, max_tokens=2):
    return post_json(port, "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens})


def wait_subscribed(ng):
    """Until the router's index holds a block of every engine rank, sent
    straight to it (one-block token prompts): every KV socket is then
    connected, and what an engine publishes from now on reaches the index
    (ZeroMQ drops what a publisher sends before its subscriber joins)."""
    i = 0
    for e in ng.engines:
        for rank in sorted(e.kv):
            for _ in deadline_loop("%s rank %d's KV events to reach the index" % (e.name, rank)):
                held = [r["cached_blocks"] for r in ng.get_status()["ranks"]
                        if r["server"] == e.addr and r["dp_rank"] == rank]
                if held and held[0] > 0:
                    break
                i += 1
                st, body = e.post("/v1/completions",
                                  {"prompt": list(range(1000 + BLOCK * i, 1000 + BLOCK * (i + 1))),
                                   "max_tokens": 1},
                                  headers={"X-data-parallel-rank": str(rank)})
                if st != 200:
                    fail("%s rank %d: %d %s" % (e.name, rank, st, body[:200]))


def wait_policy(ng, policy, old_pid=None):
    """Until the status says `policy` (and, after a reload, a new worker)."""
    for _ in deadline_loop("policy %s%s" % (policy, " after a reload" if old_pid else "")):
        try:
            s = ng.get_status()
        except (OSError, ValueError):
            continue
        if s["policy"] == policy and (old_pid is None or s["worker_pid"] != old_pid):
            return s


def replay(wsel, port, workdir, name, requests):
    out = os.path.join(workdir, name + "_requests.jsonl")
    cmd = [wsel, "replay", "--url", "http://127.0.0.1:%d" % port, "--workload",
           "shared-prefix", "--requests", str(requests), "--rate", "400",
           "--time-scale", "50", "--concurrency", "32", "--no-progress",
           "--timeout", str(CEILING_S), "--requests-out", out, "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=CEILING_S * 4)
    if p.returncode != 0:
        fail("wsel replay exited with %d: %s" % (p.returncode, p.stdout.decode()[-2000:]))
    rows = [json.loads(line) for line in open(out)]
    bad = [r for r in rows if r["status"] != 200]
    if len(rows) != requests or bad:
        fail("%s: %d results for %d requests, %d failed (first %r)"
             % (name, len(rows), requests, len(bad), bad[:1]))
    return rows


def start_all(args, n=2, time_scale=50):
    """N engines and an nginx (not yet started) in front of them."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    os.makedirs(workdir, exist_ok=True)
    # every engine: 2 ranks publishing KV events
    engines = [Engine(engine, workdir, "engine%d" % i,
                      ["--dp", "2", "--time-scale", str(time_scale), "--kv-blocks", "4096",
                       "--quiet", "--kv-events", "tcp://127.0.0.1:0"])
               for i in range(n)]
    return Nginx(nginx, module, workdir, engines)


def case_route(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    p2c = os.path.join(plugins, "p2c.so")
    ng = start_all(args)
    try:
        ng.write_conf(softmax)
        ng.start()
        s = wait_policy(ng, "softmax")

        # 1. a replayed workload, every request 200, routed by the plugin
        replay(wsel, ng.port, workdir, "first", 120)
        s = ng.get_status()
        if s["requests"] != 120 or s["routes"] != 120 or s["plugin_answers"] != 120:
            fail("after 120 requests: %r" % s)
        if s["no_prompt"] != 0 or s["fallbacks"] != 0 or s["route_errors"] != 0:
            fail("unexpected fallbacks: %r" % s)
        ranks = s["ranks"]
        if len(ranks) != 4 or sum(r["active_requests"] for r in ranks) != 0:
            fail("ranks after the workload: %r" % ranks)
        for _ in deadline_loop("KV events to reach the index"):
            s = ng.get_status()
            if s["kv_messages"] > 0 and sum(r["cached_blocks"] for r in s["ranks"]) > 0:
                break
        # The events reach the index asynchronously (the router's event
        # thread), so routing saw cached blocks only if some came in while
        # the replay ran, which is up to the scheduler. Until a request has
        # found its prefix cached on the rank chosen: the workload's first
        # 20 requests again (same seed, same prompts), routed against an
        # index that now holds their prefixes.
        again = 0
        for _ in deadline_loop("a routed request to find its prefix cached"):
            if s["overlap_blocks"] > 0:
                break
            again += 1
            replay(wsel, ng.port, workdir, "again%d" % again, 20)
            s = ng.get_status()
        print("route: %d requests (%d replays of 20 after the first 120), %d of %d "
              "prompt blocks cached on the chosen rank, module time p50 <= %d us"
              % (s["requests"], again, s["overlap_blocks"], s["prompt_blocks"],
                 s["route_time_us_p50"]))

        # 2. exact figures for a known batch: 5 token prompts + 1 without one
        before = ng.get_status()
        prompt = list(range(1000, 1000 + 4 * BLOCK + 7))
        for i in range(5):
            st, body = complete(ng.port, prompt)
            if st != 200:
                fail("request %d: %d %s" % (i, st, body[:200]))
        st, body = complete(ng.port, "a text prompt, unusable in token mode")
        if st != 200:
            fail("text prompt: %d %s" % (st, body[:200]))
        after = ng.get_status()
        d = {k: after[k] - before[k] for k in
             ("requests", "routes", "plugin_answers", "no_prompt", "builtin_routes",
              "prompt_blocks", "selects")}
        want = {"requests": 6, "routes": 6, "plugin_answers": 5, "no_prompt": 1,
                "builtin_routes": 1, "prompt_blocks": 20, "selects": 5}
        if d != want:
            fail("batch figures %r, expected %r" % (d, want))
        if sum(r["active_requests"] for r in after["ranks"]) != 0:
            fail("load left after the batch: %r" % after["ranks"])
        st, prom = http_request(ng.port, "GET", "/wsel/status?format=prometheus")
        prom = prom.decode()
        for line in ('wsel_policy_info{upstream="engines",policy="softmax"',
                     'wsel_no_prompt_total{upstream="engines"} 1',
                     'wsel_fallbacks_total{upstream="engines",reason="no_policy"} 0',
                     'wsel_rank_cached_blocks{upstream="engines",server="%s",dp_rank="1"}'
                     % ng.engines[1].addr):
            if line not in prom:
                fail("prometheus text lacks %r:\n%s" % (line, prom))
        print("status: exact for a batch of 6 (1 without a usable prompt)")

        # 2b. a body is read where nginx put it: one buffer, or buffers back
        # to back (the whole request in the header buffer), and copied only
        # when in pieces (the part read with the headers apart from the rest)
        big = list(range(5000, 5000 + 64 * BLOCK))      # ~23 KB of JSON
        def copies_of(prompt, blocks, split=None):
            before = ng.get_status()
            st = post_whole(ng.port, "/v1/completions",
                            {"prompt": prompt, "max_tokens": 1}, split)
            if st != 200:
                fail("a %d-block prompt: %d" % (blocks, st))
            after = ng.get_status()
            if after["prompt_blocks"] - before["prompt_blocks"] != blocks:
                fail("a %d-block prompt (split %r) hashed as %d blocks; no_prompt +%d, "
                     "body_copies +%d, requests +%d" % (
                         blocks, split, after["prompt_blocks"] - before["prompt_blocks"],
                         after["no_prompt"] - before["no_prompt"],
                         after["body_copies"] - before["body_copies"],
                         after["requests"] - before["requests"]))
            return after["body_copies"] - before["body_copies"]
        n_small = copies_of(list(range(100, 100 + BLOCK + 5)), 1)   # ~350 bytes
        n_split = copies_of(big, 64)
        old = ng.get_status()["worker_pid"]
        ng.write_conf(softmax, extra_locations=["client_header_buffer_size 64k;"])
        ng.reload()
        wait_policy(ng, "softmax", old)
        # until it exits the old worker may still accept (and answer)
        wait_exit(old, "the old worker %d to exit" % old)
        # sent in two parts: whether nginx reads them in one recv or two,
        # the body lies in the header buffer in one run of bytes
        n_whole = copies_of(big, 64, split=1000)
        if (n_small, n_split, n_whole) != (0, 1, 0):
            fail("body copies (small, split over the 1k header buffer, in a 64k one "
                 "sent in two parts): %r, expected (0, 1, 0)" % ((n_small, n_split, n_whole),))
        ng.write_conf(softmax)
        print("body: copied only when in pieces (0 / 1 / 0)")

        # 3. switches both ways under traffic, no failed request
        done = threading.Event()
        result = {}

        def traffic():
            try:
                result["rows"] = replay(wsel, ng.port, workdir, "switching", 300)
            finally:
                done.set()

        t = threading.Thread(target=traffic)
        t.start()
        switches = 0
        names = [("p2c", p2c), ("softmax", softmax)]
        while not done.is_set() and switches < 20:
            name, path = names[switches % 2]
            if switches % 4 < 2:
                st, ans = ng.admin(path)
                if st != 200 or not ans["ok"] or ans["policy"] != name:
                    fail("admin switch to %s: %d %r" % (name, st, ans))
            else:
                old = ng.get_status()["worker_pid"]
                ng.write_conf(path)
                ng.reload()
                wait_policy(ng, name, old)
            switches += 1
        t.join()
        if "rows" not in result:
            fail("the replay under switches failed")
        if switches < 4:
            fail("only %d switches happened during the replay" % switches)
        print("switch: %d switches (admin and reload, both ways) under 300 requests, "
              "0 failed" % switches)
    finally:
        ng.stop()


def case_refused(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    broken = os.path.join(fixtures, "fx_no_entry.so")
    ng = start_all(args)
    try:
        # the KV event threads' class: low or normal, with events only
        for kv, why in (("events threads=fast", '"threads=low" or "threads=normal"'),
                        ("history threads=low", 'threads= with "events" only')):
            ng.write_conf(softmax, kv_source=kv)
            p = ng.test_conf()
            out = p.stdout.decode()
            if p.returncode == 0 or why not in out:
                fail("wsel_kv_source %s accepted: %s" % (kv, out))
        ng.write_conf(softmax, kv_source="events threads=normal")
        p = ng.test_conf()
        if p.returncode != 0:
            fail("wsel_kv_source events threads=normal refused: %s" % p.stdout.decode())
        # a broken plugin: nginx -t says why, and where its wsel_policy is
        # (nginx checks it at the upstream block's end)
        ng.write_conf(broken)
        with open(ng.conf) as f:
            line = 1 + [i for i, l in enumerate(f) if "wsel_policy" in l][0]
        p = ng.test_conf()
        out = p.stdout.decode()
        where = "(wsel_policy in %s:%d) refused" % (ng.conf, line)
        if p.returncode == 0 or where not in out:
            fail("nginx -t accepted a broken plugin, or did not say %r: %s" % (where, out))

        ng.write_conf(softmax)
        ng.start()
        s = wait_policy(ng, "softmax")
        pid = s["worker_pid"]
        # the admin location refuses it and the old policy serves
        st, ans = ng.admin(broken)
        if st != 409 or ans["ok"] or ans["policy"] != "softmax" or not ans["error"]:
            fail("admin switch to a broken plugin: %d %r" % (st, ans))
        st, ans = ng.admin(softmax, config={"no_such_parameter": 1})
        if st != 409 or ans["policy"] != "softmax":
            fail("admin switch with a bad config: %d %r" % (st, ans))
        st, body = complete(ng.port, list(range(3 * BLOCK)))
        if st != 200:
            fail("request after refused switches: %d" % st)
        s = ng.get_status()
        if s["admin_refused"] != 2 or s["plugin_answers"] != 1 or not s["last_switch_error"]:
            fail("status after refused switches: %r" % s)
        # a reload to it: `nginx -s reload` reads the configuration first and
        # refuses; the master, signalled directly, refuses too and the old
        # worker serves on
        ng.write_conf(broken)
        p = subprocess.run(ng.cmd("-s", "reload"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=CEILING_S)
        if p.returncode == 0 or "refused" not in p.stdout.decode():
            fail("nginx -s reload accepted a broken plugin: %s" % p.stdout.decode())
        log_before = len(ng.log())
        os.kill(ng.proc.pid, signal.SIGHUP)
        for _ in deadline_loop("the master to log the refused reload"):
            if "refused" in ng.log()[log_before:]:
                break
        st, body = complete(ng.port, list(range(3 * BLOCK)))
        s = ng.get_status()
        if st != 200 or s["worker_pid"] != pid or s["policy"] != "softmax":
            fail("after a refused reload: %d, %r" % (st, s))
        print("refused: a broken plugin (nginx -t, admin, reload) and a bad "
              "config; the old policy kept serving")
    finally:
        ng.stop()


def case_isolated(args):
    nginx, module, engine, wsel, plugins, fixtures, workdir, iso_dir, helper = args
    ng = start_all(args[:7])
    try:
        ng.write_conf(os.path.join(iso_dir, "iso_segv.so"), isolated=helper)
        ng.start()
        wait_policy(ng, "iso_segv")
        n = 40
        for i in range(n):
            st, body = complete(ng.port, list(range(i, i + 2 * BLOCK)))
            if st != 200:
                fail("request %d with a crashing isolated plugin: %d %s" % (i, st, body))
        s = ng.get_status()
        crashed = s["fallbacks_by_reason"]["crashed"]
        if s["routes"] != n or crashed == 0 or s["selects"] != n:
            fail("isolated: %r" % s)
        print("isolated: %d requests, all 200; %d crashes answered by the built-in "
              "policy" % (n, crashed))
    finally:
        ng.stop()


class Traffic:
    """A steady stream of completions through nginx from THREADS clients,
    each a new connection (a reload's old worker closes idle keep-alive
    connections; a client racing that close is the client's retry, not a
    failed request). Every answer other than 200 is kept as a failure."""

    def __init__(self, port, threads, max_tokens, seed):
        self.port = port
        self.max_tokens = max_tokens
        self.cond = threading.Condition()
        self.ok = 0
        self.failures = []
        self.stop_flag = False
        self.threads = [threading.Thread(target=self.run, args=(seed + i,))
                        for i in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, seed):
        # shared prefixes (4 groups of 3 blocks) plus a unique tail: routing
        # by cache matters and the policies disagree
        n = 0
        while True:
            with self.cond:
                if self.stop_flag:
                    return
            group = (seed + n) % 4
            tail = 10000 + seed * 1000 + n % 900     # < the engines' 32,000 ids
            prompt = list(range(group * 1000, group * 1000 + 3 * BLOCK)) + \
                list(range(tail, tail + 20))
            n += 1
            started = time.monotonic()
            try:
                st, body = complete(self.port, prompt, self.max_tokens)
                err = None if st == 200 else "%d %s" % (st, body[:200])
            except (OSError, http.client.HTTPException) as e:
                err = "%s: %s" % (type(e).__name__, e)
            with self.cond:
                if err is None:
                    self.ok += 1
                else:
                    self.failures.append((started, err))
                self.cond.notify_all()

    def done(self):
        with self.cond:
            return self.ok + len(self.failures)

    def wait_for(self, count, what, tolerate=lambda started, err: False):
        """Until COUNT requests have been answered in total; fails at the
        first failure TOLERATE does not accept."""
        end = time.monotonic() + CEILING_S
        with self.cond:
            while self.ok + len(self.failures) < count or \
                    not all(tolerate(*f) for f in self.failures):
                if not all(tolerate(*f) for f in self.failures):
                    fail("%d requests failed while waiting for %s, first: %s"
                         % (len(self.failures), what, self.failures[:3]))
                left = end - time.monotonic()
                if left <= 0:
                    fail("gave up waiting for %s (%d answered)"
                         % (what, self.ok + len(self.failures)))
                self.cond.wait(left)

    def stop(self):
        with self.cond:
            self.stop_flag = True
        for t in self.threads:
            t.join()


def wait_exit(pid, what):
    """Until process PID is gone (or a zombie its parent has not reaped)."""
    for _ in deadline_loop(what):
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state == "Z":
            return


SWITCHES = 100      # accepted switches, at least
REFUSE_EVERY = 10   # every 10th attempt is one that must be refused
RELOAD_EVERY = 5    # every 5th accepted switch is a reload, the rest admin


def case_switches(args):
    """100 policy switches under load, 0 failed requests (issue 16's floor)."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    policies = [("softmax", os.path.join(plugins, "softmax.so"), '{"temperature": 0.5}'),
                ("p2c", os.path.join(plugins, "p2c.so"),
                 '{"d": 2, "column": "active_requests"}'),
                ("hysteresis", os.path.join(plugins, "hysteresis.so"),
                 '{"rel_margin": 0.5, "abs_margin": 16}')]
    broken = os.path.join(fixtures, "fx_no_entry.so")
    os.makedirs(workdir, exist_ok=True)
    # an untrusted copy of a good plugin: world-writable, refused by the
    # host's trust rules (docs: trust) whatever its contents
    untrusted_dir = os.path.join(workdir, "untrusted")
    shutil.rmtree(untrusted_dir, ignore_errors=True)
    os.makedirs(untrusted_dir)
    os.chmod(untrusted_dir, 0o755)
    untrusted = os.path.join(untrusted_dir, "softmax.so")
    shutil.copyfile(policies[0][1], untrusted)
    os.chmod(untrusted, 0o666)
    # (how, what, the reason that must be given)
    refusals = [("admin", untrusted, "world-writable"),
                ("reload", broken, "missing symbol wsel_plugin_entry"),
                ("admin", broken, "missing symbol wsel_plugin_entry"),
                ("sighup", untrusted, "world-writable")]

    ng = start_all(args)
    traffic = None
    t0 = time.monotonic()
    try:
        cur = 0
        name, path, config = policies[cur]
        ng.write_conf(path, config=config, next_upstream="error timeout non_idempotent")
        ng.start()
        s = wait_policy(ng, name)
        pid = s["worker_pid"]
        traffic = Traffic(ng.port, threads=4, max_tokens=4, seed=1)
        accepted = {"admin": 0, "reload": 0}
        refused = {"admin": 0, "reload": 0, "sighup": 0}
        attempt = 0
        while accepted["admin"] + accepted["reload"] < SWITCHES:
            attempt += 1
            # under load: requests were answered since the last switch
            traffic.wait_for(traffic.done() + 3, "traffic between switches")
            s = ng.get_status()
            if s["worker_pid"] != pid or s["policy"] != name:
                fail("attempt %d: status %r, expected %s in worker %d"
                     % (attempt, s, name, pid))
            if attempt % REFUSE_EVERY == 0:
                how, bad, reason = refusals[(attempt // REFUSE_EVERY - 1) % len(refusals)]
                if how == "admin":
                    before = s["admin_refused"]
                    st, ans = ng.admin(bad)
                    if st != 409 or ans["ok"] or ans["policy"] != name \
                            or reason not in ans["error"]:
                        fail("admin switch to %s: %d %r" % (bad, st, ans))
                    s = ng.get_status()
                    if s["policy"] != name or s["policy_path"] != path \
                            or s["admin_refused"] != before + 1 \
                            or s["last_switch_error"] != ans["error"]:
                        fail("status after a refused admin switch: %r" % s)
                else:
                    ng.write_conf(bad, config="{}",
                                  next_upstream="error timeout non_idempotent")
                    if how == "reload":
                        # nginx -s reload reads the configuration first
                        p = subprocess.run(ng.cmd("-s", "reload"), stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, timeout=CEILING_S)
                        out = p.stdout.decode()
                        if p.returncode == 0 or "refused" not in out or reason not in out:
                            fail("nginx -s reload accepted %s: %s" % (bad, out))
                    else:
                        # the running master, signalled directly, refuses it
                        log_before = len(ng.log())
                        os.kill(ng.proc.pid, signal.SIGHUP)
                        for _ in deadline_loop("the master to refuse the reload"):
                            new = ng.log()[log_before:]
                            if "refused" in new:
                                break
                        if reason not in new:
                            fail("the refused reload's log has no reason %r: %s"
                                 % (reason, new))
                    ng.write_conf(path, config=config,
                                  next_upstream="error timeout non_idempotent")
                    s = ng.get_status()
                    if s["worker_pid"] != pid or s["policy"] != name:
                        fail("after a refused reload: %r" % s)
                refused[how] += 1
                continue

            cur = (cur + 1) % len(policies)
            name, path, config = policies[cur]
            n_accepted = accepted["admin"] + accepted["reload"]
            if n_accepted % RELOAD_EVERY == RELOAD_EVERY - 1:
                old = pid
                ng.write_conf(path, config=config,
                              next_upstream="error timeout non_idempotent")
                ng.reload()
                s = wait_policy(ng, name, old)
                pid = s["worker_pid"]
                # the old worker finishes its requests and exits; until it
                # does it may still accept, so the next admin switch waits
                wait_exit(old, "the old worker %d to exit" % old)
                if s["policy_path"] != path:
                    fail("reload to %s: status %r" % (path, s))
                accepted["reload"] += 1
            else:
                before = s["admin_switches"]
                st, ans = ng.admin(path, json.loads(config))
                if st != 200 or not ans["ok"] or ans["policy"] != name \
                        or ans["worker_pid"] != pid:
                    fail("admin switch to %s: %d %r" % (name, st, ans))
                s = ng.get_status()
                if s["policy"] != name or s["policy_path"] != path \
                        or s["admin_switches"] != before + 1 or s["last_switch_error"]:
                    fail("status after the admin switch to %s: %r" % (name, s))
                accepted["admin"] += 1
        traffic.wait_for(traffic.done() + 3, "traffic after the last switch")
        traffic.stop()
        elapsed = time.monotonic() - t0
        s = ng.get_status()
        if traffic.failures:
            fail("%d of %d requests failed under switches, first: %s"
                 % (len(traffic.failures), traffic.done(), traffic.failures[:3]))
        if sum(r["active_requests"] for r in s["ranks"]) != 0:
            fail("load left after the traffic: %r" % s["ranks"])
        print("switches: %d accepted (%d admin, %d reload) and %d refused (%d admin, "
              "%d nginx -s reload, %d SIGHUP) under %d requests from 4 clients, "
              "0 failed, %.1f s"
              % (accepted["admin"] + accepted["reload"], accepted["admin"],
                 accepted["reload"], sum(refused.values()), refused["admin"],
                 refused["reload"], refused["sighup"], traffic.ok, elapsed))
    finally:
        if traffic:
            traffic.stop()
        ng.stop()


def case_kill(args):
    """SIGKILL one of three engines while requests flow (see the module's
    docstring): what nginx can retry it retries, what it cannot is counted,
    every request started after the kill is answered 200."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    # time scale 5: a 24-token answer takes tens of milliseconds of wall
    # time, so requests are in flight on every engine when one is killed
    ng = start_all(args, n=3, time_scale=5)
    victim = ng.engines[1]
    traffic = None
    # nginx's error for a response cut after its header: "upstream
    # prematurely closed connection while reading upstream" (FIN) or
    # "recv() failed (104: Connection reset by peer) while reading
    # upstream" (RST), both at [error]
    cut_line = re.compile(r"\[error\].* while reading upstream,")
    try:
        # fail_timeout is long enough that the test never sees it expire
        ng.write_conf(softmax, server_opts="max_fails=1 fail_timeout=%ds" % (CEILING_S * 5),
                      next_upstream="error timeout non_idempotent")
        ng.start()
        wait_policy(ng, "softmax")
        traffic = Traffic(ng.port, threads=6, max_tokens=24, seed=7)
        traffic.wait_for(30, "traffic before the kill")
        for _ in deadline_loop("a request in flight on the victim"):
            s = ng.get_status()
            if sum(r["active_requests"] for r in s["ranks"] if r["server"] == victim.addr):
                break
        before = s
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()          # exited: its sockets are closed
        killed_t = time.monotonic()
        killed_at = traffic.done()

        # Failures tolerated: only requests started before the kill. The
        # engine sends its 200 header when it accepts a request, so nginx
        # has passed it on and can only cut the response (the client sees a
        # short read; nginx logs a cut_line); everything else is retried.
        def in_flight(started, err):
            return started < killed_t and err.startswith("IncompleteRead")
        traffic.wait_for(killed_at + 60, "traffic after the kill", in_flight)
        traffic.stop()
        answered = traffic.done()
        cut = len(traffic.failures)
        # new requests, one at a time: every one answered by a live engine
        for i in range(20):
            st, body = complete(ng.port, list(range(i * 7, i * 7 + 2 * BLOCK)), 2)
            if st != 200:
                fail("request %d after the kill: %d %s" % (i, st, body[:200]))
        s = ng.get_status()
        failures = s["upstream_failures"] - before["upstream_failures"]
        retries = s["retries"] - before["retries"]
        unavailable = s["peer_unavailable"] - before["peer_unavailable"]
        logged = len(cut_line.findall(ng.log()))
        if cut > 6 or logged != cut:
            fail("%d responses cut (6 clients), nginx logged %d: %s"
                 % (cut, logged, traffic.failures))
        if failures < 1 or retries < 1 or retries > failures:
            fail("the kill was not counted: upstream_failures +%d, retries +%d: %r"
                 % (failures, retries, s))
        if s["responses_cut"] - before["responses_cut"] != cut:
            fail("status responses_cut +%d, clients saw %d cut"
                 % (s["responses_cut"] - before["responses_cut"], cut))
        if s["requests"] != answered + 20 or s["route_errors"] != 0:
            fail("status requests %d, clients sent %d: %r"
                 % (s["requests"], answered + 20, s))
        if sum(r["active_requests"] for r in s["ranks"]) != 0:
            fail("load left after the kill: %r" % s["ranks"])
        # The policy routes around the dead engine: nginx holds it down
        # (max_fails=1, fail_timeout longer than the test), the module told
        # the router, its ranks are excluded from the policy's table.
        if s["peers_down"] != 1 or s["peers_marked_down"] - before["peers_marked_down"] < 1:
            fail("the dead engine is not marked down: %r" % s)
        for r in s["ranks"]:
            excluded = bool(r["flags"] & WSEL_ROW_EXCLUDED)
            if excluded != (r["server"] == victim.addr):
                fail("rank flags after the kill: %r" % s["ranks"])
        # so later requests are chosen among live engines by the policy
        # itself: none goes to nginx's round-robin (peer_unavailable), none
        # is retried, none fails
        for i in range(20):
            st, body = complete(ng.port, list(range(1000 + i * 7, 1000 + i * 7 + 2 * BLOCK)), 2)
            if st != 200:
                fail("request %d after the exclusion: %d %s" % (i, st, body[:200]))
        s2 = ng.get_status()
        for k in ("peer_unavailable", "retries", "upstream_failures", "responses_cut"):
            if s2[k] != s[k]:
                fail("%s grew once the dead engine was excluded: %d -> %d"
                     % (k, s[k], s2[k]))
        if s2["requests"] != s["requests"] + 20 or s2["route_errors"] != 0:
            fail("status after the exclusion: %r" % s2)
        print("kill: engine %s killed after %d answers; %d responses in flight there cut "
              "(nginx logged %d, status responses_cut %d), %d requests answered after the "
              "kill, all 200; status: upstream_failures +%d, retries +%d, "
              "peer_unavailable +%d; then 20 more requests with the engine excluded: "
              "peer_unavailable, retries, upstream_failures +0"
              % (victim.addr, killed_at, cut, logged,
                 s["responses_cut"] - before["responses_cut"],
                 answered - killed_at - cut + 20, failures, retries, unavailable))
    finally:
        if traffic:
            traffic.stop()
        ng.stop()

def case_fail_timeout(args):
    """The exclusion follows nginx's fail_timeout: one of two engines
    killed before any traffic (max_fails=1 fail_timeout=1s); sequential
    requests until nginx counts it failed (its ranks excluded), then until
    the exclusion has lifted after fail_timeout, the policy has chosen it
    again, nginx has counted that failure too and it is excluded again."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    ng = start_all(args, n=2)
    victim = ng.engines[1]
    n = [0]

    def one():
        prompt = list(range(n[0] * 3 % 30000, n[0] * 3 % 30000 + 2 * BLOCK))
        st, body = complete(ng.port, prompt, 2)
        if st != 200:
            fail("request %d: %d %s" % (n[0], st, body[:200]))
        n[0] += 1
        return ng.get_status()

    try:
        ng.write_conf(softmax, server_opts="max_fails=1 fail_timeout=1s",
                      next_upstream="error timeout non_idempotent")
        ng.start()
        wait_policy(ng, "softmax")
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        for _ in deadline_loop("the dead engine excluded"):
            s = one()
            if s["peers_marked_down"] >= 1:
                break
        first = n[0]
        for _ in deadline_loop("the dead engine tried again after fail_timeout"):
            s = one()
            if s["peers_marked_down"] >= 2:
                break
        # every failure was nginx's first try of the dead engine after it
        # became available (or at the start), each then excluded at once
        if (s["upstream_failures"] != s["peers_marked_down"]
                or s["retries"] != s["upstream_failures"] or s["peers_down"] != 1
                or s["peer_unavailable"] != 0 or s["route_errors"] != 0):
            fail("fail_timeout: status %r" % s)
        print("fail_timeout: the dead engine excluded after request %d, tried again "
              "after fail_timeout and excluded again by request %d; upstream_failures "
              "= peers_marked_down = %d, all %d requests 200"
              % (first, n[0], s["peers_marked_down"], n[0]))
    finally:
        ng.stop()


OUTCOME_LINE = re.compile(
    r"wsel: outcome (\d+) on (\d+)/(\d+) ttft=(\d+) e2e=(\d+) fin=\d+ prompt=(\d+) "
    r"cached=\d+ output=(\d+) flags=(\d+)")


def case_outcomes(args):
    """The outcomes reach the policy and failed_outcomes counts the failed
    ones: tests/router's outcome fixture (it logs every outcome it is told)
    as nginx's policy; 10 clean requests, then one the engine answers 400."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    fixture = os.environ.get("WSEL_OUTCOME_FIXTURE", "")
    if not os.path.isfile(fixture):
        fail("WSEL_OUTCOME_FIXTURE is not a file: %r" % fixture)
    ng = start_all(args, n=2)
    addrs = [e.addr for e in ng.engines]

    def outcomes():
        return [tuple(int(x) for x in m.groups()) for m in OUTCOME_LINE.finditer(ng.log())]

    def wait_counts(n, failed):
        for _ in deadline_loop("%d outcomes, %d failed" % (n, failed)):
            s = ng.get_status()
            if len(outcomes()) >= n and s["failed_outcomes"] >= failed:
                return s, outcomes()

    try:
        ng.write_conf(fixture)
        ng.start()
        wait_policy(ng, "router_outcome_fixture")
        prompt = list(range(2 * BLOCK))
        for i in range(10):
            st, body = complete(ng.port, [t + i for t in prompt], 3)
            if st != 200:
                fail("clean request %d: %d %s" % (i, st, body[:200]))
        s, got = wait_counts(10, 0)
        if s["failed_outcomes"] != 0 or s["requests"] != 10 or s["no_prompt"] != 0:
            fail("clean run: status %r" % s)
        if len(got) != 10:
            fail("clean run: %d outcomes for 10 requests: %r" % (len(got), got))
        for rid, w, rank, ttft, e2e, ptoks, out, flags in got:
            if (w not in (1, 2) or rank not in (0, 1) or ptoks != 2 * BLOCK or out != 3
                    or flags != 0 or ttft > e2e):
                fail("clean outcome: id %d on %d/%d ttft=%d e2e=%d prompt=%d output=%d "
                     "flags=%d" % (rid, w, rank, ttft, e2e, ptoks, out, flags))
        if len(set(g[0] for g in got)) != 10:
            fail("outcome ids repeat: %r" % got)
        # a prompt the module routes, which the engine refuses: 400
        st, body = post_json(ng.port, "/v1/completions",
                             {"prompt": prompt, "max_tokens": "three"})
        if st != 400:
            fail("bad max_tokens: %d %s (the engine answers 400)" % (st, body[:200]))
        s, got = wait_counts(11, 1)
        if s["failed_outcomes"] != 1 or s["requests"] != 11 or len(got) != 11:
            fail("after a 400: failed_outcomes %d, requests %d, %d outcomes"
                 % (s["failed_outcomes"], s["requests"], len(got)))
        last = got[-1]
        if last[7] != 1 or last[6] != 0 or last[5] != 2 * BLOCK:
            fail("the 400's outcome: %r (flags=1, output=0 expected)" % (last,))
        if s["responses_cut"] != 0 or s["upstream_failures"] != 0:
            fail("outcomes: status %r" % s)
        print("outcomes: 10 clean requests, 10 outcomes logged by the fixture policy "
              "(prompt %d, output 3, flags 0 each), failed_outcomes 0; one answered 400 "
              "by the engine: its outcome flags=1 output=0, failed_outcomes 1; "
              "servers %s" % (2 * BLOCK, addrs))
    finally:
        ng.stop()


def case_audit(args):
    """The audit's fixes (see the module docstring, case audit)."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    fixture = os.environ.get("WSEL_OUTCOME_FIXTURE", "")
    policy = fixture if os.path.isfile(fixture) else softmax
    os.makedirs(workdir, exist_ok=True)
    primary, backup = refusing_socket(), refusing_socket()
    paddr = "127.0.0.1:%d" % primary.getsockname()[1]
    baddr = "127.0.0.1:%d" % backup.getsockname()[1]
    ng = Nginx(nginx, module, workdir, [])

    def outcomes():
        return [tuple(int(x) for x in m.groups()) for m in OUTCOME_LINE.finditer(ng.log())]

    try:
        # (1) no retry: the 502 is nginx's own page, not a first token
        servers = (paddr + " max_fails=0", baddr + " backup max_fails=1")
        # (0) 32-bit settings past 2^32 - 1 are refused, not wrapped
        for line, says in (("wsel_capacity_blocks 4294967296",
                            "wsel_capacity_blocks must be at most 4294967295"),
                           ("wsel_busy requests=4294967297", "has a bad requests=")):
            ng.write_conf(policy, kv_source="history", extra_servers=servers,
                          extra_upstream=(line,))
            p = ng.test_conf()
            if p.returncode == 0 or says not in p.stdout.decode():
                fail("nginx -t with %s: %d %s" % (line, p.returncode, p.stdout.decode()))
        ng.write_conf(policy, kv_source="history", extra_servers=servers,
                      extra_upstream=("wsel_capacity_blocks 4294967295",
                                      "wsel_busy requests=4294967295"))
        p = ng.test_conf()
        if p.returncode != 0:
            fail("nginx -t with 32-bit maxima: %s" % p.stdout.decode())
        print("audit: wsel_capacity_blocks and wsel_busy requests= past 2^32 - 1 refused")
        # (0b) a balancer given after wsel_policy replaces it: refused
        ng.write_conf(policy, kv_source="history", extra_servers=servers,
                      after_policy=("least_conn",))
        p = ng.test_conf()
        if p.returncode == 0 or "replaced it" not in p.stdout.decode():
            fail("nginx -t with least_conn after wsel_policy: %d %s"
                 % (p.returncode, p.stdout.decode()))
        print("audit: least_conn after wsel_policy refused")

        ng.write_conf(policy, kv_source="history", next_upstream="off",
                      extra_servers=servers)
        ng.start()
        st, body = complete(ng.port, list(range(2 * BLOCK)))
        if st != 502:
            fail("a refusing server, no retry: %d %s" % (st, body[:200]))
        for _ in deadline_loop("the 502's outcome"):
            s = ng.get_status()
            if s["failed_outcomes"] >= 1 and (policy != fixture or outcomes()):
                break
        if s["failed_outcomes"] != 1 or s["routes"] != 1:
            fail("the 502: status %r" % s)
        if policy == fixture:
            got = outcomes()
            if len(got) != 1 or got[0][7] != 1 or got[0][3] != 0:
                fail("the 502's outcome %r: flags=1 and ttft=0 expected (no response "
                     "byte came from the server)" % (got,))
            print("audit: a 502 nginx made itself: outcome flags=1 ttft=0")
        else:
            print("audit: WSEL_OUTCOME_FIXTURE not set: the 502's ttft not checked")

        # (2) the backup is tried and fails: no worker is excluded (the
        # counters are the upstream's, the reloaded worker's included)
        old, base = s["worker_pid"], s
        ng.write_conf(policy, kv_source="history", next_upstream="error timeout",
                      extra_servers=servers)
        ng.reload()
        wait_policy(ng, s["policy"], old)
        # until then the old worker may still accept the next connection
        wait_exit(old, "the old worker to exit after the reload")
        st, body = complete(ng.port, list(range(2 * BLOCK)))
        if st != 502:
            fail("a refusing server and a refusing backup: %d %s" % (st, body[:200]))
        for _ in deadline_loop("the backup's failure to be counted"):
            s = ng.get_status()
            if s["upstream_failures"] - base["upstream_failures"] >= 2:
                break
        if (s["upstream_failures"] - base["upstream_failures"] != 2
                or s["retries"] - base["retries"] != 1):
            fail("primary then backup: status %r" % s)
        if (s["peers_down"] != 0 or s["peers_marked_down"] != 0
                or any(r["flags"] & WSEL_ROW_EXCLUDED for r in s["ranks"])):
            fail("the backup's failure excluded a worker (the primary has max_fails=0, "
                 "the backup is no worker): %r" % s)
        print("audit: the backup server failed, held down by nginx; no worker excluded")

        # (3) the admin location and JSON \\u escapes
        esc = softmax.replace("/", "\\u002f")
        st, data = post_json(ng.port, "/wsel/admin",
                             '{"path": "%s", "config": "\\u007b\\u007d"}' % esc)
        ans = json.loads(data)
        if st != 200 or not ans["ok"] or ans["path"] != softmax:
            fail("a path and config with \\u escapes: %d %r" % (st, ans))
        for cfg in ('"{\\"x\\": }"', '"{\\u0022x\\u0022: }"'):
            st, data = post_json(ng.port, "/wsel/admin",
                                 '{"path": "%s", "config": %s}' % (softmax, cfg))
            ans = json.loads(data)
            if st != 409 or ans["ok"]:
                fail("a config that is no JSON object (%s): %d %r (the policy must not "
                     "run on \"{}\" in its place)" % (cfg, st, ans))
        for body in ('{"path": "%s", "config": "\\ud800"}' % softmax,
                     '{"path": "%s\\u0000x"}' % softmax):
            st, data = post_json(ng.port, "/wsel/admin", body)
            ans = json.loads(data)
            if st != 409 or "escape" not in ans["error"]:
                fail("%s: %d %r (refused, the escape named)" % (body, st, ans))
        print("audit: admin: \\u escapes decoded in path and config; a config that "
              "decodes to no JSON refused; a lone surrogate and U+0000 refused")
        audit_admin_json(ng, module, softmax, workdir)
    finally:
        ng.stop()
        primary.close()
        backup.close()
    audit_down(args, softmax)
    if policy == fixture:
        audit_mirror(args, fixture)
        audit_cut(args, fixture)
    else:
        print("audit: WSEL_OUTCOME_FIXTURE not set: the mirror subrequest and the cut "
              "response not checked")


def audit_admin_json(ng, module, softmax, workdir):
    """(3b) the admin location reads its body with wsel's JSON reader."""
    # the reader is compiled into the module and stays local to it: the
    # module exports what load_module looks up, nothing else
    nm = shutil.which("nm")
    if nm:
        p = subprocess.run([nm, "-D", "--defined-only", module], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=CEILING_S)
        exported = sorted(line.split()[-1] for line in p.stdout.decode().splitlines()
                          if line.strip())
        if p.returncode != 0 or exported != ["ngx_module_names", "ngx_module_order",
                                             "ngx_modules"]:
            fail("the module's exports: %d %r" % (p.returncode, exported))
    # a path outside ASCII as json.dumps sends it: \u00e9 and the surrogate
    # pair \ud83d\ude00, decoded to UTF-8
    folder = os.path.join(workdir, "caf\u00e9 \U0001f600")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    os.chmod(folder, 0o755)
    copy = os.path.join(folder, "softmax.so")
    shutil.copyfile(softmax, copy)
    os.chmod(copy, 0o644)
    body = json.dumps({"path": copy, "config": {"temperature": 0.5}})
    if "\\ud83d\\ude00" not in body:
        fail("json.dumps did not escape the path: %s" % body)
    st, data = post_json(ng.port, "/wsel/admin", body)
    ans = json.loads(data)
    if st != 200 or not ans["ok"] or ans["path"] != copy:
        fail("a path with \\u00e9 and a surrogate pair: %d %r" % (st, ans))
    # a path longer than 1,024 bytes (the host takes up to PATH_MAX) is
    # shown whole in the answer and the status, not cut
    deep_dir = os.path.join(workdir, *(["d" * 200] * 6))
    os.makedirs(deep_dir, exist_ok=True)
    long_copy = os.path.join(deep_dir, "softmax.so")
    shutil.copyfile(softmax, long_copy)
    os.chmod(long_copy, 0o644)
    st, ans = ng.admin(long_copy)
    if st != 200 or ans["path"] != long_copy \
            or ng.get_status()["policy_path"] != long_copy:
        fail("a %d-byte path: %d %r" % (len(long_copy), st, ans))
    # a member name is decoded too
    st, data = post_json(ng.port, "/wsel/admin", '{"p\\u0061th": "%s"}' % softmax)
    ans = json.loads(data)
    if st != 200 or ans["path"] != softmax:
        fail("an escaped member name: %d %r" % (st, ans))
    # the top object and 64 levels inside it, as before
    deep = '{"x": %s%s, "path": "%s"}' % ("[" * 64, "]" * 64, softmax)
    st, data = post_json(ng.port, "/wsel/admin", deep)
    if st != 200:
        fail("a body nested 65 deep: %d %s" % (st, data))
    # malformed bodies and bodies over a limit: 409, the reason named, the
    # old policy serving; each was a JSON text's error, never a switch
    bad = [('{"path": "%s",}' % softmax, "the body is not JSON: expected a key string"),
           ('{"path": "%s"} {}' % softmax, "the body is not JSON: text after the value"),
           ('{"path": "%s", "x": 01}' % softmax, "the body is not JSON: a number with a "
            "leading zero"),
           ('{"path": "%s", "x": tru}' % softmax, "the body is not JSON: an unknown word"),
           ('{"path": "%s\\x"}' % softmax, "the body is not JSON: an invalid escape"),
           (b'{"path": "%s", "x": "\xff"}' % softmax.encode(),
            "the body is not JSON: invalid UTF-8 in a string"),
           ('{"path": "%s"' % softmax, "the body is not JSON: truncated text"),
           ('{"x": %s%s, "path": "%s"}' % ("[" * 65, "]" * 65, softmax),
            "the body is over a limit: JSON nested deeper than 65 levels"),
           ('{"x": [%s0], "path": "%s"}' % ("0," * 8192, softmax),
            "the body is over a limit: more than 8192 JSON values"),
           ('["path", "%s"]' % softmax, "the body is not a JSON object"),
           ('{"path": ["%s"]}' % softmax, "\"path\" (a string) is missing"),
           ('{"path": ""}', "\"path\" is empty"),
           ('{"config": {}}', "\"path\" (a string) is missing"),
           ("", "no body;")]
    before = ng.get_status()
    for body, says in bad:
        st, data = post_json(ng.port, "/wsel/admin", body)
        ans = json.loads(data)
        if st != 409 or ans["ok"] or not ans["error"].startswith(says) \
                or ans["path"] != softmax:
            fail("%r: %d %r (refused with \"%s...\" expected)" % (body[:80], st, ans, says))
    s = ng.get_status()
    if s["admin_refused"] != before["admin_refused"] + len(bad) \
            or s["admin_switches"] != before["admin_switches"] \
            or s["policy_path"] != softmax or not s["last_switch_error"].startswith(says):
        fail("status after %d malformed admin bodies: %r" % (len(bad), s))
    print("audit: admin: the body read by wsel's JSON reader, local to the module "
          "(exports: %s); a path with \\u00e9 and a surrogate pair, an escaped member "
          "name and 65 levels accepted; %d malformed or over-limit bodies refused, "
          "each with its reason" % ("checked" if nm else "nm not found, not checked",
                                     len(bad)))


def cutting_server(sock):
    """On SOCK (listening): each connection's request read, then a 200
    header and one chunk of a chunked body, then the connection closed:
    a server dying mid-response."""
    while True:
        try:
            c, _ = sock.accept()
        except OSError:
            return
        with c:
            data = b""
            while b"\r\n\r\n" not in data:
                got = c.recv(65536)
                if not got:
                    break
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            need = int(m.group(1)) if m else 0
            while len(body) < need:
                got = c.recv(65536)
                if not got:
                    break
                body += got
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n"
                      b"6\r\ndata: \r\n")


def audit_cut(args, fixture):
    """(5) a response the server cuts after its header (it dies
    mid-stream) is a failed outcome, not a clean one with 0 tokens."""
    workdir = os.path.join(args[6], "cut")
    os.makedirs(workdir, exist_ok=True)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    threading.Thread(target=cutting_server, args=(srv,), daemon=True).start()
    ng = Nginx(args[0], args[1], workdir, [])

    def outcomes():
        return [tuple(int(x) for x in m.groups()) for m in OUTCOME_LINE.finditer(ng.log())]

    try:
        ng.write_conf(fixture, kv_source="history",
                      extra_servers=("127.0.0.1:%d" % srv.getsockname()[1],))
        ng.start()
        try:
            st, body = complete(ng.port, list(range(2 * BLOCK)))
            fail("a response cut after its header was read whole: %d %r" % (st, body[:200]))
        except (http.client.HTTPException, OSError):
            pass    # the client sees the cut
        for _ in deadline_loop("the cut response's outcome"):
            if outcomes():
                break
        s = ng.get_status()
        got = outcomes()
        if len(got) != 1 or got[0][7] != 1 or s["responses_cut"] != 1 \
                or s["failed_outcomes"] != 1:
            fail("a cut response: outcomes %r (one, flags=1 expected), status %r"
                 % (got, s))
        print("audit: a response cut after its header: responses_cut 1, its outcome "
              "failed (flags=1)")
    finally:
        ng.stop()
        srv.close()


def audit_down(args, policy):
    """(7) a server configured `down` is excluded from the policy's table
    from the worker's start: the policy never chooses it, so no request
    falls to round-robin (peer_unavailable) for it."""
    dead = refusing_socket()
    ng = start_all(list(args[:6]) + [os.path.join(args[6], "down")], n=1)
    try:
        ng.write_conf(policy, kv_source="history", server_opts="max_fails=0",
                      extra_servers=("127.0.0.1:%d down" % dead.getsockname()[1],))
        ng.start()
        s = ng.get_status()
        down = [r for r in s["ranks"] if r["flags"] & WSEL_ROW_EXCLUDED]
        if s["peers_down"] != 1 or len(down) != 1 or down[0]["server"] == ng.engines[0].addr:
            fail("a server configured down, at the start: %r" % s)
        for i in range(20):
            st, body = complete(ng.port, [t + i for t in range(2 * BLOCK)])
            if st != 200:
                fail("request %d beside a server configured down: %d %s" % (i, st, body[:200]))
        s = ng.get_status()
        if s["peer_unavailable"] != 0 or s["failed_outcomes"] != 0 or s["routes"] != 20:
            fail("20 requests beside a server configured down: %r" % s)
        print("audit: a server configured down is excluded from the start; 20 requests, "
              "none to round-robin")
    finally:
        ng.stop()
        dead.close()


def audit_mirror(args, fixture):
    """(4) a mirror subrequest to the routed upstream is not the routed
    request: it takes no routed peer, and the request's outcome is its own
    (one outcome, not failed; no retry counted)."""
    ng = start_all(list(args[:6]) + [os.path.join(args[6], "mirror")], n=1)
    ng.write_conf(fixture, kv_source="history", extra_locations=(
        "location = /mirrored { wsel_route engines; mirror /shadow; "
        "proxy_pass http://engines/v1/completions; proxy_http_version 1.1; "
        "proxy_set_header Connection \"\"; "
        "proxy_set_header X-data-parallel-rank $wsel_dp_rank; }",
        "location = /shadow { internal; proxy_pass http://engines/v1/completions; "
        "proxy_http_version 1.1; proxy_set_header Connection \"\"; }"))

    def outcomes():
        return [tuple(int(x) for x in m.groups()) for m in OUTCOME_LINE.finditer(ng.log())]

    try:
        ng.start()
        st, body = post_json(ng.port, "/mirrored",
                             {"prompt": list(range(2 * BLOCK)), "max_tokens": 3})
        if st != 200:
            fail("a mirrored request: %d %s" % (st, body[:200]))
        for _ in deadline_loop("the mirrored request's outcome"):
            if outcomes():
                break
        s = ng.get_status()
        got = outcomes()
        if (len(got) != 1 or got[0][7] != 0 or got[0][6] != 3 or s["retries"] != 0
                or s["failed_outcomes"] != 0 or s["routes"] != 1):
            fail("a mirrored request: outcomes %r (one, not failed, output 3 expected), "
                 "status %r" % (got, s))
        print("audit: a mirror subrequest to the same upstream: one outcome, not "
              "failed, no retry")

        # (6) the request is finished when its response is, not when the
        # client closes: a chunked body and "Connection: close" (nginx then
        # closes lingering, waiting for the client), the answer read to
        # its end and the connection left open
        body = json.dumps({"prompt": list(range(2 * BLOCK)), "max_tokens": 3}).encode()
        req = (b"POST /v1/completions HTTP/1.1\r\nHost: audit\r\n"
               b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: close\r\n\r\n")
        for i in range(0, len(body), 100):
            req += b"%x\r\n%s\r\n" % (len(body[i:i + 100]), body[i:i + 100])
        req += b"0\r\n\r\n"
        c = socket.create_connection(("127.0.0.1", ng.port), timeout=CEILING_S)
        try:
            c.sendall(req)
            answer = b""
            while True:
                got = c.recv(65536)
                if not got:
                    break
                answer += got
            if not answer.startswith(b"HTTP/1.1 200"):
                fail("a chunked request: %r" % answer[:200])
            s = ng.get_status()
            got = outcomes()
            active = sum(r["active_requests"] for r in s["ranks"])
            if active != 0 or len(got) != 2 or got[1][7] != 0:
                fail("a response read whole, its connection still open: %d requests "
                     "active, outcomes %r (finished, not failed, expected)" % (active, got))
        finally:
            c.close()
        print("audit: a request finished when its response ended, before the client "
              "closed the connection")
    finally:
        ng.stop()


def main():
    if len(sys.argv) not in (9, 11):
        fail(__doc__)
    case = sys.argv[1]
    args = sys.argv[2:]
    if case == "isolated":
        case_isolated(args)
    else:
        {"route": case_route, "refused": case_refused, "switches": case_switches,
         "kill": case_kill, "outcomes": case_outcomes,
         "fail_timeout": case_fail_timeout, "audit": case_audit}[case](args[:7])
    print("PASS")


if __name__ == "__main__":
    main()
