# SPDX-License-Identifier: Apache-2.0
"""wsel -- Python binding of libwsel-host and libwsel-router.

Thin: every call is one C call through cffi (API mode, compiled against
the installed headers). Thread rules are the headers':

* ``Host.select``, ``Host.request_finished``, ``Host.request_outcome``,
  ``Host.counters`` and every ``Router`` method but ``close`` run on any
  thread at once; cffi releases the GIL around each C call, so threads
  select in parallel.
* ``Host.switch``, ``Host.reclaim``, ``Host.topology_changed``,
  ``Host.policy_name`` and ``close`` are control-thread calls: the binding
  serialises them with a lock per host, so any Python thread may call them.
* ``Host.close`` refuses while a ``Router`` built on the host is open;
  closing while another thread is inside ``select`` is the caller's bug,
  as in C.

Errors raise :class:`WselError` with the host's own message.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable, List, NamedTuple, Optional, Sequence

from ._wsel_cffi import ffi, lib

__all__ = [
    "WselError", "Host", "Request", "RankState", "Table", "Choice", "Outcome",
    "HostCounters", "ChildCounters", "Router", "RouteResult", "RouterCounters",
    "RankInfo", "KvCpu", "hash_tokens", "hash_text",
    "ROW_BUSY", "ROW_EXCLUDED", "ROW_NO_LOAD", "ANSWER_PLUGIN", "ANSWER_FALLBACK",
]

ROW_BUSY: int = lib.WSEL_ROW_BUSY
ROW_EXCLUDED: int = lib.WSEL_ROW_EXCLUDED
ROW_NO_LOAD: int = lib.WSEL_ROW_NO_LOAD
ANSWER_PLUGIN: int = lib.WSEL_ANSWER_PLUGIN
ANSWER_FALLBACK: int = lib.WSEL_ANSWER_FALLBACK
ABI_VERSION = (lib.WSEL_ABI_MAJOR, lib.WSEL_ABI_MINOR)
_ERR_SIZE = 512
_CHOICE_SCORED = lib.WSEL_CHOICE_SCORED
_CHOICE_INIT = {"struct_size": ffi.sizeof("wsel_choice")}


def _new_choice():
    return ffi.new("wsel_choice *", _CHOICE_INIT)

_ENOENT = -3
_ESTATE = -16


class WselError(Exception):
    """A negative WSEL_E* code: ``code``, ``name`` ("WSEL_ECONFIG") and the
    host's message (the cause it names, else the code's strerror)."""

    def __init__(self, code: int, message: str = "") -> None:
        self.code = code
        self.name = ffi.string(lib.wsel_errname(code)).decode()
        self.message = message or ffi.string(lib.wsel_strerror(code)).decode()
        super().__init__(f"{self.name}: {self.message}")


def _check(rc: int, err=None) -> int:
    if rc < 0:
        text = ffi.string(err).decode(errors="replace") if err is not None else ""
        raise WselError(rc, text)
    return rc


def _cstr(s: Optional[str]):
    return ffi.NULL if s is None else s.encode()


# --- requests and tables ----------------------------------------------------

class Request:
    """A request to select for (``wsel_request``), prepared by a host so its
    random stream is reproducible from (host seed, request_id). Reusable:
    one object per request in flight; fields are properties."""

    __slots__ = ("_c", "_rng", "_hashes")

    def __init__(self, host: "Host", request_id: int, isl_tokens: int,
                 block_size: int = 64, block_hashes: Sequence[int] = (),
                 overlap_score_weight: float = 1.0,
                 temperature: Optional[float] = None, affinity_key: int = 0,
                 timestamp_us: int = 0) -> None:
        self._c = ffi.new("wsel_request *")
        self._rng = ffi.new("wsel_rng *")
        self._c.request_id = request_id
        lib.wsel_host_prepare_request_sized(host._ptr(), self._c,
                                            ffi.sizeof("wsel_request"), self._rng)
        self._c.isl_tokens = isl_tokens
        self._c.block_size = block_size
        self._c.overlap_score_weight = overlap_score_weight
        self._c.affinity_key = affinity_key
        self._c.timestamp_us = timestamp_us
        if temperature is not None:  # this request's own override, 0 included
            self._c.temperature = temperature
            self._c.overrides |= lib.WSEL_OVERRIDE_TEMPERATURE
        self._hashes = ffi.new("uint64_t[]", list(block_hashes))
        self._c.num_block_hashes = len(self._hashes)
        self._c.block_hashes = self._hashes if len(self._hashes) else ffi.NULL

    @property
    def request_id(self) -> int:
        return self._c.request_id

    @property
    def uniform(self) -> float:
        return self._c.uniform

    def validate(self) -> None:
        """Raise WselError (WSEL_EREQUEST, the field named) if invalid."""
        err = ffi.new("char[]", _ERR_SIZE)
        _check(lib.wsel_request_validate(self._c, err, _ERR_SIZE), err)


@dataclass
class RankState:
    """What the router knows about one (worker, dp_rank): wsel_rank_state."""
    worker_id: int
    dp_rank: int = 0
    overlap_blocks: int = 0
    active_prefill_tokens: int = 0
    active_blocks: int = 0
    kv_capacity_blocks: int = 0
    active_requests: int = 0
    flags: int = 0


class Table:
    """A candidate table (``wsel_table_buf``): columns allocated once for up
    to ``capacity`` rows, rebuilt per request with :meth:`build`. Not for
    two threads at once."""

    def __init__(self, capacity: int) -> None:
        self._buf = ffi.new("wsel_table_buf *")
        _check(lib.wsel_table_buf_init(self._buf, capacity))
        self._buf = ffi.gc(self._buf, lib.wsel_table_buf_free)
        self._ctable = ffi.addressof(self._buf.table)  # kept alive by _buf
        self._ranks = ffi.new("wsel_rank_state[]", capacity)

    def build(self, request: Request, ranks: Sequence[RankState],
              topology_epoch: int = 1) -> "Table":
        """Fill the columns from rank states in canonical order (worker_id,
        then dp_rank); raises WselError (WSEL_ETABLE names the row)."""
        if len(ranks) > len(self._ranks):
            raise WselError(-15, f"{len(ranks)} ranks > capacity {len(self._ranks)}")
        for c, r in zip(self._ranks, ranks):
            c.worker_id, c.dp_rank = r.worker_id, r.dp_rank
            c.overlap_blocks = r.overlap_blocks
            c.active_prefill_tokens = r.active_prefill_tokens
            c.active_blocks = r.active_blocks
            c.kv_capacity_blocks = r.kv_capacity_blocks
            c.active_requests, c.flags = r.active_requests, r.flags
        err = ffi.new("char[]", _ERR_SIZE)
        _check(lib.wsel_table_build(self._buf, request._c, self._ranks, len(ranks),
                                    topology_epoch, err, _ERR_SIZE), err)
        return self

    def __len__(self) -> int:
        return self._buf.table.num_rows

    def worker(self, row: int) -> "tuple[int, int]":
        """(worker_id, dp_rank) of a row."""
        if not 0 <= row < len(self):
            raise IndexError(row)
        t = self._buf.table
        return t.worker_id[row], t.dp_rank[row]

    def cost(self, row: int) -> float:
        if not 0 <= row < len(self):
            raise IndexError(row)
        return self._buf.table.cost[row]

    def validate(self) -> None:
        err = ffi.new("char[]", _ERR_SIZE)
        _check(lib.wsel_table_validate(ffi.addressof(self._buf.table), err,
                                       _ERR_SIZE), err)


class Choice(NamedTuple):
    """The answer of a select, with the plugin's explanation (ABI 1.1):
    ``reason`` (WSEL_REASON_*) and ``score`` (None unless the plugin
    scored it); ``answer`` is ANSWER_PLUGIN or ANSWER_FALLBACK."""
    row: int
    worker_id: int
    dp_rank: int
    answer: int
    reason: int
    score: Optional[float]

    @property
    def fallback(self) -> bool:
        return self.answer == ANSWER_FALLBACK


@dataclass
class Outcome:
    """What a finished request cost (wsel_outcome), told to the policy."""
    request_id: int
    worker_id: int
    dp_rank: int
    ttft_us: int = 0
    e2e_us: int = 0
    finished_us: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    failed: bool = False


@dataclass
class HostCounters:
    selects: int
    plugin_answers: int
    fallbacks: int
    fallback_by_reason: "dict[str, int]"
    switches: int
    failed_switches: int
    ejections: int
    log_dropped: int
    answers_by_reason: List[int]


@dataclass
class ChildCounters:
    depth: int
    name: str
    scores: int
    answers: int
    fallbacks: int
    ejected: bool


# --- the host ------------------------------------------------------------------

class Host:
    """A live policy with fallback, switching and counters (libwsel-host).
    Use as a context manager or call :meth:`close`."""

    def __init__(self, *, seed: int = 0, max_consecutive_failures: int = 0,
                 allowed_dirs: Optional[Iterable[str]] = None,
                 isolated: bool = False, select_deadline_us: int = 0,
                 helper_path: Optional[str] = None) -> None:
        opts = ffi.new("wsel_host_options *")
        lib.wsel_host_options_default(opts)
        opts.seed = seed
        if max_consecutive_failures:
            opts.max_consecutive_failures = max_consecutive_failures
        keep = []
        if allowed_dirs is not None:
            keep = [ffi.new("char[]", d.encode()) for d in allowed_dirs]
            opts.trust.allowed_dirs = ffi.new("const char *[]", keep + [ffi.NULL])
            keep.append(opts.trust.allowed_dirs)
        opts.isolated = 1 if isolated else 0
        opts.select_deadline_us = select_deadline_us
        if helper_path is not None:
            keep.append(ffi.new("char[]", helper_path.encode()))
            opts.helper_path = keep[-1]
        out = ffi.new("wsel_host **")
        _check(lib.wsel_host_create(opts, out))  # copies the options
        self._host = out[0]
        self._control = threading.Lock()
        self._routers = 0

    def _ptr(self):
        if self._host is None:
            raise WselError(_ESTATE, "host is closed")
        return self._host

    def close(self) -> None:
        """Destroy the host and its policies. No select may be running."""
        with self._control:
            if self._host is None:
                return
            if self._routers:
                raise WselError(_ESTATE, f"{self._routers} router(s) still use this host")
            lib.wsel_host_destroy(self._host)
            self._host = None

    def __enter__(self) -> "Host":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_host", None) is not None and not self._routers:
            lib.wsel_host_destroy(self._host)

    def switch(self, path: str, config: Optional[str] = None) -> None:
        """Load the plugin at ``path`` (a file path) with JSON ``config``
        and make it live; on error the old policy keeps serving and
        WselError carries the host's message."""
        err = ffi.new("char[]", _ERR_SIZE)
        with self._control:
            _check(lib.wsel_host_switch(self._ptr(), path.encode(), _cstr(config),
                                        err, _ERR_SIZE), err)

    def reclaim(self) -> int:
        """Destroy replaced instances past their grace; returns how many live on."""
        with self._control:
            return lib.wsel_host_reclaim(self._ptr())

    @property
    def policy_name(self) -> str:
        with self._control:
            return ffi.string(lib.wsel_host_policy_name(self._ptr())).decode()

    def request(self, request_id: int, isl_tokens: int, **kw) -> Request:
        """A :class:`Request` prepared by this host (same keywords)."""
        return Request(self, request_id, isl_tokens, **kw)

    def select(self, request: Request, table: Table) -> Choice:
        """Choose a row of ``table`` for ``request``. [any thread]"""
        host = self._host
        if host is None:
            raise WselError(_ESTATE, "host is closed")
        choice = _new_choice()
        rc = lib.wsel_host_select(host, request._c, table._ctable, choice)
        if rc < 0:
            raise WselError(rc)
        t = table._buf.table
        row = choice.row
        scored = choice.flags & _CHOICE_SCORED
        return Choice(row, t.worker_id[row], t.dp_rank[row], rc, choice.reason,
                      choice.score if scored else None)

    def request_finished(self, request_id: int, worker_id: int, dp_rank: int) -> None:
        lib.wsel_host_request_finished(self._ptr(), request_id, worker_id, dp_rank)

    def request_outcome(self, outcome: Outcome) -> None:
        """Tell the live policy a request finished and what it cost."""
        o = ffi.new("wsel_outcome *")
        o.struct_size = ffi.sizeof("wsel_outcome")
        for name in ("request_id", "worker_id", "dp_rank", "ttft_us", "e2e_us",
                     "finished_us", "prompt_tokens", "cached_tokens", "output_tokens"):
            setattr(o, name, getattr(outcome, name))
        o.flags = lib.WSEL_OUTCOME_FAILED if outcome.failed else 0
        lib.wsel_host_request_outcome(self._ptr(), o)

    def topology_changed(self, table: Table) -> None:
        with self._control:
            lib.wsel_host_topology_changed(self._ptr(), ffi.addressof(table._buf.table))

    def counters(self) -> HostCounters:
        c = ffi.new("wsel_host_counters *")
        lib.wsel_host_read_counters(self._ptr(), c, ffi.sizeof("wsel_host_counters"))
        nbase = lib.WSEL_FALLBACK_REASONS
        by_reason = {}
        for r in range(lib.WSEL_FALLBACK_REASONS_MAX):
            n = c.fallback_by_reason[r] if r < nbase else c.fallback_by_reason_more[r - nbase]
            if n:
                by_reason[ffi.string(lib.wsel_fallback_reason_name(r)).decode()] = n
        return HostCounters(c.selects, c.plugin_answers, c.fallbacks, by_reason,
                            c.switches, c.failed_switches, c.ejections, c.log_dropped,
                            list(c.answers_by_reason))

    def child_counters(self) -> List[ChildCounters]:
        """The live policy's children (a pipeline's scorers), depth first."""
        out: List[ChildCounters] = []
        c = ffi.new("wsel_child_counters *")
        while True:
            c.struct_size = ffi.sizeof("wsel_child_counters")
            rc = lib.wsel_host_read_child_counters(self._ptr(), len(out), c,
                                                   ffi.sizeof("wsel_child_counters"))
            if rc == _ENOENT:
                return out
            _check(rc)
            out.append(ChildCounters(c.depth, ffi.string(c.name).decode(), c.scores,
                                     c.answers, c.fallbacks, bool(c.ejected)))


