#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""wsel_select.py -- call a wsel plugin from Python with ctypes alone.

    python3 wsel_select.py PLUGIN.so --host-lib libwsel-host.so.1

Loads the plugin by path, checks its descriptor the way a wsel host does
(ABI major, struct size, required functions), creates it with the defaults
of its parameter table, fills a small candidate table of (worker, dp_rank)
rows with Dynamo's default cost, selects and prints the chosen row.

The host table handed to the plugin is made of libwsel-host's exported
helpers (wsel_rng_u64, wsel_softmax_sample, ...) plus a Python log
callback: the hot helpers stay in C, and Python only describes the ABI.
"""
import argparse
import ctypes
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int32,
                    c_uint8, c_uint32, c_uint64, c_void_p)

ABI_MAJOR = 1
ABI_MINOR = 0
ROW_EXCLUDED = 0x02
PLUGIN_SIZE_1_0 = 96
PARAM_DEF_SIZE_1_0 = 56


# --- the ABI (abi/wsel.h v1.0) ------------------------------------------------
class Rng(Structure):
    _fields_ = [("state", c_uint64 * 4)]


class Request(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved0", c_uint32),
                ("request_id", c_uint64), ("affinity_key", c_uint64),
                ("timestamp_us", c_uint64), ("isl_tokens", c_uint32),
                ("block_size", c_uint32), ("num_block_hashes", c_uint32),
                ("reserved1", c_uint32), ("block_hashes", POINTER(c_uint64)),
                ("overlap_score_weight", c_double), ("temperature", c_double),
                ("uniform", c_double), ("rng", POINTER(Rng))]


class Table(Structure):
    _fields_ = [("struct_size", c_uint32), ("num_rows", c_uint32),
                ("num_groups", c_uint32), ("reserved0", c_uint32),
                ("topology_epoch", c_uint64),
                ("worker_id", POINTER(c_uint64)), ("dp_rank", POINTER(c_uint32)),
                ("overlap_blocks", POINTER(c_uint32)),
                ("prefill_tokens", POINTER(c_uint64)),
                ("decode_blocks", POINTER(c_uint64)), ("cost", POINTER(c_double)),
                ("kv_capacity_blocks", POINTER(c_uint64)),
                ("active_requests", POINTER(c_uint32)), ("flags", POINTER(c_uint8)),
                ("group_first_row", POINTER(c_uint32)),
                ("group_row_count", POINTER(c_uint32))]


class Choice(Structure):
    _fields_ = [("struct_size", c_uint32), ("row", c_uint32),
                ("reserved", c_uint32 * 6)]


class HostApi(Structure):
    pass


LOG_FN = CFUNCTYPE(None, POINTER(HostApi), c_int32, c_char_p)
RNG_U64_FN = CFUNCTYPE(c_uint64, POINTER(Rng))
RNG_UNIFORM_FN = CFUNCTYPE(c_double, POINTER(Rng))
SOFTMAX_FN = CFUNCTYPE(c_int32, POINTER(c_double), POINTER(c_uint8), c_uint32,
                       c_uint8, c_double, c_double, POINTER(c_uint32))
ARGMIN_FN = CFUNCTYPE(c_int32, POINTER(c_double), POINTER(c_uint8), c_uint32,
                      c_uint8, POINTER(Rng), POINTER(c_uint32))

HostApi._fields_ = [("struct_size", c_uint32), ("abi_major", c_uint32),
                    ("abi_minor", c_uint32), ("reserved0", c_uint32),
                    ("host_ctx", c_void_p), ("log", LOG_FN), ("rng_u64", RNG_U64_FN),
                    ("rng_uniform", RNG_UNIFORM_FN), ("softmax_sample", SOFTMAX_FN),
                    ("argmin", ARGMIN_FN)]


class ParamDef(Structure):
    _fields_ = [("name", c_char_p), ("doc", c_char_p), ("type", c_uint32),
                ("reserved0", c_uint32), ("default_value", c_double),
                ("min_value", c_double), ("max_value", c_double),
                ("choices", c_void_p)]


CREATE_FN = CFUNCTYPE(c_int32, POINTER(HostApi), POINTER(c_double), c_uint32,
                      POINTER(c_void_p))
DESTROY_FN = CFUNCTYPE(None, c_void_p)
SELECT_FN = CFUNCTYPE(c_int32, c_void_p, POINTER(Request), POINTER(Table),
                      POINTER(Choice))


class Plugin(Structure):
    # Function pointers as c_void_p: NULL reads as None, and each is cast to
    # its prototype when called.
    _fields_ = [("abi_major", c_uint32), ("abi_minor", c_uint32),
                ("struct_size", c_uint32), ("capabilities", c_uint32),
                ("name", c_char_p), ("version", c_char_p), ("description", c_char_p),
                ("params", c_void_p), ("num_params", c_uint32),
                ("param_def_size", c_uint32), ("create", c_void_p),
                ("destroy", c_void_p), ("select", c_void_p),
                ("on_request_finished", c_void_p), ("on_topology_changed", c_void_p)]


# The sizes and a few offsets wsel.h pins; ctypes must agree before anything runs.
for struct, size in ((Rng, 32), (Request, 88), (Table, 112), (Choice, 32),
                     (HostApi, 64), (ParamDef, 56), (Plugin, 96)):
    assert ctypes.sizeof(struct) == size, (struct.__name__, ctypes.sizeof(struct))
assert Request.rng.offset == 80 and Table.group_row_count.offset == 104
assert HostApi.argmin.offset == 56 and Plugin.on_topology_changed.offset == 88


# --- loading -------------------------------------------------------------------
def open_plugin(path):
    """Load `path` and return (library, descriptor), or raise with the cause."""
    lib = ctypes.CDLL(path)
    head = (c_uint32 * 3).in_dll(lib, "wsel_plugin_entry")
    major, _minor, size = head
    if major != ABI_MAJOR:
        raise RuntimeError(f"{path}: ABI major {major}, this host speaks {ABI_MAJOR}")
    if size < PLUGIN_SIZE_1_0:
        raise RuntimeError(f"{path}: descriptor of {size} bytes, 1.0 needs {PLUGIN_SIZE_1_0}")
    plugin = Plugin.in_dll(lib, "wsel_plugin_entry")
    for name in ("create", "destroy", "select"):
        if getattr(plugin, name) is None:
            raise RuntimeError(f"{path}: required function {name} is NULL")
    if plugin.num_params and (plugin.params is None or
                              plugin.param_def_size < PARAM_DEF_SIZE_1_0):
        raise RuntimeError(f"{path}: parameter table missing or stride too short")
    return lib, plugin


def params_of(plugin):
    """The parameter table, read with the plugin's own stride."""
    return [ParamDef.from_address(plugin.params + i * plugin.param_def_size)
            for i in range(plugin.num_params)]


