#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_metrics_test.py -- the status location's two formats and what
reads them.

usage: nginx_metrics_test.py CASE NGINX MODULE WSEL_ENGINE WSEL PLUGINS FIXTURES WORKDIR

Cases (nginx and two wsel-engines as tests/nginx/nginx_test.py starts them,
softmax as the policy, a replayed workload, a request without a usable
prompt, one refused and one accepted admin switch):
  lists     every entry of nginx/ngx_http_wsel_metrics.h's lists is in the
            JSON and in the Prometheus text with the same value (figures
            read once the status stands still), every JSON figure and every
            Prometheus family comes from a list, the histograms and the
            per-rank counters add up to the routes, and every metric that
            nginx/grafana/wsel-dashboard.json queries is in the text
  promtool  `promtool check metrics` finds nothing in the Prometheus text;
            exits 77 (CTest's skip) when promtool is not installed
"""
import decimal
import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nginx_test import complete, replay, start_all, wait_policy  # noqa: E402
from engines import CEILING_S, deadline_loop, fail, http_request  # noqa: E402

SOURCE = os.path.join(HERE, os.pardir, os.pardir)
HEADER = os.path.join(SOURCE, "nginx", "ngx_http_wsel_metrics.h")
DASHBOARD = os.path.join(SOURCE, "nginx", "grafana", "wsel-dashboard.json")
SKIP = 77
# the JSON's figures that are no metric, and the one family that is no list's
IDENTITY = {"upstream", "policy", "policy_path", "last_switch_error", "isolated",
            "kv_source", "kv_threads", "prompt", "token_reader", "block_size",
            "worker_pid", "ranks"}
INFO_FAMILY = "wsel_policy_info"


def macro_body(text, name):
    """The text of `#define NAME(X)` with its continuations joined."""
    m = re.search(r"#define %s\(X\)((?:.*\\\n)+.*)" % name, text)
    if not m:
        fail("%s has no list %s" % (HEADER, name))
    return m.group(1).replace("\\\n", " ")


def read_lists():
    """The header's lists: scalars and ranks as (json, prom, type, unit),
    by-reason as (json, object, prom), histograms as (json, prom)."""
    text = open(HEADER).read()
    three = r'X\(\s*"([^"]*)",\s*"([^"]*)",\s*"([^"]*)",\s*(\w+)'
    scalars = re.findall(three, macro_body(text, "NGX_HTTP_WSEL_SCALARS"))
    ranks = [(j, p, t, "NGX_HTTP_WSEL_ONE") for j, p, t, _ in
             re.findall(r'X\(\s*"([^"]*)",\s*"([^"]*)",\s*"([^"]*)",\s*(")',
                        macro_body(text, "NGX_HTTP_WSEL_RANKS"))]
    reasons = re.findall(r'X\(\s*"([^"]*)",\s*"([^"]*)",\s*"([^"]*)"',
                         macro_body(text, "NGX_HTTP_WSEL_BY_REASON"))
    hists = re.findall(r'X\(\s*\w+,\s*"([^"]*)",\s*"([^"]*)"',
                       macro_body(text, "NGX_HTTP_WSEL_HISTOGRAMS"))
    if len(scalars) < 30 or len(ranks) < 10 or len(reasons) != 2 or len(hists) != 3:
        fail("the lists as read: %d scalars, %d rank figures, %d by reason, %d "
             "histograms" % (len(scalars), len(ranks), len(reasons), len(hists)))
    return scalars, ranks, reasons, hists


def parse_prometheus(text):
    """{(name, frozenset(labels)): value text} and {family: type}."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            fail("not a Prometheus sample: %r" % line)
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        samples[(m.group(1), labels)] = m.group(3)
    return samples, types


def prom_value(samples, name, **labels):
    key = (name, frozenset(dict(upstream="engines", **labels).items()))
    if key not in samples:
        fail("the Prometheus text lacks %s%r" % (name, labels))
    return decimal.Decimal(samples[key])


def as_json_unit(value, unit):
    """A Prometheus value in the JSON's unit (seconds back to nanoseconds)."""
    return value * 10 ** 9 if unit == "NGX_HTTP_WSEL_NS" else value


def traffic(args):
    """nginx with traffic behind it; the status, still, in both formats."""
    nginx, module, engine, wsel, plugins, fixtures, workdir = args
    softmax = os.path.join(plugins, "softmax.so")
    ng = start_all(args)
    ng.write_conf(softmax)
    ng.start()
    wait_policy(ng, "softmax")
    replay(wsel, ng.port, workdir, "metrics", 60)
    st, body = complete(ng.port, "a text prompt, unusable in token mode")
    if st != 200:
        fail("text prompt: %d %s" % (st, body[:200]))
    st, _ = ng.admin(os.path.join(plugins, "no-such-policy.so"))
    st2, _ = ng.admin(softmax)
    if (st, st2) != (409, 200):
        fail("admin switches: %d (409 expected), %d (200 expected)" % (st, st2))
    for _ in deadline_loop("the status to stand still"):
        before = ng.get_status()
        st, prom = http_request(ng.port, "GET", "/wsel/status?format=prometheus")
        if st != 200:
            fail("prometheus status: %d" % st)
        if ng.get_status() == before:
            if "the status was cut" in ng.log():
                fail("the status outgrew its buffer:\n%s" % ng.log())
            return ng, before, prom.decode()


def check_scalars(js, samples, scalars, reasons):
    for key, name, kind, unit in scalars:
        if not isinstance(js.get(key), int):
            fail("the JSON lacks %r: %r" % (key, js))
        v = as_json_unit(prom_value(samples, "wsel_" + name), unit)
        if v != js[key]:
            fail("%s: JSON %d, Prometheus %s" % (key, js[key], v))
    for key, obj, name in reasons:
        by = js.get(obj)
        if not isinstance(by, dict) or sum(by.values()) != js.get(key):
            fail("%s / %s: %r, %r" % (key, obj, js.get(key), by))
        for reason, n in by.items():
            if prom_value(samples, "wsel_" + name, reason=reason) != n:
                fail("%s{reason=%s}: JSON %d" % (name, reason, n))


def check_histograms(js, samples, hists):
    for key, name in hists:
        count = js[key + "_count"]
        if prom_value(samples, "wsel_%s_count" % name) != count:
            fail("%s_count differs" % key)
        if prom_value(samples, "wsel_%s_bucket" % name, le="+Inf") != count:
            fail("%s: +Inf bucket is not the count" % key)
        if prom_value(samples, "wsel_%s_sum" % name) * 10 ** 9 != js[key + "_ns_sum"]:
            fail("%s_sum differs" % key)
        if count == 0 or js[key + "_us_p50"] == 0:
            fail("%s: nothing observed: %r" % (key, js))
    # every routed request (the text prompt too) answered: one of each
    if not js["route_time_count"] == js["ttft_count"] == js["e2e_count"] == js["routes"]:
        fail("route, first-token and end counts differ from the routes: %r" % js)


def check_ranks(js, samples, ranks):
    total = {"routed": 0, "finished": 0, "engine_prompt_tokens": 0,
             "engine_cached_tokens": 0}
    for r in js["ranks"]:
        where = dict(server=r["server"], dp_rank=str(r["dp_rank"]))
        for key, name, kind, unit in ranks:
            if prom_value(samples, "wsel_" + name, **where) != r[key]:
                fail("rank %r: %s differs" % (where, key))
        for k in total:
            total[k] += r[k]
    if total["routed"] != js["routes"] or total["finished"] != js["routes"]:
        fail("the ranks' routed and finished %r, routes %d" % (total, js["routes"]))
    if total["engine_prompt_tokens"] != js["engine_prompt_tokens"] \
            or total["engine_cached_tokens"] != js["engine_cached_tokens"]:
        fail("the ranks' engine tokens %r, the upstream's %r" % (total, js))
    if not 0 < js["engine_cached_tokens"] <= js["engine_prompt_tokens"]:
        fail("engine tokens: %d cached of %d" % (js["engine_cached_tokens"],
                                                 js["engine_prompt_tokens"]))


def check_nothing_else(js, types, scalars, ranks, reasons, hists):
    """Every JSON figure and every Prometheus family comes from a list."""
    keys = set(k for k, *_ in scalars) | {k for r in reasons for k in r[:2]}
    keys |= {h + s for h, _ in hists for s in ("_count", "_ns_sum", "_us_p50")}
    extra = set(js) - keys - IDENTITY
    rank_extra = set(js["ranks"][0]) - {k for k, *_ in ranks} - {"server", "dp_rank"}
    families = {"wsel_" + p for _, p, *_ in scalars + ranks}
    families |= {"wsel_" + r[2] for r in reasons} | {"wsel_" + p for _, p in hists}
    prom_extra = set(types) - families - {INFO_FAMILY}
    if extra or rank_extra or prom_extra:
        fail("figures in no list: JSON %r, ranks %r, Prometheus %r"
             % (extra, rank_extra, prom_extra))
    for _, name, kind, _ in scalars + ranks:
        if types["wsel_" + name] != kind or (kind == "counter") != name.endswith("_total"):
            fail("wsel_%s: type %s" % (name, types["wsel_" + name]))


def dashboard_metrics():
    """Every wsel_* name the dashboard's queries use."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr" and isinstance(v, str):
                    found.update(re.findall(r"\bwsel_[a-zA-Z0-9_]+", v))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    with open(DASHBOARD) as f:
        walk(json.load(f))
    if len(found) < 10:
        fail("%s queries only %r" % (DASHBOARD, sorted(found)))
    return found


def case_lists(args):
    scalars, ranks, reasons, hists = read_lists()
    ng, js, prom = traffic(args)
    try:
        samples, types = parse_prometheus(prom)
        check_scalars(js, samples, scalars, reasons)
        check_histograms(js, samples, hists)
        check_ranks(js, samples, ranks)
        check_nothing_else(js, types, scalars, ranks, reasons, hists)
        names = {name for name, _ in samples}
        missing = dashboard_metrics() - names
        if missing:
            fail("the dashboard queries metrics the status lacks: %r" % sorted(missing))
        print("lists: %d scalars, %d by reason, %d histograms, %d rank figures x %d "
              "ranks in both formats; the dashboard's %d metrics exist"
              % (len(scalars), len(reasons), len(hists), len(ranks), len(js["ranks"]),
                 len(dashboard_metrics())))
        print("engines: %d of %d prompt tokens cached (router predicted %d of %d blocks)"
              % (js["engine_cached_tokens"], js["engine_prompt_tokens"],
                 js["overlap_blocks"], js["prompt_blocks"]))
    finally:
        ng.stop()


def case_promtool(args):
    promtool = shutil.which("promtool")
    if promtool is None:
        print("SKIP: promtool is not installed (Debian package prometheus; "
              "scripts/install-deps.sh installs it)")
        sys.exit(SKIP)
    ng, js, prom = traffic(args)
    try:
        p = subprocess.run([promtool, "check", "metrics"], input=prom.encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=CEILING_S)
        if p.returncode != 0 or p.stdout.strip():
            fail("promtool check metrics (exit %d):\n%s\non:\n%s"
                 % (p.returncode, p.stdout.decode(), prom))
        print("promtool: %d lines, no problem found" % len(prom.splitlines()))
    finally:
        ng.stop()


def main():
    if len(sys.argv) != 9 or sys.argv[1] not in ("lists", "promtool"):
        fail(__doc__)
    {"lists": case_lists, "promtool": case_promtool}[sys.argv[1]](sys.argv[2:])
    print("PASS")


if __name__ == "__main__":
    main()
