#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_tokenizer_test.py -- wsel_tokenizer: text and chat routed precisely.

usage: nginx_tokenizer_test.py CASE NGINX MODULE WSEL_ENGINE WSEL PLUGINS FIXTURES
                               WORKDIR MODEL_DIR

MODEL_DIR is a model's tokenizer folder (tokenizer.json,
tokenizer_config.json with a chat template) from third_party/, installed
by scripts/install-tokenizer-deps.sh. Skipped (77) with a message when it
is missing or the module was built without libwsel-tokenizer.

Cases:
  route    two wsel-engines (--dp 2, KV events, --tokenizer MODEL_DIR) behind
           nginx with `wsel_tokenizer MODEL_DIR;` and the softmax policy at
           temperature 0. A chat conversation with a long system prompt,
           then its second turn: the second lands on the rank that
           served the first (the status's per-rank routed counters), with
           the first's full blocks predicted cached (overlap_blocks) and
           the engine reporting them cached (cached_tokens); the same for a
           /v1/completions text prompt and its continuation. The status
           counts the tokenized prompts (tokenized_text, tokenized_chat)
           and as many ids as the engines counted (usage.prompt_tokens),
           the second chat request's system prompt came from the prefix
           cache (tokenize_cache_hits, tokenize_cache_tokens), and a text
           prompt the tokenizer refuses (a lone surrogate) moves
           tokenize_fallbacks and is still routed.
  refused  nginx -t refuses a malformed tokenizer.json with the file:line
           of the directive and the reason; the same change by a reload
           (SIGHUP to the master) is refused and the running worker keeps
           serving.

Only 127.0.0.1; every wait is for a condition under a ceiling.
"""
import os
import shutil
import signal
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "support"))
sys.path.insert(0, HERE)
from engines import BLOCK, Engine, deadline_loop, fail, post_json  # noqa: E402
import nginx_test  # noqa: E402

SKIP = 77
PROMPT_TOKENS = []  # the engine's usage.prompt_tokens of each routed request


class TokNginx(nginx_test.Nginx):
    """nginx_test's nginx with wsel_tokenizer in the upstream (and text
    prompts read): its configuration rewritten after each write."""

    tokenizer = None

    def write_conf(self, *args, **kwargs):
        super().write_conf(*args, **kwargs)
        with open(self.conf) as f:
            text = f.read()
        text = text.replace("        wsel_prompt tokens;\n",
                            "        wsel_tokenizer %s;\n" % self.tokenizer)
        with open(self.conf, "w") as f:
            f.write(text)


def words(seed, n):
    """n words of deterministic prose."""
    vocab = ("the router reads every prompt and hashes its blocks so that a "
             "request lands where its prefix is cached already while load "
             "stays even across ranks engines publish events").split()
    out, x = [], seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(vocab[x % len(vocab)])
    return " ".join(out)


def start(args, model):
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    os.makedirs(workdir, exist_ok=True)
    engines = [Engine(engine, workdir, "engine%d" % i,
                      ["--dp", "2", "--time-scale", "50", "--kv-blocks", "4096",
                       "--quiet", "--kv-events", "tcp://127.0.0.1:0",
                       "--tokenizer", model])
               for i in range(2)]
    ng = TokNginx(nginx, module, workdir, engines)
    ng.tokenizer = model
    return ng


def routed_rank(before, after):
    """The one (server, dp_rank) whose routed counter moved by one."""
    moved = [(a["server"], a["dp_rank"]) for b, a in zip(before["ranks"], after["ranks"])
             if a["routed"] != b["routed"]]
    if len(moved) != 1:
        fail("expected one rank routed, got %r" % moved)
    return moved[0]


def send(ng, path, body):
    """One request: (its rank, the status delta of `keys`, the response)."""
    before = ng.get_status()
    st, data = post_json(ng.port, path, body)
    if st != 200:
        fail("%s: %d %s" % (path, st, data[:300]))
    after = ng.get_status()
    answer = nginx_test.json.loads(data)
    PROMPT_TOKENS.append(answer["usage"]["prompt_tokens"])
    return routed_rank(before, after), before, after, answer


def repeated(ng, path, first, second, what):
    """first, then (once its blocks are in the index) second, which extends
    it: the second must go to the first's rank with its blocks cached."""
    rank1, before, _, r1 = send(ng, path, first)
    prompt1 = r1["usage"]["prompt_tokens"]
    full = prompt1 // BLOCK
    if full < 4:
        fail("%s: the first prompt has %d tokens, too few" % (what, prompt1))

    def held(s):
        return [r["cached_blocks"] for r in s["ranks"]
                if (r["server"], r["dp_rank"]) == rank1][0]
    for _ in deadline_loop("%s: the first prompt's blocks in the index" % what):
        if held(ng.get_status()) >= held(before) + full:
            break
    rank2, b, a, r2 = send(ng, path, second)
    overlap = a["overlap_blocks"] - b["overlap_blocks"]
    cached = r2["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    print("%s: first %d tokens on %s, second %d tokens on %s, %d blocks predicted "
          "cached, engine cached %d tokens"
          % (what, prompt1, rank1, r2["usage"]["prompt_tokens"], rank2, overlap, cached))
    if rank2 != rank1:
        fail("%s: the second request went to %s, not %s" % (what, rank2, rank1))
    if overlap < full - 1 or cached < (full - 1) * BLOCK:
        fail("%s: %d blocks predicted cached and %d tokens cached by the engine, "
             "expected about %d blocks" % (what, overlap, cached, full))