def host_api(host_lib, log):
    """A 1.0 host table of libwsel-host's helpers and the Python `log`."""
    return HostApi(ctypes.sizeof(HostApi), ABI_MAJOR, ABI_MINOR, 0, None, log,
                   RNG_U64_FN(("wsel_rng_u64", host_lib)),
                   RNG_UNIFORM_FN(("wsel_rng_uniform", host_lib)),
                   SOFTMAX_FN(("wsel_softmax_sample", host_lib)),
                   ARGMIN_FN(("wsel_argmin", host_lib)))


# --- a router's table ------------------------------------------------------------
# (worker, dp_rank, overlap_blocks, active_blocks, active_requests, flags);
# worker 11 rank 1 holds the whole prompt, worker 12 rank 1 is draining.
RANKS = [(10, 0, 0, 40, 3, 0), (10, 1, 0, 42, 3, 0), (11, 0, 1, 10, 1, 0),
         (11, 1, 4, 12, 1, 0), (12, 0, 0, 5, 0, 0), (12, 1, 0, 0, 0, ROW_EXCLUDED)]


def column(ctype, values):
    return (ctype * len(values))(*values)


def build_table(isl, block_size, weight):
    """Columns with Dynamo's cost: weight * prefill / block_size + decode."""
    prefill = [max(isl - o * block_size, 0) for _, _, o, _, _, _ in RANKS]
    decode = [a + max(isl // block_size - o, 0) for _, _, o, a, _, _ in RANKS]
    workers = [r[0] for r in RANKS]
    firsts = [i for i, w in enumerate(workers) if i == 0 or workers[i - 1] != w]
    counts = [workers.count(workers[i]) for i in firsts]
    cols = {
        "worker_id": column(c_uint64, workers),
        "dp_rank": column(c_uint32, [r[1] for r in RANKS]),
        "overlap_blocks": column(c_uint32, [r[2] for r in RANKS]),
        "prefill_tokens": column(c_uint64, prefill),
        "decode_blocks": column(c_uint64, decode),
        "cost": column(c_double, [weight * p / block_size + d
                                  for p, d in zip(prefill, decode)]),
        "kv_capacity_blocks": column(c_uint64, [16384] * len(RANKS)),
        "active_requests": column(c_uint32, [r[4] for r in RANKS]),
        "flags": column(c_uint8, [r[5] for r in RANKS]),
        "group_first_row": column(c_uint32, firsts),
        "group_row_count": column(c_uint32, counts),
    }
    table = Table(struct_size=ctypes.sizeof(Table), num_rows=len(RANKS),
                  num_groups=len(firsts), topology_epoch=1, **cols)
    return table, cols  # cols keeps the arrays alive as long as the table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plugin", help="path of the plugin .so")
    parser.add_argument("--host-lib", default="libwsel-host.so.1",
                        help="libwsel-host to take the helpers from")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    try:
        host_lib = ctypes.CDLL(args.host_lib)
        lib, plugin = open_plugin(args.plugin)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"wsel_select: {e}", file=sys.stderr)
        return 1
    params = params_of(plugin)
    defaults = (c_double * max(len(params), 1))(*[p.default_value for p in params])
    print(f"loaded {plugin.name.decode()} (ABI {plugin.abi_major}.{plugin.abi_minor}); "
          "defaults: " + (", ".join(f"{p.name.decode()}={p.default_value:g}"
                                    for p in params) or "none"))

    log = LOG_FN(lambda host, level, msg: print(f"plugin log {level}: {msg.decode()}",
                                                file=sys.stderr))
    api = host_api(host_lib, log)
    instance = c_void_p()
    rc = CREATE_FN(plugin.create)(ctypes.byref(api), defaults, len(params),
                                  ctypes.byref(instance))
    if rc != 0:
        print(f"wsel_select: create failed with {rc}", file=sys.stderr)
        return 1

    isl, block_size = 64, 16
    table, cols = build_table(isl, block_size, 1.0)
    hashes = column(c_uint64, [0x11, 0x22, 0x33, 0x44])
    rng = Rng()
    host_lib.wsel_rng_seed(ctypes.byref(rng), c_uint64(args.seed))
    host_lib.wsel_rng_uniform.restype = c_double
    uniform = host_lib.wsel_rng_uniform(ctypes.byref(rng))
    request = Request(struct_size=ctypes.sizeof(Request), request_id=1,
                      isl_tokens=isl, block_size=block_size, num_block_hashes=4,
                      block_hashes=hashes, overlap_score_weight=1.0,
                      temperature=0.0, uniform=uniform, rng=ctypes.pointer(rng))
    choice = Choice(struct_size=ctypes.sizeof(Choice))
    rc = SELECT_FN(plugin.select)(instance, ctypes.byref(request), ctypes.byref(table),
                                  ctypes.byref(choice))
    DESTROY_FN(plugin.destroy)(instance)
    if rc != 0:
        print(f"wsel_select: select failed with {rc}", file=sys.stderr)
        return 1
    row = choice.row
    if row >= table.num_rows or cols["flags"][row] & ROW_EXCLUDED:
        print(f"wsel_select: plugin answered row {row}, not a candidate", file=sys.stderr)
        return 1
    print(f"row {row}: worker {cols['worker_id'][row]} dp_rank {cols['dp_rank'][row]} "
          f"(cost {cols['cost'][row]:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
