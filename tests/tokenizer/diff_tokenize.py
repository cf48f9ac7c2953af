#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""diff_tokenize.py -- libwsel-tokenizer against the Python reference.

For each model folder: PROMPTS deterministic text prompts (prose, code,
CJK, emoji, combining marks, edge code points, long words, whitespace
runs, special-token strings) must get ids identical to the `tokenizers`
package's, and CHATS deterministic chat requests (multi-turn, system
prompts, tool calls where the template takes them) renderings identical
to `transformers`' apply_chat_template and ids identical to the rendering
encoded without added special tokens; a template error must be an error
on both sides. Bytes that are not UTF-8 must be refused (EUTF8).

Usage: diff_tokenize.py WSEL_TOKENIZE MODEL_DIR... [--prompts N] [--chats N]
Runs offline (HF_HUB_OFFLINE=1): models load from their folders only.
Exit 0 when there is no difference; prints the first differences and the
seed-free case index otherwise (generation is deterministic).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import tokenizers  # noqa: E402
import transformers  # noqa: E402

EUTF8 = -6

WORDS = ("the quick brown fox jumps over lazy dog router worker cache prefix "
         "block token latency throughput Über naïve café résumé façade "
         "don't can't it's we'll I'm 1234 3.14159 0x1F 1e-9 $100 50% "
         "email@example.com https://example.org/a?b=c&d=e #tag @user").split()
CODE = ["def f(x):\n    return x * 2\n", "int main(void) {\n\treturn 0;\n}\n",
        "for (i = 0; i < n; i++) { a[i] += b[i]; }", "SELECT * FROM t WHERE id = 42;",
        "const x = () => ({ a: 1, b: [2, 3] });", "#include <stdio.h>\n",
        "if x is not None and len(x) > 0:\n        pass", "fn main() { println!(\"{}\", 1); }",
        "    \n\t\t}\n", "<div class=\"a\">&amp;&lt;</div>", "x=y+z;//comment", "a\\nb\\t"]
EMOJI = ["🙂", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "🤖", "🧑🏿‍💻", "1️⃣", "©", "™"]
SCRIPTS = [(0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x0400, 0x04FF),
           (0x0600, 0x06FF), (0x0590, 0x05FF), (0x0900, 0x097F), (0x0E00, 0x0E7F),
           (0x0370, 0x03FF), (0x20000, 0x2A6DF)]
EDGE = ["\ufffd", "\ufeff", "\u200b", "\u200d", "\U0010ffff", "\ue000", "\ud7ff",
        "\ufffe", "\uffff", "\x00", "\x01", "\x1f", "\x7f", "\x85", "\u2028", "\u2029",
        "\u00a0", "\u3000", "\u0300", "\u202e", "\U0001f3fb", "\xff", "\u0080"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\n\n\n", "\u00a0", "\u3000", " \t ", "\r"]


def special_strings(tok):
    """The model's special tokens as text, plus a few other families'."""
    added = [t.content for t in tok.get_added_tokens_decoder().values()]
    return added[:40] + ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>",
                         "<|begin_of_text|>", "[INST]", "<<SYS>>", "<|eot_id|>"]


def piece(rng, kind, specials):
    if kind == "prose":
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60)))
    if kind == "code":
        return "".join(rng.choice(CODE) for _ in range(rng.randint(1, 6)))
    if kind == "script":
        lo, hi = rng.choice(SCRIPTS)
        return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 80)))
    if kind == "emoji":
        return "".join(rng.choice(EMOJI + [" ", "a"]) for _ in range(rng.randint(1, 30)))
    if kind == "combining":
        return "".join(rng.choice("aeiouAZ") + "".join(chr(rng.randint(0x300, 0x36F))
                       for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(1, 30)))
    if kind == "edge":
        return "".join(rng.choice(EDGE + ["a", " "]) for _ in range(rng.randint(1, 20)))
    if kind == "longword":
        alphabet = rng.choice(["a", "ab", "xyz", "0123456789", "数", "é", "-", "_."])
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(50, 3000)))
    if kind == "spaces":
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 40)))
    return rng.choice(specials)  # "special"


KINDS = ["prose", "code", "script", "emoji", "combining", "edge", "longword", "spaces",
         "special"]


def prompts(n, specials, seed):
    rng = random.Random(seed)
    out = ["", " ", "a", "\n"]
    while len(out) < n:
        parts = [piece(rng, rng.choice(KINDS), specials) for _ in range(rng.randint(1, 5))]
        out.append(rng.choice(["", " "]).join(parts))
    return out


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web \"quoted\" & <escaped>?",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"},
                                                         "k": {"type": "number"}}}}}]


def text(rng, specials):
    return " ".join(piece(rng, rng.choice(KINDS[:6] + ["spaces"]), specials)
                    for _ in range(rng.randint(1, 3)))


def tool_call(rng, as_string):
    args = {"city": rng.choice(["Paris", "東京", "Zürich"]), "days": rng.randint(1, 9)}
    if rng.random() < 0.3:
        args["ratio"] = rng.choice([0.5, 1.0, 1e-7, 2.5e20])
    return {"id": "call_%d" % rng.randint(0, 999), "type": "function",
            "function": {"name": "get_weather",
                         "arguments": json.dumps(args) if as_string else args}}


