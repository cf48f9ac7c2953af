// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_forward.c -- the descriptor an isolated generation presents to
 * the rest of the host: each of its functions copies its arguments into the
 * helper's slot, calls, and reads the answer back.
 *
 * No allocation on the select path: the slot is mapped at switch time and
 * every copy goes into it. Callers are serialised by the channel mutex
 * (one slot per helper; docs/isolated.md, "Concurrency").
 */
#include <stdlib.h>
#include <string.h>

#include "isolated_channel.h"

/* A topology change (control thread) may take longer than a select; it
 * gets at least this long. A finished-request notice runs on a select
 * thread and gets the select deadline. */
#define HOOK_MIN_TIMEOUT_NS 100000000ull

static void copy_table(wsel_iso_slot *s, const wsel_table *t)
{
    uint32_t n = t->num_rows, g = t->num_groups;
    s->num_rows = n;
    s->num_groups = g;
    s->topology_epoch = t->topology_epoch;
    memcpy(s->worker_ids, t->worker_id, n * sizeof(uint64_t));
    memcpy(s->dp_ranks, t->dp_rank, n * sizeof(uint32_t));
    memcpy(s->overlap_blocks, t->overlap_blocks, n * sizeof(uint32_t));
    memcpy(s->prefill_tokens, t->prefill_tokens, n * sizeof(uint64_t));
    memcpy(s->decode_blocks, t->decode_blocks, n * sizeof(uint64_t));
    memcpy(s->cost, t->cost, n * sizeof(double));
    memcpy(s->kv_capacity_blocks, t->kv_capacity_blocks, n * sizeof(uint64_t));
    memcpy(s->active_requests, t->active_requests, n * sizeof(uint32_t));
    memcpy(s->flags, t->flags, n);
    memcpy(s->group_first_row, t->group_first_row, g * sizeof(uint32_t));
    memcpy(s->group_row_count, t->group_row_count, g * sizeof(uint32_t));
}

static int table_fits(const wsel_table *t)
{
    return t->num_rows <= WSEL_ISO_MAX_ROWS && t->num_groups <= t->num_rows;
}

static void copy_request(wsel_iso_slot *s, const wsel_request *r)
{
    s->request_id = r->request_id;
    s->affinity_key = r->affinity_key;
    s->timestamp_us = r->timestamp_us;
    s->isl_tokens = r->isl_tokens;
    s->block_size = r->block_size;
    s->num_block_hashes = r->block_hashes != NULL ? r->num_block_hashes : 0;
    s->overlap_score_weight = r->overlap_score_weight;
    s->temperature = r->temperature;
    s->uniform = r->uniform;
    s->overrides =
        r->struct_size >= offsetof(wsel_request, overrides) + sizeof(r->overrides)
            ? r->overrides
            : 0;
    s->rng = *r->rng;
    if (s->num_block_hashes != 0)
        memcpy(s->block_hashes, r->block_hashes, s->num_block_hashes * sizeof(uint64_t));
}

int32_t wsel__isolated_select(void *channel, const wsel_request *request,
                              const wsel_table *table, wsel_choice *choice)
{
    wsel_isolated_channel *ch = channel;
    /* The slot's size is the host's limit, not the plugin's fault. */
    if (!table_fits(table) || (request->block_hashes != NULL &&
                               request->num_block_hashes > WSEL_ISO_MAX_HASHES))
        return WSEL_ISOLATED_EHOSTLIMIT;
    /* One deadline for the whole select: waiting for a late earlier answer
     * and this call together. */
    uint64_t deadline = wsel__iso_now_ns() + ch->deadline_ns;
    pthread_mutex_lock(&ch->mutex);
    int32_t rc = wsel__channel_ready(ch, deadline);
    if (rc < 0)
        goto out_unlock;
    wsel_iso_slot *s = wsel__channel_slot(ch);
    s->op = WSEL_ISO_OP_SELECT;
    copy_request(s, request);
    copy_table(s, table);
    rc = wsel__channel_call(ch, deadline);
    if (rc < 0)
        goto out_unlock;
    /* Read each output once: the helper is not trusted. */
    int32_t plugin_rc = *(volatile int32_t *)&s->rc;
    uint32_t row = *(volatile uint32_t *)&s->row;
    uint32_t reason = *(volatile uint32_t *)&s->reason;
    uint32_t choice_flags = *(volatile uint32_t *)&s->choice_flags;
    double score = *(volatile double *)&s->score;
    *request->rng = s->rng;
    if (plugin_rc != 0) { /* only 0 is success */
        rc = plugin_rc < 0 && plugin_rc > -1000 ? plugin_rc : WSEL_EPLUGIN;
        goto out_unlock;
    }
    wsel__channel_note_success(ch);
    choice->row = row;
    if (WSEL_CHOICE_HAS(choice, score)) {
        choice->reason = reason;
        choice->flags = choice_flags;
        choice->score = score;
    }
    rc = 0;
out_unlock:
    pthread_mutex_unlock(&ch->mutex);
    return rc;
}

