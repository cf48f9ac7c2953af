# SPDX-License-Identifier: Apache-2.0
"""route.py PLUGIN_DIR -- route two requests with the bundled softmax policy
through libwsel-router, then select on a table of its own
(docs/integrations.md)."""
import sys
import wsel

plugins = sys.argv[1]  # <prefix>/lib/wsel/plugins
with wsel.Host(seed=42) as host:
    host.switch(f"{plugins}/softmax.so", '{"temperature": 0}')
    with wsel.Router(host, block_size=16) as router:
        router.add_worker(1, "127.0.0.1:8001", dp_size=2)
        router.add_worker(2, "127.0.0.1:8002")
        prompt = list(range(128))                    # token ids
        res = router.route(prompt)
        print("to", res.address, "rank", res.dp_rank, "cached", res.overlap_blocks)
        router.first_token(res.request_id)
        router.finished(res.request_id, output_tokens=32)
        again = router.route(prompt)                 # the prefix is cached there now
        print("again", again.address, "rank", again.dp_rank, "cached", again.overlap_blocks)
        router.finished(again.request_id)
        print(router.counters().routes, "routes;", host.counters().plugin_answers, "plugin answers")

    # Or without the router: your own table of ranks, the host selects.
    req = host.request(request_id=7, isl_tokens=512, block_size=16)
    table = wsel.Table(8).build(req, [wsel.RankState(1, 0, active_blocks=30),
                                      wsel.RankState(1, 1, active_blocks=2)])
    choice = host.select(req, table)
    print("row", choice.row, "worker", choice.worker_id, "rank", choice.dp_rank,
          "reason", choice.reason, "score", choice.score)
