// SPDX-License-Identifier: Apache-2.0
/* route.c -- wsel_router_route (overlaps -> table -> select -> accounting)
 * and the two load notices, first token and finished. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router_internal.h"
#include "sync.h"

/* Request qi's record. */
static inline rt_req *req_at(const wsel_router *r, uint32_t qi)
{
    return RT_SEG_AT(&r->req, rt_req, qi);
}

/* A free request record: off the free list, or a fresh one (a new
 * segment when full: nothing moved). */
static int req_alloc(wsel_router *r, uint32_t *out)
{
    if (r->req_free != RT_NIL) {
        *out = r->req_free;
        r->req_free = req_at(r, *out)->next_free;
        return 0;
    }
    return rt_seg_fresh(&r->req, sizeof(rt_req), out);
}

/* Slot i back on the free list. */
static void req_unalloc(wsel_router *r, uint32_t i)
{
    req_at(r, i)->next_free = r->req_free;
    r->req_free = i;
}

static void req_release(wsel_router *r, uint32_t i)
{
    rt_map_del(&r->reqs, req_at(r, i)->id);
    req_unalloc(r, i);
}

/* Hash the prompt into r->hashes; returns the block count, *isl the
 * request's length in tokens. */
static uint32_t hash_prompt(wsel_router *r, const wsel_route_request *q, uint32_t *isl)
{
    if (q->tokens) {
        *isl = q->num_tokens;
        return wsel_router_hash_tokens(q->tokens, q->num_tokens, r->opt.block_size,
                                       r->hashes, r->opt.max_prompt_blocks);
    }
    size_t est = q->text_len / 4;
    *isl =
        q->isl_tokens ? q->isl_tokens : (uint32_t)(est > UINT32_MAX ? UINT32_MAX : est);
    if (!q->text)
        return 0;
    return wsel_router_hash_text(q->text, q->text_len, r->opt.text_chunk_chars, r->hashes,
                                 r->opt.max_prompt_blocks);
}

void rt_record_history(wsel_router *r, uint32_t sid, const uint64_t *hashes, uint32_t n)
{
    rt_index_prefetch(&r->ix, sid, hashes, NULL, n);
    /* Deepest first, so the prefix head is the most recent entry and
     * the LRU evicts a prefix from its tail, as a radix tree would. */
    for (uint32_t i = n; i-- > 0;)
        if (rt_index_touch(&r->ix, sid, hashes[i], 0, 0) != 0)
            break;
}

/* Record this router's own route as history, and share it. */
static void record_history(wsel_router *r, uint32_t sid, const uint64_t *hashes,
                           uint32_t n)
{
    rt_record_history(r, sid, hashes, n);
    if (r->hist)
        rt_hist_publish(r, sid, hashes, n);
}

void rt_flush_pending(wsel_router *r)
{
    if (r->pend_n == 0)
        return;
    const rt_slot *s = &r->slots[r->pend_slot];
    if (s->worker != RT_NIL && s->gen == r->pend_gen)
        record_history(r, r->pend_slot, r->pend_hashes, r->pend_n);
    r->pend_n = 0;
}

void wsel_router_flush(wsel_router *r)
{
    if (!r)
        return;
    rt_lock_request(r);
    rt_flush_pending(r);
    rt_unlock_request(r);
}

/* The request's id: the caller's, or the next free one when it passed 0.
 * WSEL_ESTATE when the caller's id is still routed. */
static int32_t assign_id(wsel_router *r, uint64_t asked, uint64_t *id)
{
    if (asked != 0) {
        *id = asked;
        return rt_map_get(&r->reqs, asked) != RT_MAP_NONE ? WSEL_ESTATE : 0;
    }
    do
        *id = r->next_request_id++;
    while (*id == 0 || rt_map_get(&r->reqs, *id) != RT_MAP_NONE);
    return 0;
}

/* The policy's request for q: its nb hashed blocks (r->hashes), isl
 * tokens, the caller's overrides, a stream seeded by the host. */