def case_route(args, model):
    ng = start(args, model)
    try:
        ng.write_conf(os.path.join(args[4], "softmax.so"), config='{"temperature": 0.0}')
        ng.start()
        nginx_test.wait_subscribed(ng)
        system = {"role": "system", "content": "You are terse. " + words(1, 700)}
        turn1 = [system, {"role": "user", "content": words(2, 40)}]
        turn2 = turn1 + [{"role": "assistant", "content": words(3, 20)},
                         {"role": "user", "content": words(4, 30)}]
        repeated(ng, "/v1/chat/completions",
                 {"messages": turn1, "max_tokens": 2},
                 {"messages": turn2, "max_tokens": 2}, "chat")
        text = words(5, 900)
        repeated(ng, "/v1/completions", {"prompt": text, "max_tokens": 2},
                 {"prompt": text + " and then " + words(6, 50), "max_tokens": 2}, "text")

        # a third conversation with the same system prompt: cached too
        send(ng, "/v1/chat/completions",
             {"messages": [system, {"role": "user", "content": words(7, 25)}],
              "max_tokens": 2})
        s = ng.get_status()
        print("status: tokenized_chat %d, tokenized_text %d, tokens %d, cache hits %d "
              "misses %d tokens %d, fallbacks %d"
              % (s["tokenized_chat"], s["tokenized_text"], s["tokenized_tokens"],
                 s["tokenize_cache_hits"], s["tokenize_cache_misses"],
                 s["tokenize_cache_tokens"], s["tokenize_fallbacks"]))
        if (s["tokenized_chat"], s["tokenized_text"], s["tokenize_fallbacks"]) != (3, 2, 0):
            fail("tokenized counts: %r" % s)
        if s["tokenized_tokens"] != sum(PROMPT_TOKENS):
            fail("the module's ids (%d) are not the engine's (%d)"
                 % (s["tokenized_tokens"], sum(PROMPT_TOKENS)))
        if s["tokenize_cache_misses"] != 1 or s["tokenize_cache_hits"] != 2 \
                or s["tokenize_cache_tokens"] < 2 * 700:
            fail("prefix cache: %r" % s)

        # a prompt the tokenizer refuses: hashed as text, counted, routed
        before = ng.get_status()
        post_json(ng.port, "/v1/completions",
                  '{"prompt": "half a pair \\ud800 of surrogates", "max_tokens": 2}')
        after = ng.get_status()
        if after["tokenize_fallbacks"] != before["tokenize_fallbacks"] + 1 \
                or after["routes"] != before["routes"] + 1:
            fail("a refused prompt: fallbacks %d -> %d, routes %d -> %d"
                 % (before["tokenize_fallbacks"], after["tokenize_fallbacks"],
                    before["routes"], after["routes"]))
    finally:
        ng.stop()


def case_refused(args, model):
    workdir = args[6]
    ng = start(args, model)
    try:
        bad = os.path.join(workdir, "bad-model")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(model, bad)
        with open(os.path.join(model, "tokenizer.json")) as f:
            head = f.read(4000)
        with open(os.path.join(bad, "tokenizer.json"), "w") as f:
            f.write(head)  # cut short: not JSON
        softmax = os.path.join(args[4], "softmax.so")
        ng.write_conf(softmax)
        ng.start()
        good_pid = ng.get_status()["worker_pid"]

        ng.tokenizer = bad
        ng.write_conf(softmax)
        p = ng.test_conf()
        out = p.stdout.decode()
        line = [i + 1 for i, x in enumerate(open(ng.conf)) if "wsel_tokenizer" in x][0]
        where = "%s:%d" % (ng.conf, line)
        if p.returncode == 0 or "malformed tokenizer file" not in out or where not in out:
            fail("nginx -t with a malformed tokenizer.json (want the reason and %s): %s"
                 % (where, out))
        print("nginx -t: %s" % [x for x in out.splitlines() if "wsel_tokenizer" in x][0])

        # the master told to reload (nginx -s reload would refuse to send it)
        log_before = len(ng.log())
        os.kill(ng.proc.pid, signal.SIGHUP)
        for _ in deadline_loop("the reload's refusal in the error log"):
            if "malformed tokenizer file" in ng.log()[log_before:]:
                break
        ng.check_running()
        st, _ = post_json(ng.port, "/v1/completions", {"prompt": words(8, 50),
                                                       "max_tokens": 2})
        if st != 200 or ng.get_status()["worker_pid"] != good_pid:
            fail("after a refused reload: status %d, worker %r (was %r)"
                 % (st, ng.get_status()["worker_pid"], good_pid))
    finally:
        ng.stop()


def skip_reason(args, model):
    if not os.path.isfile(os.path.join(model, "tokenizer.json")):
        return ("no tokenizer files at %s (scripts/install-tokenizer-deps.sh installs "
                "them)" % model)
    probe = TokNginx(args[0], args[1], os.path.join(args[6], "probe"), [])
    probe.tokenizer = model
    probe.write_conf("builtin")
    out = probe.test_conf().stdout.decode()
    if "built without libwsel-tokenizer" in out:
        return "the module was built without libwsel-tokenizer"
    return None


def main():
    if len(sys.argv) != 10:
        fail(__doc__)
    case, args, model = sys.argv[1], sys.argv[2:9], sys.argv[9]
    why = skip_reason(args, model)
    if why:
        print("SKIP: %s" % why)
        sys.exit(SKIP)
    {"route": case_route, "refused": case_refused}[case](args, model)
    print("PASS")


if __name__ == "__main__":
    main()