# --- the router ------------------------------------------------------------------

def hash_tokens(tokens: Sequence[int], block_size: int) -> List[int]:
    """Dynamo-compatible chained XXH3 hashes of the full blocks of ``tokens``."""
    n = len(tokens) // block_size if block_size else 0
    out = ffi.new("uint64_t[]", max(n, 1))
    got = lib.wsel_router_hash_tokens(ffi.new("uint32_t[]", list(tokens)), len(tokens),
                                      block_size, out, n)
    return list(out[0:got])


def hash_text(text: str, chunk: int) -> List[int]:
    """The same over ``chunk``-character chunks of UTF-8 ``text``."""
    data = text.encode()
    n = len(data) // chunk if chunk else 0
    out = ffi.new("uint64_t[]", max(n, 1))
    got = lib.wsel_router_hash_text(data, len(data), chunk, out, n)
    return list(out[0:got])


class RouteResult(NamedTuple):
    request_id: int
    worker_id: int
    dp_rank: int
    answer: int
    num_blocks: int
    overlap_blocks: int
    address: str


@dataclass
class RankInfo:
    worker_id: int
    dp_rank: int
    active_requests: int
    active_prefill_tokens: int
    active_blocks: int
    cached_blocks: int
    flags: int


@dataclass
class KvCpu:
    messages: int
    decode_ns: int
    apply_ns: int