static uint64_t hook_timeout(const wsel_isolated_channel *ch)
{
    return ch->deadline_ns > HOOK_MIN_TIMEOUT_NS ? ch->deadline_ns : HOOK_MIN_TIMEOUT_NS;
}

static void forward_finished(void *channel, uint64_t request_id, uint64_t worker_id,
                             uint32_t dp_rank)
{
    wsel_isolated_channel *ch = channel;
    uint64_t deadline = wsel__iso_now_ns() + ch->deadline_ns;
    pthread_mutex_lock(&ch->mutex);
    if (wsel__channel_ready(ch, deadline) == 0) {
        wsel_iso_slot *s = wsel__channel_slot(ch);
        s->op = WSEL_ISO_OP_FINISHED;
        s->request_id = request_id;
        s->worker_id = worker_id;
        s->dp_rank = dp_rank;
        wsel__channel_call(ch, deadline);
    }
    pthread_mutex_unlock(&ch->mutex);
}

/* The outcome (ABI 1.1), copied whole into the slot; the finished notice
 * goes before it on its own trip, as in process. */
static void forward_outcome(void *channel, const wsel_outcome *outcome)
{
    wsel_isolated_channel *ch = channel;
    uint64_t deadline = wsel__iso_now_ns() + ch->deadline_ns;
    pthread_mutex_lock(&ch->mutex);
    if (wsel__channel_ready(ch, deadline) == 0) {
        wsel_iso_slot *s = wsel__channel_slot(ch);
        s->op = WSEL_ISO_OP_OUTCOME;
        s->outcome = *outcome;
        wsel__channel_call(ch, deadline);
    }
    pthread_mutex_unlock(&ch->mutex);
}

static void forward_topology(void *channel, const wsel_table *table)
{
    wsel_isolated_channel *ch = channel;
    if (!table_fits(table))
        return;
    uint64_t deadline = wsel__iso_now_ns() + hook_timeout(ch);
    pthread_mutex_lock(&ch->mutex);
    if (wsel__channel_ready(ch, deadline) == 0) {
        wsel__channel_slot(ch)->op = WSEL_ISO_OP_TOPOLOGY;
        copy_table(wsel__channel_slot(ch), table);
        wsel__channel_call(ch, deadline);
    }
    pthread_mutex_unlock(&ch->mutex);
}

static void forward_destroy(void *channel)
{
    wsel_isolated_channel *ch = channel;
    wsel__channel_close(ch);
    free(ch);
}

int32_t wsel__isolated_generation_create(wsel_host *host, const char *path,
                                         const char *config, wsel_generation **out,
                                         char *err, size_t err_size)
{
    wsel_generation *gen = wsel__generation_alloc();
    wsel_isolated_channel *ch = calloc(1, sizeof(*ch));
    int32_t rc = WSEL_ENOMEM;
    if (gen == NULL || ch == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        goto out_free;
    }
    if (pthread_rwlock_init(&gen->lock, NULL) != 0) {
        wsel__set_error(err, err_size, "%s: cannot create the instance lock", path);
        goto out_free;
    }
    rc = wsel__channel_open(ch, host, path, config, err, err_size);
    if (rc < 0)
        goto out_destroy_lock;
    ch->desc.create = NULL; /* the helper created the instance */
    ch->desc.destroy = forward_destroy;
    ch->desc.select = wsel__isolated_select;
    ch->desc.on_request_finished =
        ch->lanes[0].slot->has_finished ? forward_finished : NULL;
    ch->desc.on_topology_changed =
        ch->lanes[0].slot->has_topology ? forward_topology : NULL;
    ch->desc.on_request_outcome = ch->lanes[0].slot->has_outcome ? forward_outcome : NULL;
    gen->lib = NULL; /* loaded in the helper, never in this process */
    gen->plugin = &ch->desc;
    gen->instance = ch;
    /* The channel mutex serialises calls into the helper; the shared lock
     * keeps the forwarded topology hook exclusive, as in process. */
    gen->lock_mode = WSEL_LOCK_SHARED;
    *out = gen;
    return 0;

out_destroy_lock:
    pthread_rwlock_destroy(&gen->lock);
out_free:
    free(ch);
    free(gen);
    return rc;
}