static int32_t make_request(wsel_router *r, const wsel_route_request *q, uint64_t id,
                            uint32_t isl, uint32_t nb, uint64_t now, wsel_request *req,
                            wsel_rng *rng)
{
    memset(req, 0, sizeof(*req));
    req->request_id = id;
    req->timestamp_us = now;
    req->isl_tokens = isl;
    req->block_size = r->opt.block_size;
    req->num_block_hashes = nb;
    req->block_hashes = nb ? r->hashes : NULL;
    req->overlap_score_weight =
        (q->overrides & WSEL_ROUTE_SET_WEIGHT) ? q->overlap_score_weight : 1.0;
    req->temperature = (q->overrides & WSEL_ROUTE_SET_TEMPERATURE) ? q->temperature : 0.0;
    wsel_host_prepare_request_sized(r->opt.host, req, sizeof(*req), rng);
    rt_sync_salt(r, req, rng);
    if (q->overrides & WSEL_ROUTE_SET_TEMPERATURE)
        req->overrides |= WSEL_OVERRIDE_TEMPERATURE;
    if (!isfinite(req->overlap_score_weight) || req->overlap_score_weight < 0.0) {
        rt_log(r, WSEL_LOG_ERROR,
               "route: overlap_score_weight is negative or not finite");
        return WSEL_EINVAL;
    }
    return 0;
}

/* The table's row for req: the policy's answer through the host, or with
 * WSEL_ROUTE_BUILTIN the host's built-in rule on the table as built.
 * WSEL_ANSWER_*, or a negative error (no candidate counted). */
static int32_t choose_row(wsel_router *r, const wsel_route_request *q,
                          const wsel_request *req, const wsel_table *table, wsel_rng *rng,
                          uint32_t *row)
{
    int32_t rc;
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    if (q->overrides & WSEL_ROUTE_BUILTIN) {
        uint8_t skip = 0;
        rc = wsel_eligible_skip(table->flags, r->num_rows, &skip, NULL);
        if (rc == 0)
            rc = wsel_argmin(table->cost, table->flags, r->num_rows, skip, rng,
                             &choice.row);
        if (rc == 0)
            rc = WSEL_ANSWER_FALLBACK;
    } else {
        rc = wsel_host_select(r->opt.host, req, table, &choice);
    }
    if (rc == WSEL_ENOCANDIDATE)
        r->c.no_candidate++;
    *row = choice.row;
    return rc;
}

/* Record request id routed to slot sid (its prefill, blocks and time)
 * and add its load to the slot. 0 or WSEL_ENOMEM. */
static int32_t account_request(wsel_router *r, uint64_t id, uint32_t sid, uint32_t isl,
                               uint64_t now)
{
    rt_slot *s = &r->slots[sid];
    rt_load *ld = &r->load[sid];
    uint32_t ov = r->ov[sid];
    uint64_t covered = (uint64_t)ov * r->opt.block_size;
    uint64_t prefill = isl > covered ? isl - covered : 0;
    uint64_t full = isl / r->opt.block_size;
    uint64_t blocks = full > ov ? full - ov : 0;
    uint32_t qi;
    if (req_alloc(r, &qi) != 0)
        return WSEL_ENOMEM;
    /* assign_id found id absent. */
    if (rt_map_put_new(&r->reqs, id, qi) != 0) {
        req_unalloc(r, qi);
        return WSEL_ENOMEM;
    }
    *req_at(r, qi) = (rt_req){.id = id,
                          .prefill = prefill,
                          .blocks = blocks,
                          .t_route = now,
                          .isl = isl,
                          .cached = (uint32_t)(covered < isl ? covered : isl),
                          .slot = sid,
                          .gen = s->gen,
                          .prefilling = 1};
    ld->active_prefill_tokens += prefill;
    ld->active_blocks += blocks;
    ld->active_requests++;
    rt_table_note_load(r, sid);
    rt_sync_note(r, sid, 1);
    rt_sync_note_route(r, sid, prefill, blocks);
    return 0;
}

/* What the index learns from a route to slot sid: with KV events, that
 * its cached prefix was used; otherwise the prompt's nb blocks as routing
 * history (now, or deferred to the next call). */