@dataclass
class RouterCounters:
    routes: int
    plugin_answers: int
    fallbacks: int
    no_candidate: int
    prompt_blocks: int
    overlap_blocks: int
    kv_messages: int
    kv_blocks_stored: int
    kv_blocks_removed: int
    kv_cleared: int
    kv_seq_gaps: int
    kv_skipped: "dict[str, int]" = field(default_factory=dict)
    index_blocks: int = 0
    index_entries: int = 0
    index_evictions: int = 0
    index_bytes: int = 0
    epoch: int = 0
    builtin_routes: int = 0


_ROUTER_SCALARS = ("routes", "plugin_answers", "fallbacks", "no_candidate",
                   "prompt_blocks", "overlap_blocks", "kv_messages", "kv_blocks_stored",
                   "kv_blocks_removed", "kv_cleared", "kv_seq_gaps")
_ROUTER_TAIL = ("index_blocks", "index_entries", "index_evictions", "index_bytes",
                "epoch", "builtin_routes")


class Router:
    """libwsel-router over a :class:`Host`: topology, KV index, load and
    route. Every method runs on any thread; :meth:`close` on one."""

    def __init__(self, host: Host, *, block_size: int = 0, kv_events: bool = False,
                 max_rows: int = 0, capacity_blocks: int = 0, text_chunk_chars: int = 0,
                 busy_active_requests: int = 0, max_prompt_blocks: int = 0,
                 busy_prefill_tokens: int = 0, kv_threads_normal: bool = False) -> None:
        o = ffi.new("wsel_router_options *")
        o.struct_size = ffi.sizeof("wsel_router_options")
        o.block_size, o.max_rows = block_size, max_rows
        o.kv_source = lib.WSEL_ROUTER_KV_EVENTS if kv_events else lib.WSEL_ROUTER_KV_HISTORY
        o.capacity_blocks, o.text_chunk_chars = capacity_blocks, text_chunk_chars
        o.busy_active_requests, o.max_prompt_blocks = busy_active_requests, max_prompt_blocks
        o.busy_prefill_tokens = busy_prefill_tokens
        o.kv_threads = 1 if kv_threads_normal else 0
        err = ffi.new("char[]", _ERR_SIZE)
        out = ffi.new("wsel_router **")
        with host._control:
            o.host = host._ptr()
            _check(lib.wsel_router_create(o, out, err, _ERR_SIZE), err)
            host._routers += 1
        self._router = out[0]
        self._host: Optional[Host] = host

    def _ptr(self):
        if self._router is None:
            raise WselError(_ESTATE, "router is closed")
        return self._router

    def close(self) -> None:
        """Stop the KV threads and free the router. No other call may run."""
        if self._router is None:
            return
        lib.wsel_router_destroy(self._router)
        self._router = None
        host, self._host = self._host, None
        with host._control:
            host._routers -= 1

    def __enter__(self) -> "Router":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_router", None) is not None:
            self.close()

    def add_worker(self, worker_id: int, address: str, dp_size: int = 1,
                   kv_endpoints: Optional[Sequence[str]] = None) -> None:
        w = ffi.new("wsel_router_worker *")
        w.worker_id, w.dp_size = worker_id, dp_size
        addr = ffi.new("char[]", address.encode())
        w.address = addr
        keep = []
        if kv_endpoints is not None:
            keep = [ffi.new("char[]", e.encode()) for e in kv_endpoints]
            eps = ffi.new("const char *[]", keep + [ffi.NULL])
            w.kv_endpoints = eps
        err = ffi.new("char[]", _ERR_SIZE)
        _check(lib.wsel_router_add_worker(self._ptr(), w, err, _ERR_SIZE), err)

    def drain_worker(self, worker_id: int) -> None:
        _check(lib.wsel_router_drain_worker(self._ptr(), worker_id))

    def remove_worker(self, worker_id: int) -> None:
        _check(lib.wsel_router_remove_worker(self._ptr(), worker_id))

    def set_worker_available(self, worker_id: int, available: bool) -> None:
        _check(lib.wsel_router_set_worker_available(self._ptr(), worker_id,
                                                    1 if available else 0))

    @property
    def epoch(self) -> int:
        return lib.wsel_router_epoch(self._ptr())

    def route(self, tokens: Optional[Sequence[int]] = None, *, text: Optional[str] = None,
              request_id: int = 0, isl_tokens: int = 0,
              overlap_score_weight: Optional[float] = None,
              temperature: Optional[float] = None, builtin: bool = False,
              defer_history: bool = False) -> RouteResult:
        """Route one request given as token ids (exact) or text
        (approximate); ``request_id`` 0 lets the router assign one."""
        r = ffi.new("wsel_route_request *")
        r.struct_size = ffi.sizeof("wsel_route_request")
        r.request_id = request_id
        keep = None
        if tokens is not None:
            keep = ffi.new("uint32_t[]", list(tokens))
            r.tokens, r.num_tokens = keep, len(keep)
        elif text is not None:
            data = text.encode()
            keep = ffi.new("char[]", data)
            r.text, r.text_len, r.isl_tokens = keep, len(data), isl_tokens
        if overlap_score_weight is not None:
            r.overlap_score_weight = overlap_score_weight
            r.overrides |= lib.WSEL_ROUTE_SET_WEIGHT
        if temperature is not None:
            r.temperature = temperature
            r.overrides |= lib.WSEL_ROUTE_SET_TEMPERATURE
        if builtin:
            r.overrides |= lib.WSEL_ROUTE_BUILTIN
        if defer_history:
            r.overrides |= lib.WSEL_ROUTE_DEFER_HISTORY
        res = ffi.new("wsel_route_result *")
        _check(lib.wsel_router_route(self._ptr(), r, res))
        return RouteResult(res.request_id, res.worker_id, res.dp_rank, res.answer,
                           res.num_blocks, res.overlap_blocks,
                           ffi.string(res.address).decode())

    def flush(self) -> None:
        lib.wsel_router_flush(self._ptr())

    def first_token(self, request_id: int) -> None:
        _check(lib.wsel_router_first_token(self._ptr(), request_id))

    def finished(self, request_id: int, *, failed: bool = False, output_tokens: int = 0,
                 cached_tokens: Optional[int] = None, ttft_us: int = 0,
                 e2e_us: int = 0) -> None:
        """The request ended; its load leaves the rank and the policy gets
        its outcome (router's clock unless ttft_us / e2e_us are given)."""
        f = ffi.new("wsel_router_finish *")
        f.struct_size = ffi.sizeof("wsel_router_finish")
        f.flags = lib.WSEL_ROUTER_FINISH_FAILED if failed else 0
        if cached_tokens is not None:
            f.flags |= lib.WSEL_ROUTER_FINISH_CACHED_KNOWN
            f.cached_tokens = cached_tokens
        f.output_tokens, f.ttft_us, f.e2e_us = output_tokens, ttft_us, e2e_us
        _check(lib.wsel_router_finished_ex(self._ptr(), request_id, f))

    def apply_kv_message(self, worker_id: int, dp_rank: int,
                         frames: Sequence[bytes]) -> None:
        """Apply one KV event message (topic, sequence, msgpack batch)."""
        keep = [ffi.from_buffer(f) for f in frames]
        ptrs = ffi.new("const void *[]", keep)
        sizes = ffi.new("size_t[]", [len(f) for f in frames])
        _check(lib.wsel_router_apply_kv_message(self._ptr(), worker_id, dp_rank,
                                                ptrs, sizes, len(frames)))

    def counters(self) -> RouterCounters:
        c = ffi.new("wsel_router_counters *")
        lib.wsel_router_read_counters(self._ptr(), c)
        skipped = {ffi.string(lib.wsel_router_kv_skip_name(i)).decode(): c.kv_skipped[i]
                   for i in range(lib.WSEL_KV_SKIP_REASONS) if c.kv_skipped[i]}
        return RouterCounters(*(getattr(c, n) for n in _ROUTER_SCALARS), kv_skipped=skipped,
                              **{n: getattr(c, n) for n in _ROUTER_TAIL})

    def kv_cpu(self) -> KvCpu:
        k = ffi.new("wsel_router_kv_cpu *")
        k.struct_size = ffi.sizeof("wsel_router_kv_cpu")
        _check(lib.wsel_router_read_kv_cpu(self._ptr(), k))
        return KvCpu(k.messages, k.decode_ns, k.apply_ns)

    def overlaps(self, tokens: Sequence[int]) -> List[int]:
        """Each row's overlap (cached leading blocks) of the prompt
        ``tokens``, in :meth:`ranks` order, without routing."""
        keep = ffi.new("uint32_t[]", list(tokens))
        n = lib.wsel_router_read_overlaps(self._ptr(), keep, len(keep), ffi.NULL, 0)
        while True:
            out = ffi.new("uint32_t[]", max(n, 1))
            got = lib.wsel_router_read_overlaps(self._ptr(), keep, len(keep), out, n)
            if got <= n:
                return list(out[0:got])
            n = got

    def ranks(self) -> List[RankInfo]:
        """Every row, canonical order, as the next route would see it."""
        n = lib.wsel_router_read_ranks(self._ptr(), ffi.NULL, 0)
        while True:
            buf = ffi.new("wsel_router_rank_info[]", max(n, 1))
            got = lib.wsel_router_read_ranks(self._ptr(), buf, n)
            if got <= n:
                return [RankInfo(r.worker_id, r.dp_rank, r.active_requests,
                                 r.active_prefill_tokens, r.active_blocks,
                                 r.cached_blocks, r.flags) for r in buf[0:got]]
            n = got
