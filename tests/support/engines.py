# SPDX-License-Identifier: Apache-2.0
"""engines.py -- wsel-engine processes for the Python tests that drive them
(tests/engine, tests/nginx, tests/tools' replay_route_test.py).

Engine(exe, workdir, name, args) starts one wsel-engine on 127.0.0.1 with
--port 0: the engine binds a free port itself and names it, with its KV
event endpoints, in a port file it writes atomically, so no port is picked
here and none can be taken by another test between a choice and a bind.
The constructor returns once /health answers 200; every wait is for a
condition, polled with a growing pause under a ceiling, never for a fixed
time. HTTP helpers (http_request, post_json, get_json, Engine.metric) talk
to 127.0.0.1 only.

Every process started through start_process (engines, and whatever else a
test starts with it) is stopped and reaped by stop_process: by its owner's
`finally`, by the Engine constructor itself when the engine never becomes
ready, and at interpreter exit for any still running (a failure between two
starts, or SIGTERM, which is turned into an exit so that this runs).
fail() prints FAIL and exits 1 (SystemExit, so `finally` blocks run).
"""
import atexit
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

CEILING_S = 120  # what any single wait may take on a loaded machine
BLOCK = 64       # the engines' --block-size

_running = []    # processes started here and not yet reaped


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def deadline_loop(what, ceiling=CEILING_S):
    """Yield until the caller breaks (or returns); fail after `ceiling`
    seconds. The pause between tries grows from 10 ms to 200 ms."""
    end = time.monotonic() + ceiling
    delay = 0.01
    while time.monotonic() < end:
        yield
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    fail("gave up waiting for " + what)


def start_process(argv, **popen_kwargs):
    """subprocess.Popen, remembered until stop_process reaps it."""
    proc = subprocess.Popen(argv, **popen_kwargs)
    _running.append(proc)
    return proc


def stop_process(proc, kill=False):
    """SIGTERM (SIGKILL with kill=True, or when SIGTERM is not obeyed within
    the ceiling), then reap. Harmless on a process already reaped."""
    if proc.poll() is None:
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=CEILING_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in _running:
        _running.remove(proc)


def _stop_all():
    for proc in reversed(list(_running)):
        stop_process(proc)


atexit.register(_stop_all)
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def unused_port():
    """A loopback port nobody listens on now, which another process may
    take before the caller binds it: only for what cannot bind port 0 and
    say which port it got (nginx), and then with a retry. wsel-engine binds
    its own."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def refusing_socket():
    """A loopback socket bound and never listening: connections to its port
    are refused, and no other process can bind the port while it is open.
    The caller closes it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def http_request(port, method, path, body=None, headers=None):
    """One request to 127.0.0.1:PORT on a connection of its own: (status,
    body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=CEILING_S)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def post_json(port, path, obj, headers=None):
    """POST OBJ as JSON (bytes or str are sent as they are)."""
    body = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return http_request(port, "POST", path, body, h)


def get_json(port, path):
    """GET PATH's JSON document; ValueError unless it is answered 200."""
    status, data = http_request(port, "GET", path)
    if status != 200:
        raise ValueError("GET %s: status %d" % (path, status))
    return json.loads(data)


_SAMPLE = re.compile(r'([^\s{]+)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def prometheus_samples(text, name):
    """The samples of metric NAME in Prometheus text: [(labels, value)]."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            out.append((dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


class Engine:
    """A wsel-engine process on 127.0.0.1, ready (/health 200) when built.

    args are the options after --host, --port 0, --port-file and
    --block-size BLOCK. Attributes: proc, url ("http://127.0.0.1:P"), addr
    ("127.0.0.1:P"), port, lines (the port file, keyed by all its words but
    the last: ("http",), ("kv_events", "0"), ...), kv ({rank: endpoint} of
    its KV event publishers), log (its stdout and stderr, a file)."""

    def __init__(self, exe, workdir, name, args):
        self.name = name
        self.port_file = os.path.join(workdir, name + ".port")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.log = open(os.path.join(workdir, name + ".log"), "w")
        self.proc = None
        try:
            self.proc = start_process(
                [exe, "--host", "127.0.0.1", "--port", "0", "--port-file", self.port_file,
                 "--block-size", str(BLOCK)] + list(args),
                stdout=self.log, stderr=subprocess.STDOUT)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _exited(self):
        with open(self.log.name) as f:
            tail = f.read()[-2000:]
        fail("%s exited with %d (%s):\n%s" % (self.name, self.proc.returncode,
                                              self.log.name, tail))

    def _wait_ready(self):
        for _ in deadline_loop(self.name + "'s port file"):
            if self.proc.poll() is not None:
                self._exited()
            if os.path.exists(self.port_file):
                break
        self.lines = {}
        self.kv = {}
        with open(self.port_file) as f:
            for line in f.read().splitlines():
                parts = line.split()
                self.lines[tuple(parts[:-1])] = parts[-1]
                if parts[0] == "kv_events":
                    self.kv[int(parts[1])] = parts[2]
        self.url = self.lines[("http",)]
        self.addr = self.url[len("http://"):]
        self.port = int(self.addr.rsplit(":", 1)[1])
        for _ in deadline_loop(self.name + "'s /health"):
            if self.proc.poll() is not None:
                self._exited()
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass

    def request(self, method, path, body=None, headers=None):
        return http_request(self.port, method, path, body, headers)

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, obj, headers=None):
        return post_json(self.port, path, obj, headers)

    def get_json(self, path):
        return get_json(self.port, path)

    def metric(self, name):
        """The sum of metric NAME's samples on /metrics."""
        return sum(v for _, v in self.metric_samples(name))

    def metric_samples(self, name):
        status, data = self.get("/metrics")
        if status != 200:
            fail("%s: /metrics answered %d" % (self.name, status))
        return prometheus_samples(data.decode(), name)

    def stop(self):
        if self.proc:
            stop_process(self.proc)
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