static void remember_prompt(wsel_router *r, const wsel_route_request *q, uint32_t sid,
                            uint32_t nb)
{
    if (r->opt.kv_source == WSEL_ROUTER_KV_EVENTS) {
        /* The engine will use the cached prefix, which keeps it in its
         * cache; KV events say nothing of a hit, so the router's LRU is
         * told here, deepest block first as a prompt is recorded (the
         * prefix head ends the most recent). */
        rt_index_refresh_prefix(&r->ix, sid, r->hashes, r->ov[sid]);
    } else if (nb > 0) {
        if (q->overrides & WSEL_ROUTE_DEFER_HISTORY) {
            /* The buffers trade places: no copy. */
            uint64_t *h = r->pend_hashes;
            r->pend_hashes = r->hashes;
            r->hashes = h;
            r->pend_n = nb;
            r->pend_slot = sid;
            r->pend_gen = r->slots[sid].gen;
        } else {
            record_history(r, sid, r->hashes, nb);
        }
    }
}

/* Count a route to slot sid answered as `answer` and describe it. */
static void report_route(wsel_router *r, const wsel_route_request *q, uint64_t id,
                         uint32_t sid, uint32_t nb, int32_t answer,
                         wsel_route_result *res)
{
    const rt_slot *s = &r->slots[sid];
    uint32_t ov = r->ov[sid];
    r->c.routes++;
    if (q->overrides & WSEL_ROUTE_BUILTIN)
        r->c.builtin_routes++;
    else if (answer == WSEL_ANSWER_PLUGIN)
        r->c.plugin_answers++;
    else
        r->c.fallbacks++;
    r->c.prompt_blocks += nb;
    r->c.overlap_blocks += ov;
    res->request_id = id;
    res->worker_id = r->workers[s->worker].id;
    res->dp_rank = s->rank;
    res->answer = (uint32_t)answer;
    res->num_blocks = nb;
    res->overlap_blocks = ov;
    snprintf(res->address, sizeof(res->address), "%s", r->workers[s->worker].address);
}

void rt_overlaps(wsel_router *r, uint32_t nb)
{
    for (uint32_t i = 0; i < r->ov_n; i++)
        r->ov[r->ov_slots[i]] = 0;
    rt_index_prefetch(&r->ix, RT_NIL, r->hashes, NULL, nb);
    r->ov_n = rt_index_overlaps(&r->ix, r->hashes, nb, r->ov, r->ov_slots);
}

/* Overlaps -> the table -> a row -> accounting, under the mutex. */
static int32_t route_locked(wsel_router *r, const wsel_route_request *q,
                            wsel_route_result *res)
{
    rt_flush_pending(r);
    uint64_t id;
    int32_t rc = assign_id(r, q->request_id, &id);
    if (rc < 0)
        return rc;
    if (r->num_rows == 0) {
        r->c.no_candidate++;
        return WSEL_ENOCANDIDATE;
    }
    uint32_t isl = 0;
    uint32_t nb = hash_prompt(r, q, &isl);
    rt_overlaps(r, nb);
    wsel_rng rng;
    wsel_request req;
    const uint64_t now = rt_now_us(r);
    rc = make_request(r, q, id, isl, nb, now, &req, &rng);
    if (rc < 0)
        return rc;
    const wsel_table *table = rt_table_fill(r, &req);
    uint32_t row;
    int32_t answer = choose_row(r, q, &req, table, &rng, &row);
    if (answer != WSEL_ANSWER_PLUGIN)
        rt_table_distrust(r);
    if (answer < 0)
        return answer;
    uint32_t sid = r->rows[row];
    rc = account_request(r, id, sid, isl, now);
    if (rc < 0)
        return rc;
    remember_prompt(r, q, sid, nb);
    report_route(r, q, id, sid, nb, answer, res);
    return 0;
}

int32_t wsel_router_route(wsel_router *r, const wsel_route_request *q,
                          wsel_route_result *res)
{
    /* The caller's struct as far as it goes, zero past it (a caller built
     * against this header fills it all; one built against a later one
     * passes a larger struct_size, whose fields past ours are not read). */
    if (!r || !q || !res || q->struct_size < WSEL_ROUTE_REQUEST_SIZE_1_0)
        return WSEL_EINVAL;
    wsel_route_request in;
    memset(&in, 0, sizeof(in));
    memcpy(&in, q, q->struct_size < sizeof(in) ? q->struct_size : sizeof(in));
    if (in.tokens == NULL && in.num_tokens != 0)
        return WSEL_EINVAL;
    uint32_t *ids = NULL; /* text or chat tokenized, without the mutex */
    rt_tokenize_prompt(r, &in, &ids);
    rt_lock_request(r);
    int32_t rc = route_locked(r, &in, res);
    rt_unlock_request(r);
    free(ids);
    return rc;
}

