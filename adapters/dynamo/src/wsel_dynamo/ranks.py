# SPDX-License-Identifier: Apache-2.0
"""Dynamo's per-rank signals as wsel rank states (no Dynamo import).

Dynamo's ``KvRouter`` reports, for one request of ``isl`` tokens:

* ``get_overlap_scores``: per (worker_id, dp_rank), ``device_blocks``, the
  consecutive prefix blocks of the request cached on that rank (from the
  engines' KV events);
* ``get_potential_loads``: per (worker_id, dp_rank),
  ``potential_prefill_tokens`` (the rank's prefill backlog plus this
  request's uncached tokens), ``potential_decode_blocks`` (its active
  blocks plus this request's new blocks) and ``active_requests``.

wsel's table takes the backlog and the active blocks *without* the
request and adds the request's own share itself (``host/table.c``), so the
request's share is taken off here: the table's ``prefill_tokens`` and
``decode_blocks`` columns then equal Dynamo's potentials, and its default
``cost`` is Dynamo's.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import wsel

Key = Tuple[int, int]


def request_share(isl: int, block_size: int, overlap: int) -> Tuple[int, int]:
    """(uncached prefill tokens, new decode blocks) of a request of ``isl``
    tokens on a rank holding ``overlap`` of its prefix blocks."""
    uncached = max(isl - overlap * block_size, 0)
    new_blocks = max(isl // block_size - overlap, 0)
    return uncached, new_blocks


def overlaps(scores: Mapping[str, Any]) -> Dict[Key, int]:
    """(worker_id, dp_rank) -> device overlap blocks, from the dict
    ``KvRouter.get_overlap_scores`` answers."""
    return {(int(w["worker_id"]), int(w["dp_rank"])): int(w["device_blocks"])
            for w in scores.get("workers", ())}


def ranks_from_dynamo(isl: int, block_size: int, scores: Mapping[str, Any],
                      loads: Sequence[Mapping[str, Any]]) -> List[wsel.RankState]:
    """The rank states of every rank Dynamo knows, sorted by (worker,
    rank) as wsel's table wants. A rank with an overlap but no load record
    is flagged ``ROW_NO_LOAD`` (the table then uses Dynamo's defaults)."""
    ov = overlaps(scores)
    out: Dict[Key, wsel.RankState] = {}
    for row in loads:
        key = (int(row["worker_id"]), int(row["dp_rank"]))
        o = ov.get(key, 0)
        uncached, new_blocks = request_share(isl, block_size, o)
        out[key] = wsel.RankState(
            key[0], key[1], overlap_blocks=o,
            active_prefill_tokens=max(int(row["potential_prefill_tokens"]) - uncached, 0),
            active_blocks=max(int(row["potential_decode_blocks"]) - new_blocks, 0),
            active_requests=int(row.get("active_requests", 0)))
    for key, o in ov.items():
        if key not in out:
            out[key] = wsel.RankState(key[0], key[1], overlap_blocks=o,
                                      flags=wsel.ROW_NO_LOAD)
    return [out[k] for k in sorted(out)]
