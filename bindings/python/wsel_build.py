# SPDX-License-Identifier: Apache-2.0
"""wsel_build.py -- the cffi (API mode) description of libwsel-host and
libwsel-router, compiled against the INSTALLED headers and libraries.

pkg-config finds them (`wsel-router.pc`, which requires `wsel.pc`): set
PKG_CONFIG_PATH to <prefix>/lib/pkgconfig for a prefix outside the default
search path. The extension gets an RPATH to that libdir, so it loads the
libraries it was built against without LD_LIBRARY_PATH.

Structs are declared with `...;`: the C compiler lays them out from the
headers, so the binding never restates an offset.
"""
import shlex
import subprocess

from cffi import FFI

CDEF = r"""
#define WSEL_ABI_MAJOR ...
#define WSEL_ABI_MINOR ...
#define WSEL_ROW_BUSY ...
#define WSEL_ROW_EXCLUDED ...
#define WSEL_ROW_NO_LOAD ...
#define WSEL_OVERRIDE_TEMPERATURE ...
#define WSEL_CHOICE_SCORED ...
#define WSEL_OUTCOME_FAILED ...
#define WSEL_ANSWER_PLUGIN ...
#define WSEL_ANSWER_FALLBACK ...
#define WSEL_FALLBACK_REASONS ...
#define WSEL_FALLBACK_REASONS_MAX ...
#define WSEL_HOST_REASON_SLOTS ...
#define WSEL_HOST_NEVER_EJECT ...
#define WSEL_ROUTER_KV_HISTORY ...
#define WSEL_ROUTER_KV_EVENTS ...
#define WSEL_ROUTE_SET_WEIGHT ...
#define WSEL_ROUTE_SET_TEMPERATURE ...
#define WSEL_ROUTE_BUILTIN ...
#define WSEL_ROUTE_DEFER_HISTORY ...
#define WSEL_ROUTER_FINISH_FAILED ...
#define WSEL_ROUTER_FINISH_CACHED_KNOWN ...
#define WSEL_KV_SKIP_REASONS ...

typedef struct { uint64_t state[4]; } wsel_rng;
typedef struct {
    uint32_t struct_size; uint64_t request_id; uint64_t affinity_key;
    uint64_t timestamp_us; uint32_t isl_tokens; uint32_t block_size;
    uint32_t num_block_hashes; const uint64_t *block_hashes;
    double overlap_score_weight; double temperature; double uniform;
    wsel_rng *rng; uint32_t overrides; ...;
} wsel_request;
typedef struct {
    uint32_t struct_size; uint32_t num_rows; uint32_t num_groups;
    uint64_t topology_epoch; const uint64_t *worker_id; const uint32_t *dp_rank;
    const uint32_t *overlap_blocks; const uint64_t *prefill_tokens;
    const uint64_t *decode_blocks; const double *cost;
    const uint64_t *kv_capacity_blocks; const uint32_t *active_requests;
    const uint8_t *flags; ...;
} wsel_table;
typedef struct {
    uint32_t struct_size; uint32_t row; uint32_t reason; uint32_t flags;
    double score; ...;
} wsel_choice;
typedef struct {
    uint32_t struct_size; uint32_t dp_rank; uint64_t request_id;
    uint64_t worker_id; uint64_t ttft_us; uint64_t e2e_us; uint64_t finished_us;
    uint32_t prompt_tokens; uint32_t cached_tokens; uint32_t output_tokens;
    uint32_t flags; ...;
} wsel_outcome;

const char *wsel_strerror(int32_t code);
const char *wsel_errname(int32_t code);
const char *wsel_fallback_reason_name(uint32_t reason);

typedef struct {
    uint64_t worker_id; uint32_t dp_rank; uint32_t overlap_blocks;
    uint64_t active_prefill_tokens; uint64_t active_blocks;
    uint64_t kv_capacity_blocks; uint32_t active_requests; uint8_t flags; ...;
} wsel_rank_state;
typedef struct { wsel_table table; uint32_t capacity_rows; ...; } wsel_table_buf;
int32_t wsel_table_buf_init(wsel_table_buf *buf, uint32_t capacity_rows);
void wsel_table_buf_free(wsel_table_buf *buf);
int32_t wsel_table_build(wsel_table_buf *buf, const wsel_request *request,
                         const wsel_rank_state *ranks, uint32_t num_ranks,
                         uint64_t topology_epoch, char *err, size_t err_size);
int32_t wsel_table_validate(const wsel_table *table, char *err, size_t err_size);
int32_t wsel_request_validate(const wsel_request *request, char *err, size_t err_size);

typedef struct { uint32_t struct_size; const char *const *allowed_dirs; ...; } wsel_trust_options;
typedef struct wsel_host wsel_host;
typedef struct {
    uint32_t struct_size; uint32_t max_consecutive_failures; uint64_t seed;
    wsel_trust_options trust; uint32_t isolated; uint32_t select_deadline_us;
    uint32_t restart_backoff_us; uint32_t helper_as_limit_mb;
    uint32_t helper_cpu_limit_s; uint32_t hang_timeout_us;
    const char *helper_path; ...;
} wsel_host_options;
void wsel_host_options_default(wsel_host_options *opts);
int32_t wsel_host_create(const wsel_host_options *opts, wsel_host **out);
void wsel_host_destroy(wsel_host *host);
int32_t wsel_host_switch(wsel_host *host, const char *path, const char *config,
                         char *err, size_t err_size);
uint32_t wsel_host_reclaim(wsel_host *host);
void wsel_host_prepare_request_sized(const wsel_host *host, wsel_request *request,
                                     size_t request_size, wsel_rng *rng);
int32_t wsel_host_select(wsel_host *host, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice);
void wsel_host_request_finished(wsel_host *host, uint64_t request_id,
                                uint64_t worker_id, uint32_t dp_rank);
void wsel_host_request_outcome(wsel_host *host, const wsel_outcome *outcome);
void wsel_host_topology_changed(wsel_host *host, const wsel_table *table);
typedef struct {
    uint64_t selects; uint64_t plugin_answers; uint64_t fallbacks;
    uint64_t fallback_by_reason[8]; uint64_t switches; uint64_t failed_switches;
    uint64_t ejections; uint64_t fallback_by_reason_more[8];
    uint64_t log_dropped; uint64_t answers_by_reason[16]; ...;
} wsel_host_counters;
void wsel_host_read_counters(const wsel_host *host, wsel_host_counters *out,
                             size_t out_size);
const char *wsel_host_policy_name(const wsel_host *host);
typedef struct {
    uint32_t struct_size; uint32_t depth; char name[72]; uint64_t scores;
    uint64_t answers; uint64_t fallbacks; uint64_t fallback_by_reason[16];
    uint32_t ejected; ...;
} wsel_child_counters;
int32_t wsel_host_read_child_counters(wsel_host *host, uint32_t index,
                                      wsel_child_counters *out, size_t out_size);

typedef struct wsel_router wsel_router;
typedef struct {
    uint32_t struct_size; uint32_t block_size; uint32_t kv_source;
    uint32_t max_rows; uint32_t capacity_blocks; uint32_t text_chunk_chars;
    uint32_t busy_active_requests; uint32_t max_prompt_blocks;
    uint64_t busy_prefill_tokens; wsel_host *host; uint32_t kv_threads; ...;
} wsel_router_options;
int32_t wsel_router_create(const wsel_router_options *opts, wsel_router **out,
                           char *err, size_t err_size);
void wsel_router_destroy(wsel_router *router);
typedef struct {
    uint64_t worker_id; const char *address; uint32_t dp_size;
    const char *const *kv_endpoints; ...;
} wsel_router_worker;
int32_t wsel_router_add_worker(wsel_router *router, const wsel_router_worker *worker,
                               char *err, size_t err_size);
int32_t wsel_router_drain_worker(wsel_router *router, uint64_t worker_id);
int32_t wsel_router_remove_worker(wsel_router *router, uint64_t worker_id);
int32_t wsel_router_set_worker_available(wsel_router *router, uint64_t worker_id,
                                         int available);
uint64_t wsel_router_epoch(const wsel_router *router);
uint32_t wsel_router_hash_tokens(const uint32_t *tokens, uint32_t n,
                                 uint32_t block_size, uint64_t *out, uint32_t max);
uint32_t wsel_router_hash_text(const char *text, size_t len, uint32_t chunk,
                               uint64_t *out, uint32_t max);
typedef struct {
    uint32_t struct_size; uint32_t overrides; uint64_t request_id;
    const uint32_t *tokens; uint32_t num_tokens; uint32_t isl_tokens;
    const char *text; size_t text_len; double overlap_score_weight;
    double temperature; ...;
} wsel_route_request;
typedef struct {
    uint64_t request_id; uint64_t worker_id; uint32_t dp_rank; uint32_t answer;
    uint32_t num_blocks; uint32_t overlap_blocks; char address[256]; ...;
} wsel_route_result;
int32_t wsel_router_route(wsel_router *router, const wsel_route_request *request,
                          wsel_route_result *result);
void wsel_router_flush(wsel_router *router);
int32_t wsel_router_first_token(wsel_router *router, uint64_t request_id);
int32_t wsel_router_finished(wsel_router *router, uint64_t request_id);
typedef struct {
    uint32_t struct_size; uint32_t flags; uint32_t output_tokens;
    uint32_t cached_tokens; uint64_t ttft_us; uint64_t e2e_us; ...;
} wsel_router_finish;
int32_t wsel_router_finished_ex(wsel_router *router, uint64_t request_id,
                                const wsel_router_finish *info);
int32_t wsel_router_apply_kv_message(wsel_router *router, uint64_t worker_id,
                                     uint32_t dp_rank, const void *const *frames,
                                     const size_t *sizes, uint32_t num_frames);
typedef struct {
    uint64_t routes; uint64_t plugin_answers; uint64_t fallbacks;
    uint64_t no_candidate; uint64_t prompt_blocks; uint64_t overlap_blocks;
    uint64_t kv_messages; uint64_t kv_blocks_stored; uint64_t kv_blocks_removed;
    uint64_t kv_cleared; uint64_t kv_seq_gaps; uint64_t kv_skipped[8];
    uint64_t index_blocks; uint64_t index_entries; uint64_t index_evictions;
    uint64_t index_bytes; uint64_t epoch; uint64_t builtin_routes; ...;
} wsel_router_counters;
void wsel_router_read_counters(wsel_router *router, wsel_router_counters *out);
typedef struct {
    uint32_t struct_size; uint64_t messages; uint64_t decode_ns; uint64_t apply_ns; ...;
} wsel_router_kv_cpu;
int32_t wsel_router_read_kv_cpu(wsel_router *router, wsel_router_kv_cpu *out);
typedef struct {
    uint64_t worker_id; uint32_t dp_rank; uint32_t active_requests;
    uint64_t active_prefill_tokens; uint64_t active_blocks; uint64_t cached_blocks;
    uint32_t flags; ...;
} wsel_router_rank_info;
uint32_t wsel_router_read_ranks(wsel_router *router, wsel_router_rank_info *out,
                                uint32_t max);
uint32_t wsel_router_read_overlaps(wsel_router *router, const uint32_t *tokens,
                                   uint32_t num_tokens, uint32_t *out, uint32_t max);
const char *wsel_router_kv_skip_name(uint32_t reason);
"""


def pkg_config(*args: str) -> list:
    try:
        out = subprocess.run(["pkg-config", *args, "wsel-router"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            "wsel: pkg-config cannot find wsel-router.pc; install wsel "
            "(cmake --install build --prefix P) and set "
            "PKG_CONFIG_PATH=P/lib/pkgconfig") from exc
    return shlex.split(out)


def strip(flags: list, prefix: str) -> list:
    return [f[len(prefix):] for f in flags if f.startswith(prefix)]


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
_libdirs = strip(pkg_config("--libs-only-L"), "-L")
ffibuilder.set_source(
    "wsel._wsel_cffi",
    "#include <wsel_router.h>",
    include_dirs=strip(pkg_config("--cflags-only-I"), "-I"),
    library_dirs=_libdirs,
    runtime_library_dirs=_libdirs,
    libraries=strip(pkg_config("--libs-only-l"), "-l"),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
