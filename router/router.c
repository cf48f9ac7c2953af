// SPDX-License-Identifier: Apache-2.0
/* router.c -- create, destroy, logging, counters and the rank snapshot. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router_internal.h"
#include "sync.h"

void rt_log(const wsel_router *r, int32_t level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (r->opt.log)
        r->opt.log(r->opt.log_user, level, msg);
    else if (level <= WSEL_LOG_WARN)
        fprintf(stderr, "wsel-router: %s\n", msg);
}

uint64_t rt_now_us(const wsel_router *r)
{
    if (r->opt.clock_us)
        return r->opt.clock_us(r->opt.clock_user);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void set_err(char *err, size_t size, const char *msg)
{
    if (err && size)
        snprintf(err, size, "%s", msg);
}

int32_t wsel_router_create(const wsel_router_options *opts, wsel_router **out, char *err,
                           size_t err_size)
{
    if (!opts || !out || !opts->host) {
        set_err(err, err_size, "wsel_router_create: options with a host are required");
        return WSEL_EINVAL;
    }
    if (opts->kv_source > WSEL_ROUTER_KV_EVENTS) {
        set_err(err, err_size,
                "wsel_router_create: kv_source is 0 (history) or 1 (events)");
        return WSEL_EINVAL;
    }
    wsel_router *r = calloc(1, sizeof(*r));
    if (!r)
        goto nomem;
    size_t n = opts->struct_size && opts->struct_size < sizeof(*opts) ? opts->struct_size
                                                                      : sizeof(*opts);
    memcpy(&r->opt, opts, n);
    wsel_router_options *o = &r->opt;
    if (o->kv_threads > WSEL_ROUTER_KV_THREADS_NORMAL) {
        free(r);
        set_err(err, err_size, "wsel_router_create: kv_threads is 0 (low) or 1 (normal)");
        return WSEL_EINVAL;
    }
    o->block_size = o->block_size ? o->block_size : 64;
    o->max_rows = o->max_rows ? o->max_rows : 1024;
    o->capacity_blocks = o->capacity_blocks ? o->capacity_blocks : 16384;
    /* 4 x block_size, saturated: a block size above 2^30 would wrap it. */
    uint64_t chunk = 4ull * o->block_size;
    if (!o->text_chunk_chars)
        o->text_chunk_chars = chunk < UINT32_MAX ? (uint32_t)chunk : UINT32_MAX;
    o->max_prompt_blocks = o->max_prompt_blocks ? o->max_prompt_blocks : 8192;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->dec_mu, NULL);
    r->epoch = 1;
    r->next_request_id = 1;
    r->req_free = RT_NIL;
    rt_seg_init(&r->req, 7); /* 256 requests first */
    uint32_t m = o->max_rows;
    r->workers = calloc(m, sizeof(*r->workers));
    r->slots = calloc(m, sizeof(*r->slots));
    r->load = calloc(m, sizeof(*r->load));
    r->rows = calloc(m, sizeof(*r->rows));
    r->ov = calloc(m, sizeof(*r->ov));
    r->ov_slots = calloc(m, sizeof(*r->ov_slots));
    r->hashes = calloc(o->max_prompt_blocks, sizeof(*r->hashes));
    r->pend_hashes = calloc(o->max_prompt_blocks, sizeof(*r->pend_hashes));
    if (!r->workers || !r->slots || !r->load || !r->rows || !r->ov || !r->ov_slots || !r->hashes ||
        !r->pend_hashes)
        goto nomem;
    for (uint32_t s = 0; s < m; s++)
        r->slots[s].worker = RT_NIL;
    if (rt_index_init(&r->ix, m, o->capacity_blocks,
                      o->kv_source == WSEL_ROUTER_KV_EVENTS) != 0 ||
        rt_map_init(&r->worker_ids, m) != 0 || rt_map_init(&r->reqs, 1024) != 0 ||
        rt_table_init(&r->table, m) != 0)
        goto nomem;
    if (o->kv_source == WSEL_ROUTER_KV_EVENTS && rt_kvsub_start(r) != 0) {
        set_err(err, err_size, "wsel_router_create: cannot start the KV event thread");
        wsel_router_destroy(r);
        return WSEL_EIO;
    }
    *out = r;
    return 0;
nomem:
    set_err(err, err_size, "wsel_router_create: out of memory");
    wsel_router_destroy(r);
    return WSEL_ENOMEM;
}