/* Take the mutex and find routed request `id` (*qi): 0 with the mutex
 * held, or WSEL_ENOENT with it released. */
static int32_t lock_routed(wsel_router *r, uint64_t id, uint32_t *qi)
{
    rt_lock_request(r);
    rt_flush_pending(r);
    *qi = rt_map_get(&r->reqs, id);
    if (*qi != RT_MAP_NONE)
        return 0;
    rt_unlock_request(r);
    return WSEL_ENOENT;
}

/* The live slot of request qi, or RT_NIL when its worker is gone. */
static uint32_t live_slot(const wsel_router *r, uint32_t qi)
{
    const rt_req *q = req_at(r, qi);
    const rt_slot *s = &r->slots[q->slot];
    return s->worker != RT_NIL && s->gen == q->gen ? q->slot : RT_NIL;
}

int32_t wsel_router_first_token(wsel_router *r, uint64_t request_id)
{
    if (!r)
        return WSEL_EINVAL;
    uint32_t qi;
    if (lock_routed(r, request_id, &qi) < 0)
        return WSEL_ENOENT;
    rt_req *q = req_at(r, qi);
    uint32_t sid = live_slot(r, qi);
    if (q->prefilling && sid != RT_NIL) {
        r->load[sid].active_prefill_tokens -= q->prefill;
        rt_table_note_load(r, sid);
        rt_sync_note(r, sid, 0);
    }
    if (q->prefilling) {
        uint64_t t = rt_now_us(r);
        /* 0 means "no first token": a same-microsecond one counts as 1. */
        q->t_first = t > q->t_route ? t : q->t_route + 1;
    }
    q->prefilling = 0;
    rt_unlock_request(r);
    return 0;
}

int32_t wsel_router_finished_ex(wsel_router *r, uint64_t request_id,
                                const wsel_router_finish *info)
{
    if (!r || (info && info->struct_size < offsetof(wsel_router_finish, output_tokens)))
        return WSEL_EINVAL;
    wsel_router_finish in;
    memset(&in, 0, sizeof(in));
    if (info)
        memcpy(&in, info,
               info->struct_size < sizeof(in) ? info->struct_size : sizeof(in));
    uint32_t qi;
    if (lock_routed(r, request_id, &qi) < 0)
        return WSEL_ENOENT;
    rt_req *q = req_at(r, qi);
    uint32_t sid = live_slot(r, qi);
    wsel_outcome o;
    memset(&o, 0, sizeof(o));
    if (sid != RT_NIL) {
        rt_slot *s = &r->slots[sid];
        rt_load *ld = &r->load[sid];
        if (q->prefilling)
            ld->active_prefill_tokens -= q->prefill;
        ld->active_blocks -= q->blocks;
        ld->active_requests--;
        rt_table_note_load(r, sid);
        rt_sync_note(r, sid, 0);
        uint64_t now = rt_now_us(r);
        o.struct_size = sizeof(o);
        o.request_id = request_id;
        o.worker_id = r->workers[s->worker].id;
        o.dp_rank = s->rank;
        o.ttft_us = in.ttft_us ? in.ttft_us : q->t_first ? q->t_first - q->t_route : 0;
        o.e2e_us = in.e2e_us ? in.e2e_us : now > q->t_route ? now - q->t_route : 0;
        o.finished_us = now;
        o.prompt_tokens = q->isl;
        o.cached_tokens = (in.flags & WSEL_ROUTER_FINISH_CACHED_KNOWN)
                              ? (in.cached_tokens < q->isl ? in.cached_tokens : q->isl)
                              : q->cached;
        o.output_tokens = in.output_tokens;
        o.flags = (in.flags & WSEL_ROUTER_FINISH_FAILED) ? WSEL_OUTCOME_FAILED : 0;
    }
    req_release(r, qi);
    if (sid != RT_NIL)
        rt_check_drained(r, r->slots[sid].worker);
    rt_unlock_request(r);
    /* Outside the mutex: a slow policy hook never holds up a route. */
    if (sid != RT_NIL)
        wsel_host_request_outcome(r->opt.host, &o);
    return 0;
}

int32_t wsel_router_finished(wsel_router *r, uint64_t request_id)
{
    return wsel_router_finished_ex(r, request_id, NULL);
}
