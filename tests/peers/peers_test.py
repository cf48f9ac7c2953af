# SPDX-License-Identifier: Apache-2.0
"""peers_test.py SOURCE_DIR WSEL_ENGINE WSEL WORKDIR -- a peer router (SMG,
scripts/install-peers.sh) in front of two wsel-engines routes a few
requests that `wsel replay --prompt text` sends, so that scripts/peers.sh
cannot rot unseen: SMG accepts the engines as workers, every request
succeeds with the engine counting exactly the trace's prompt tokens, and
cache_aware sends requests that share a prefix where it is cached. Exits 77
(skipped) when SMG is not installed. Only 127.0.0.1.
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                "support"))
from engines import (Engine, deadline_loop, fail, post_json,  # noqa: E402
                     start_process, stop_process, unused_port)

MODEL = "wsel-engine"


def start_smg(smg, workdir, engines):
    """SMG's cache_aware on free ports (retried if another process took
    one first); returns (process, port) once it routes a request."""
    for attempt in range(3):
        port = unused_port()
        log = open(os.path.join(workdir, "smg-%d.log" % attempt), "w")
        proc = start_process(
            [smg, "launch", "--host", "127.0.0.1", "--port", str(port),
             "--prometheus-host", "127.0.0.1", "--prometheus-port", str(unused_port()),
             "--worker-urls"] + [e.url for e in engines] +
            ["--policy", "cache_aware", "--disable-tokenizer-autoload", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT)
        for _ in deadline_loop("SMG to route a request"):
            if proc.poll() is not None:
                break
            try:
                status, _ = post_json(port, "/v1/completions",
                                      {"model": MODEL, "prompt": "1 2 3", "max_tokens": 1})
            except OSError:
                continue
            if status == 200:
                return proc, port
        stop_process(proc)
        with open(log.name) as f:
            tail = f.read()[-1500:]
        if "Address already in use" not in tail:
            fail("SMG exited with %s:\n%s" % (proc.returncode, tail))
    fail("SMG: no free port after 3 tries")


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    source, engine_exe, wsel, workdir = sys.argv[1:]
    venv = os.environ.get("PEERS_VENV", os.path.join(source, ".peers", "venv"))
    smg = os.path.join(venv, "bin", "smg")
    if not os.access(smg, os.X_OK):
        print("SKIP: SMG is not installed in %s (scripts/install-peers.sh)" % venv)
        return 77
    os.makedirs(workdir, exist_ok=True)
    engines = [Engine(engine_exe, workdir, "e%d" % i, ["--time-scale", "100"])
               for i in range(2)]
    proc = None
    try:
        proc, port = start_smg(smg, workdir, engines)
        trace = os.path.join(workdir, "trace.jsonl")
        with open(trace, "w") as f:
            for i, tail in enumerate([3, 4, 5, 6]):
                f.write(json.dumps({"timestamp": 1000 * i, "input_length": 1536,
                                    "output_length": 4, "hash_ids": [1, 2, tail]}) + "\n")
        out = os.path.join(workdir, "requests.jsonl")
        subprocess.run([wsel, "replay", "--url", "http://127.0.0.1:%d" % port, "--trace", trace,
                        "--prompt", "text", "--model", MODEL, "--concurrency", "1",
                        "--speedup", "100", "--timeout", "30", "--no-progress",
                        "--requests-out", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if len(rows) != 4 or not all(r["ok"] for r in rows):
            fail("requests through SMG failed: %s" % rows)
        if any(r["prompt_tokens"] != r["isl"] for r in rows):
            fail("a text prompt did not reach the engine as the trace's tokens: %s" % rows)
        cached = sum(r["cached_tokens"] for r in rows)
        if cached < 1024:
            fail("cache_aware found no cached prefix: %d tokens cached" % cached)
        print("peers: SMG routed 4 text requests to 2 wsel-engines, %d prompt tokens "
              "cached" % cached)
    finally:
        if proc:
            stop_process(proc)
        for e in engines:
            e.stop()
    print("PASS smg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
