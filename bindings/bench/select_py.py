# SPDX-License-Identifier: Apache-2.0
"""select_py.py PLUGIN ROWS ITERATIONS -- Host.select through the Python
binding, each call timed with time.perf_counter_ns; prints
"python p50_ns p99_ns" (bindings/bench/run.sh)."""
import sys
import time

import wsel


def main() -> None:
    plugin, rows, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with wsel.Host() as host:
        host.switch(plugin)
        ranks = [wsel.RankState(i, active_blocks=(i * 7919) % 1000) for i in range(rows)]
        req = host.request(1, 1024, block_size=64)
        table = wsel.Table(rows).build(req, ranks)
        select, clock = host.select, time.perf_counter_ns
        for _ in range(iters // 10):
            select(req, table)
        ns = []
        for _ in range(iters):
            t0 = clock()
            select(req, table)
            ns.append(clock() - t0)
        ns.sort()
        print(f"python {ns[iters // 2]} {ns[iters * 99 // 100]}")


if __name__ == "__main__":
    main()
