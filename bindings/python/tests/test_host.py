# SPDX-License-Identifier: Apache-2.0
import os
import threading

import pytest

import wsel
from conftest import RANKS


def softmax(plugin_dir):
    return os.path.join(plugin_dir, "softmax.so")


def test_builtin_policy_answers_before_any_switch(host):
    req = host.request(1, 256, block_size=16)
    choice = host.select(req, wsel.Table(4).build(req, RANKS))
    assert host.policy_name == "builtin"
    assert choice.fallback and (choice.worker_id, choice.dp_rank) == (11, 0)
    assert host.counters().fallback_by_reason == {"no_policy": 1}


def test_switch_by_path_with_config_makes_the_plugin_answer(host, plugin_dir):
    host.switch(softmax(plugin_dir), '{"temperature": 0}')
    assert host.policy_name == "softmax"
    req = host.request(2, 256, block_size=16)
    table = wsel.Table(4).build(req, RANKS)
    choice = host.select(req, table)
    assert choice.answer == wsel.ANSWER_PLUGIN and choice.row == 2
    assert table.worker(choice.row) == (11, 0)
    c = host.counters()
    assert (c.selects, c.plugin_answers, c.switches) == (1, 1, 1)


def test_select_explains_its_answer(host, plugin_dir):
    host.switch(softmax(plugin_dir))
    req = host.request(3, 256, block_size=16)
    table = wsel.Table(4).build(req, RANKS)
    choice = host.select(req, table)
    assert choice.reason == 1  # WSEL_REASON_CHEAPEST at temperature 0
    assert choice.score == pytest.approx(table.cost(choice.row))
    assert host.counters().answers_by_reason[1] == 1


def test_refused_switch_raises_the_hosts_message_and_keeps_the_policy(host, plugin_dir):
    host.switch(softmax(plugin_dir))
    with pytest.raises(wsel.WselError) as exc:
        host.switch(softmax(plugin_dir), '{"no_such_key": 1}')
    assert exc.value.name == "WSEL_ECONFIG" and "no_such_key" in exc.value.message
    with pytest.raises(wsel.WselError) as exc:
        host.switch(os.path.join(plugin_dir, "missing.so"))
    assert "missing.so" in str(exc.value)
    assert host.policy_name == "softmax"
    assert host.counters().failed_switches == 2


def test_every_row_excluded_raises_no_candidate(host):
    req = host.request(4, 64)
    ranks = [wsel.RankState(1, 0, flags=wsel.ROW_EXCLUDED)]
    with pytest.raises(wsel.WselError) as exc:
        host.select(req, wsel.Table(1).build(req, ranks))
    assert exc.value.name == "WSEL_ENOCANDIDATE"


def test_table_out_of_order_names_the_row(host):
    req = host.request(5, 64)
    with pytest.raises(wsel.WselError) as exc:
        wsel.Table(2).build(req, [wsel.RankState(2), wsel.RankState(1)])
    assert exc.value.name == "WSEL_ETABLE" and "ranks[1]" in exc.value.message


def test_requests_are_reproducible_from_seed_and_id():
    with wsel.Host(seed=3) as a, wsel.Host(seed=3) as b:
        assert a.request(9, 64).uniform == b.request(9, 64).uniform
        assert a.request(9, 64).uniform != a.request(10, 64).uniform


def test_outcomes_and_finishes_reach_the_policy_without_error(host, plugin_dir):
    host.switch(softmax(plugin_dir))
    req = host.request(6, 64)
    choice = host.select(req, wsel.Table(4).build(req, RANKS))
    host.request_finished(6, choice.worker_id, choice.dp_rank)
    host.request_outcome(wsel.Outcome(6, choice.worker_id, choice.dp_rank,
                                      ttft_us=900, e2e_us=5000, output_tokens=20))
    host.topology_changed(wsel.Table(4).build(req, RANKS))


def test_pipeline_children_are_listed(host, plugin_dir):
    host.switch(os.path.join(plugin_dir, "pipeline.so"),
                '{"scorers": [{"path": "%s"}]}' % softmax(plugin_dir))
    names = [c.name for c in host.child_counters()]
    assert "softmax" in names


def test_threads_select_while_the_policy_switches(host, plugin_dir):
    host.switch(softmax(plugin_dir))
    errors = []

    def worker(base):
        table = wsel.Table(4)
        try:
            for i in range(300):
                req = host.request(base + i, 256, block_size=16)
                assert host.select(req, table.build(req, RANKS)).row == 2
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for _ in range(5):
        host.switch(softmax(plugin_dir), '{"temperature": 0}')
    for t in threads:
        t.join()
    assert not errors
    assert host.counters().selects == 1200


def test_closed_host_refuses_calls():
    h = wsel.Host()
    h.close()
    h.close()  # harmless
    with pytest.raises(wsel.WselError):
        h.request(1, 64)


def test_the_libraries_loaded_are_the_installed_ones():
    prefix = os.environ.get("WSEL_PREFIX")
    if not prefix:
        pytest.skip("WSEL_PREFIX (the installed prefix) is not set")
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "libwsel-" in line}
    names = {os.path.basename(p) for p in libs}
    assert {"libwsel-host.so.1.0.0", "libwsel-router.so.1.0.0"} <= names, libs
    real = os.path.realpath(prefix)
    assert all(os.path.realpath(p).startswith(real + os.sep) for p in libs), libs