void wsel_router_destroy(wsel_router *r)
{
    if (!r)
        return;
    wsel_router_sync_stop(r);
    wsel_router_history_stop(r);
    rt_kvsub_stop(r);
    for (uint32_t w = 0; r->workers && w < r->opt.max_rows; w++) {
        for (uint32_t i = 0; r->workers[w].kv_endpoints && i < r->workers[w].dp_size; i++)
            free(r->workers[w].kv_endpoints[i]);
        free(r->workers[w].kv_endpoints);
    }
    free(r->workers);
    free(r->slots);
    free(r->load);
    free(r->rows);
    free(r->ov);
    free(r->ov_slots);
    free(r->hashes);
    free(r->pend_hashes);
    rt_seg_free(&r->req);
    rt_decoder_free(r->dec);
    rt_index_free(&r->ix);
    rt_map_free(&r->worker_ids);
    rt_map_free(&r->reqs);
    rt_table_free(&r->table);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->dec_mu);
    free(r);
}

uint64_t wsel_router_epoch(const wsel_router *r)
{
    if (!r)
        return 0; /* epochs start at 1: 0 is never a router's */
    wsel_router *m = (wsel_router *)r;
    pthread_mutex_lock(&m->mu);
    uint64_t e = r->epoch;
    pthread_mutex_unlock(&m->mu);
    return e;
}

void wsel_router_read_counters(wsel_router *r, wsel_router_counters *out)
{
    if (!r || !out)
        return;
    pthread_mutex_lock(&r->mu);
    rt_flush_pending(r);
    *out = r->c;
    out->index_blocks = r->ix.nblocks;
    out->index_entries = r->ix.entries;
    out->index_evictions = r->ix.evictions;
    out->index_bytes = rt_index_bytes(&r->ix);
    out->epoch = r->epoch;
    pthread_mutex_unlock(&r->mu);
}

int32_t wsel_router_read_kv_cpu(wsel_router *r, wsel_router_kv_cpu *out)
{
    if (!r || !out || out->struct_size < offsetof(wsel_router_kv_cpu, messages))
        return WSEL_EINVAL;
    wsel_router_kv_cpu v = {.struct_size = out->struct_size};
    pthread_mutex_lock(&r->mu);
    v.messages = r->kv_cpu_messages;
    v.decode_ns = r->kv_decode_ns;
    v.apply_ns = r->kv_apply_ns;
    pthread_mutex_unlock(&r->mu);
    memcpy(out, &v, out->struct_size < sizeof(v) ? out->struct_size : sizeof(v));
    return 0;
}

static uint32_t flags_of(const wsel_router *r, uint32_t sid)
{
    const rt_slot *s = &r->slots[sid];
    const rt_load *ld = &r->load[sid];
    const rt_sync_row *peers = rt_sync_load(r, sid); /* as the route adds them */
    uint32_t f = 0;
    if (r->workers[s->worker].draining || r->workers[s->worker].unavailable)
        f |= WSEL_ROW_EXCLUDED;
    if ((r->opt.busy_active_requests &&
         ld->active_requests + peers->requests >= r->opt.busy_active_requests) ||
        (r->opt.busy_prefill_tokens &&
         ld->active_prefill_tokens + peers->prefill >= r->opt.busy_prefill_tokens))
        f |= WSEL_ROW_BUSY;
    return f;
}

uint32_t wsel_router_read_ranks(wsel_router *r, wsel_router_rank_info *out, uint32_t max)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    rt_flush_pending(r);
    uint32_t n = r->num_rows;
    for (uint32_t i = 0; out && i < n && i < max; i++) {
        uint32_t sid = r->rows[i];
        const rt_slot *s = &r->slots[sid];
        out[i] = (wsel_router_rank_info){
            .worker_id = r->workers[s->worker].id,
            .dp_rank = s->rank,
            .active_requests = r->load[sid].active_requests,
            .active_prefill_tokens = r->load[sid].active_prefill_tokens,
            .active_blocks = r->load[sid].active_blocks,
            .cached_blocks = rt_index_slot_count(&r->ix, sid),
            .flags = flags_of(r, sid),
        };
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

uint32_t wsel_router_read_overlaps(wsel_router *r, const uint32_t *tokens,
                                   uint32_t num_tokens, uint32_t *out, uint32_t max)
{
    if (!r || (!tokens && num_tokens))
        return 0;
    pthread_mutex_lock(&r->mu);
    rt_flush_pending(r);
    uint32_t nb = wsel_router_hash_tokens(tokens, num_tokens, r->opt.block_size, r->hashes,
                                          r->opt.max_prompt_blocks);
    rt_overlaps(r, nb);
    uint32_t n = r->num_rows;
    for (uint32_t i = 0; out && i < n && i < max; i++)
        out[i] = r->ov[r->rows[i]];
    pthread_mutex_unlock(&r->mu);
    return n;
}

const char *wsel_router_kv_skip_name(uint32_t reason)
{
    static const char *const names[WSEL_KV_SKIP_REASONS] = {
        "frames",     "msgpack", "shape",  "unknown_type",
        "block_size", "parent",  "tokens", "rank"};
    return reason < WSEL_KV_SKIP_REASONS ? names[reason] : "unknown";
}