def chat(rng, specials, tools_ok, string_args):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(rng, specials)})
    for _ in range(rng.randint(1, 4)):
        msgs.append({"role": "user", "content": text(rng, specials)})
        if tools_ok and rng.random() < 0.4:
            msgs.append({"role": "assistant", "content": "",
                         "tool_calls": [tool_call(rng, string_args)
                                        for _ in range(rng.randint(1, 2))]})
            msgs.append({"role": "tool", "content": json.dumps({"temp": rng.randint(-9, 30)})})
        msgs.append({"role": "assistant", "content": text(rng, specials)})
    if rng.random() < 0.7:
        msgs.append({"role": "user", "content": text(rng, specials)})
    req = {"messages": msgs, "add_generation_prompt": rng.random() < 0.8}
    if tools_ok and rng.random() < 0.5:
        req["tools"] = TOOLS[: rng.randint(1, 2)]
    if rng.random() < 0.3:
        req["chat_template_kwargs"] = {"enable_thinking": rng.random() < 0.5}
    return req


def reference_chat(hf, req):
    try:
        return hf.apply_chat_template(req["messages"], tools=req.get("tools"), tokenize=False,
                                      add_generation_prompt=req["add_generation_prompt"],
                                      **req.get("chat_template_kwargs", {}))
    except Exception:  # the template raised: the shim must refuse too
        return None


def run_driver(driver, model, records):
    blob = b"".join(k + struct.pack("<I", len(p)) + p for k, p in records)
    out = subprocess.run([driver, model, "--batch"], input=blob, capture_output=True,
                         check=True).stdout
    pos, answers = 0, []
    for kind, _ in records:
        (rc,) = struct.unpack_from("<i", out, pos)
        pos += 4
        if rc:
            answers.append((rc, None, None))
            continue
        rendering = None
        if kind == b"c":
            (n,) = struct.unpack_from("<I", out, pos)
            rendering = out[pos + 4:pos + 4 + n].decode()
            pos += 4 + n
        (n,) = struct.unpack_from("<I", out, pos)
        answers.append((0, rendering, list(struct.unpack_from("<%dI" % n, out, pos + 4))))
        pos += 4 + 4 * n
    return answers


def check_model(driver, model, n_prompts, n_chats):
    tok = tokenizers.Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    specials = special_strings(tok)
    texts = prompts(n_prompts, specials, seed=29)
    expect = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
    records = [(b"t", t.encode()) for t in texts]
    bad_utf8 = [b"\xff", b"a\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"ok\xf4\x90\x80\x80"]
    records += [(b"t", b) for b in bad_utf8]
    hf = transformers.AutoTokenizer.from_pretrained(model, local_files_only=True)
    reqs = []
    if hf.chat_template:
        rng = random.Random(1029)
        tools_ok = "tools" in hf.chat_template
        string_args = "arguments'] }}" in hf.chat_template or "arguments']}}" in hf.chat_template
        reqs = [chat(rng, specials, tools_ok, string_args) for _ in range(n_chats)]
    records += [(b"c", json.dumps(r).encode()) for r in reqs]
    got = run_driver(driver, model, records)
    diffs = []
    for i, t in enumerate(texts):
        if got[i] != (0, None, expect[i]):
            diffs.append("text %d %r: want %s got %s" % (i, t[:60], expect[i][:20], got[i]))
    for j, _ in enumerate(bad_utf8):
        if got[len(texts) + j][0] != EUTF8:
            diffs.append("bad utf-8 %d: want EUTF8 got %s" % (j, got[len(texts) + j]))
    refused = 0
    for j, req in enumerate(reqs):
        rc, rendering, ids = got[len(texts) + len(bad_utf8) + j]
        want = reference_chat(hf, req)
        refused += want is None
        if want is None:
            if rc == 0:
                diffs.append("chat %d: transformers raised, shim rendered %r" % (j, rendering[:80]))
            continue
        want_ids = tok.encode(want, add_special_tokens=False).ids
        if rendering != want or ids != want_ids:
            got_text = rendering or ""
            at = next((k for k, (a, b) in enumerate(zip(want, got_text)) if a != b),
                      min(len(want), len(got_text)))
            diffs.append("chat %d (rc %d) from byte %d:\n want %r\n got  %r" % (
                j, rc, at, want[max(0, at - 40):at + 80], got_text[max(0, at - 40):at + 80]))
    print("%s: %d prompts, %d invalid UTF-8, %d chats (%d refused by the template): %d differences"
          % (os.path.basename(os.path.dirname(model.rstrip("/"))) or model, len(texts),
             len(bad_utf8), len(reqs), refused, len(diffs)))
    for d in diffs[:5]:
        print("  " + d)
    return len(diffs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("driver")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--prompts", type=int, default=10000)
    ap.add_argument("--chats", type=int, default=1000)
    a = ap.parse_args()
    failed = sum(check_model(a.driver, m, a.prompts, a.chats) > 0 for m in a.models)
    print("%d passed, %d failed" % (len(a.models) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
