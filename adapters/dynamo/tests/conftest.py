# SPDX-License-Identifier: Apache-2.0
"""Fixtures: the installed wsel plugins (WSEL_PLUGIN_DIR), and a Dynamo
deployment on loopback: CPU mocker engines, the wsel-dynamo component and
Dynamo's frontend, with file discovery, the TCP request plane and the ZMQ
event plane (no NATS, no etcd). Skipped with a message when ai-dynamo is
not installed."""
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

MODEL = "mock"
BLOCK = 16
WORKERS = 2
DP = 2
DEADLINE_S = 90.0


@pytest.fixture(scope="session")
def plugin_dir() -> str:
    d = os.environ.get("WSEL_PLUGIN_DIR")
    if not d or not os.path.isdir(d):
        pytest.skip("WSEL_PLUGIN_DIR (the installed plugins) is not set")
    return d


def need_dynamo():
    try:
        import dynamo.llm  # noqa: F401
    except ImportError as e:
        pytest.skip(f"ai-dynamo is not installed ({e}); scripts/install-peers.sh installs it")


def unused_port(below: int = 65536) -> int:
    """A free loopback port; ``below`` bounds it (Dynamo reads
    DYN_SYSTEM_PORT as an i16, so its system server needs one < 32768)."""
    for _ in range(200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 0 if below > 65535 else random.randrange(20000, below)))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free port")


def deadline(what: str, seconds: float = DEADLINE_S):
    """Yield until the caller breaks; fail after ``seconds``."""
    end = time.monotonic() + seconds
    delay = 0.05
    while time.monotonic() < end:
        yield
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    pytest.fail(f"timed out waiting for {what}")


def http(port: int, path: str, body=None, timeout: float = 30.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Deployment:
    """The processes and their ports; :meth:`stop` ends them by PID."""

    def __init__(self, work: str, plugins: str) -> None:
        from wsel_dynamo.model import write_model

        self.work = work
        self.model = write_model(os.path.join(work, "model"))
        self.frontend_port = unused_port()
        self.control_port = unused_port(below=32768)
        self.env = dict(os.environ,
                        DYN_FILE_KV=os.path.join(work, "discovery"), HF_HUB_OFFLINE="1",
                        DYN_DISCOVERY_BACKEND="file", DYN_REQUEST_PLANE="tcp",
                        DYN_EVENT_PLANE="zmq", DYN_TCP_RPC_HOST="127.0.0.1",
                        DYN_EVENT_PLANE_HOST="127.0.0.1", DYN_SYSTEM_HOST="127.0.0.1",
                        DYN_TCP_RESPONSE_STREAM_HOST="127.0.0.1", DYN_LOG="warn",
                        HOME=work)  # Dynamo caches model cards under ~/.cache
        self.procs = []
        self.plugins = plugins

    def start(self, name, args, **env):
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen([sys.executable] + args, env=dict(self.env, **env),
                             stdout=log, stderr=subprocess.STDOUT, cwd=self.work)
        self.procs.append((name, p, log.name))
        return p

    def start_all(self, policy: str, config: str, speedup: str = "10"):
        self.start("mocker", ["-m", "dynamo.mocker", "--model-path", self.model,
                              "--model-name", MODEL, "--num-workers", str(WORKERS),
                              "--data-parallel-size", str(DP), "--block-size", str(BLOCK),
                              "--speedup-ratio", speedup,
                              "--endpoint", "dyn://pool.mocker.generate"])
        self.adapter = self.start(
            "adapter", ["-m", "wsel_dynamo", "--workers", "pool.mocker.generate",
                        "--namespace", "wsel", "--model-path", self.model, "--model-name", MODEL,
                        "--block-size", str(BLOCK), "--policy", policy, "--policy-config", config],
            DYN_SYSTEM_PORT=str(self.control_port))
        self.start("frontend", ["-m", "dynamo.frontend", "--http-host", "127.0.0.1",
                                "--http-port", str(self.frontend_port), "--router-mode",
                                "round-robin", "--namespace", "wsel"])

    def check_alive(self):
        for name, p, log in self.procs:
            if p.poll() is not None:
                with open(log) as f:
                    pytest.fail(f"{name} exited with {p.returncode}:\n{f.read()[-3000:]}")

    def wait_ready(self, prompt):
        """Until the frontend serves the model and the adapter sees every rank."""
        for _ in deadline("the frontend to list the model"):
            self.check_alive()
            try:
                if any(m["id"] == MODEL for m in http(self.frontend_port, "/v1/models")["data"]):
                    break
            except (OSError, ValueError):
                pass
        for _ in deadline(f"the adapter to see {WORKERS * DP} ranks"):
            self.check_alive()
            try:
                if len(self.ranks(prompt)) == WORKERS * DP:
                    return
            except (OSError, ValueError):
                pass

    def control(self, route, body):
        return http(self.control_port, "/engine/wsel/" + route, body)

    def ranks(self, tokens):
        return self.control("ranks", {"token_ids": tokens})["ranks"]

    def complete(self, tokens, max_tokens=4):
        return http(self.frontend_port, "/v1/completions",
                    {"model": MODEL, "prompt": tokens, "max_tokens": max_tokens})

    def stop(self):
        for _, p, _ in self.procs:
            if p.poll() is None:
                p.terminate()
        for name, p, _ in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, plugin_dir):
    need_dynamo()
    d = Deployment(str(tmp_path_factory.mktemp("dynamo")), plugin_dir)
    try:
        d.start_all(os.path.join(plugin_dir, "softmax.so"), '{"temperature": 0}')
        d.wait_ready(list(range(1000, 1000 + 2 * BLOCK)))
        yield d
    finally:
        d.stop()
