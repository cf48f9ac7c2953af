# SPDX-License-Identifier: Apache-2.0
"""The adapter: a wsel policy choosing the (worker, dp_rank) of each Dynamo
request, Dynamo's ``KvRouter`` doing everything else.

Per request: Dynamo's KV indexer (fed by the engines' KV events) and its
active-sequence tracker give each rank's overlap and load; they fill a wsel
table (:mod:`wsel_dynamo.ranks`); the live wsel policy selects a row; the
request goes to that worker and rank through ``KvRouter`` with explicit
routing hints (``backend_instance_id``, ``dp_rank``), which still updates
Dynamo's load accounting; when the stream ends, the outcome (TTFT,
end-to-end time, cached and output tokens, failure) goes to the policy.
The policy is switched by path while requests flow (:meth:`switch`).

Single event loop: ``choose`` builds and selects without awaiting between
the two, so one table buffer serves every request.
"""
from __future__ import annotations

import itertools
import json
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, AsyncIterator, Deque, Dict, List, Optional

import wsel

from .ranks import ranks_from_dynamo


@dataclass
class Decision:
    """One select: the table's rank states and wsel's answer."""
    request_id: int
    isl: int
    ranks: List[Dict[str, int]]
    worker_id: int
    dp_rank: int
    answer: int
    reason: int
    policy: str


def _usage(out: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    usage = out.get("completion_usage")
    return usage if isinstance(usage, dict) else None


def _cached(usage: Dict[str, Any]) -> Optional[int]:
    details = usage.get("prompt_tokens_details") or {}
    got = details.get("cached_tokens")
    return None if got is None else int(got)


def _percentiles(ns: Deque[int]) -> Dict[str, float]:
    """p50 and p99 of the samples, in us (nearest rank)."""
    if not ns:
        return {}
    v = sorted(ns)
    at = lambda q: v[min(len(v) - 1, int(q * len(v)))] / 1000.0  # noqa: E731
    return {"n": len(v), "p50": at(0.50), "p99": at(0.99)}


class WselDynamoRouter:
    """Routes PreprocessedRequest dicts with a wsel host over a Dynamo
    ``KvRouter`` (``dynamo.llm.KvRouter`` on the workers' endpoint)."""

    def __init__(self, host: wsel.Host, kv_router: Any, block_size: int,
                 history: int = 1024) -> None:
        self.host = host
        self.kv = kv_router
        self.block_size = block_size
        self.policy_path = ""
        self.policy_config: Optional[str] = None
        self.decisions: Deque[Decision] = deque(maxlen=history)
        self.outcomes = 0
        self.failed = 0
        self._ids = itertools.count(1)
        self._table: Optional[wsel.Table] = None
        self._cap = 0
        # Per request, ns: Dynamo's two queries; wsel's part (rank states,
        # table, select: what crossing the binding costs).
        self.query_ns: Deque[int] = deque(maxlen=100000)
        self.wsel_ns: Deque[int] = deque(maxlen=100000)

    # --- control ---------------------------------------------------------

    def switch(self, path: str, config: Any = None) -> str:
        """Make the plugin at ``path`` the live policy (JSON ``config``, a
        string or an object); the old one serves until it succeeds."""
        text = config if config is None or isinstance(config, str) else json.dumps(config)
        self.host.switch(path, text)
        self.policy_path, self.policy_config = path, text
        return self.host.policy_name

    def status(self, last: int = 0) -> Dict[str, Any]:
        """Policy, host counters, outcomes reported and the ``last`` decisions."""
        c = self.host.counters()
        picked = list(self.decisions)[-last:] if last > 0 else []
        return {"policy": self.host.policy_name, "path": self.policy_path,
                "config": self.policy_config,
                "counters": {"selects": c.selects, "plugin_answers": c.plugin_answers,
                             "fallbacks": c.fallbacks, "switches": c.switches,
                             "failed_switches": c.failed_switches,
                             "fallback_by_reason": c.fallback_by_reason},
                "outcomes": self.outcomes, "failed": self.failed,
                "timing_us": {"dynamo_queries": _percentiles(self.query_ns),
                              "wsel": _percentiles(self.wsel_ns)},
                "decisions": [asdict(d) for d in picked]}

    # --- routing ---------------------------------------------------------

    def _table_for(self, rows: int) -> wsel.Table:
        if self._table is None or self._cap < rows:
            self._cap = max(rows, 2 * self._cap, 8)
            self._table = wsel.Table(self._cap)
        return self._table

    async def ranks(self, token_ids: List[int]) -> List[wsel.RankState]:
        """The rank states a request of ``token_ids`` would be chosen from."""
        scores = await self.kv.get_overlap_scores(token_ids)
        loads = await self.kv.get_potential_loads(token_ids)
        return ranks_from_dynamo(len(token_ids), self.block_size, scores, loads)

    async def choose(self, token_ids: List[int]) -> Decision:
        """Ask the live policy where ``token_ids`` should go."""
        t0 = time.perf_counter_ns()
        scores = await self.kv.get_overlap_scores(token_ids)
        loads = await self.kv.get_potential_loads(token_ids)
        t1 = time.perf_counter_ns()
        isl = len(token_ids)
        ranks = ranks_from_dynamo(isl, self.block_size, scores, loads)
        if not ranks:
            raise RuntimeError("wsel-dynamo: no worker rank is known to Dynamo's router")
        rid = next(self._ids)
        req = self.host.request(rid, isl, block_size=self.block_size)
        c = self.host.select(req, self._table_for(len(ranks)).build(req, ranks))
        t2 = time.perf_counter_ns()
        self.query_ns.append(t1 - t0)
        self.wsel_ns.append(t2 - t1)
        d = Decision(rid, isl, [asdict(r) for r in ranks], c.worker_id, c.dp_rank,
                     c.answer, c.reason, self.host.policy_name)
        self.decisions.append(d)
        return d

    async def generate(self, request: Dict[str, Any],
                       token_ids: List[int]) -> AsyncIterator[Dict[str, Any]]:
        """Route one PreprocessedRequest and stream the engine's outputs."""
        t0 = time.monotonic_ns()
        d = await self.choose(token_ids)
        fwd = dict(request)
        fwd["token_ids"] = token_ids
        routing = dict(fwd.get("routing") or {})
        routing.update(backend_instance_id=d.worker_id, decode_worker_id=d.worker_id,
                       dp_rank=d.dp_rank)
        fwd["routing"] = routing
        first_ns, out_tokens, cached, failed = 0, 0, None, True
        try:
            async for out in await self.kv.generate_from_request(fwd):
                n = len(out.get("token_ids") or ())
                if n and not first_ns:
                    first_ns = time.monotonic_ns()
                out_tokens += n
                usage = _usage(out)
                if usage is not None:
                    cached = _cached(usage)
                yield out
            failed = False
        finally:
            self._report(d, t0, first_ns, out_tokens, cached, failed)

    def _report(self, d: Decision, t0: int, first_ns: int, out_tokens: int,
                cached: Optional[int], failed: bool) -> None:
        now = time.monotonic_ns()
        self.host.request_outcome(wsel.Outcome(
            d.request_id, d.worker_id, d.dp_rank,
            ttft_us=(first_ns - t0) // 1000 if first_ns else 0,
            e2e_us=(now - t0) // 1000, finished_us=now // 1000,
            prompt_tokens=d.isl, cached_tokens=cached or 0,
            output_tokens=out_tokens, failed=failed))
        self.outcomes += 1
        self.failed += int(failed)
