// SPDX-License-Identifier: Apache-2.0
/*
 * model.c -- the model thread: wsel sim's engine model (sim_engine) run in
 * real time. Model time is wall time since start x --time-scale; a step
 * ends when the wall clock reaches its model end time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "kv_events.h"

/* Tokens of one block of a request in the model, for BlockStored. */
typedef struct eng_block {
    uint32_t refs;
    int has_parent;
    uint64_t parent;
    uint32_t tokens[];
} eng_block;

/* Connections to resume once io_lock is released. */
typedef struct resume_list {
    void **conns;
    size_t n, cap;
} resume_list;

typedef struct step_ctx {
    eng *e;
    resume_list resume;
    eng_req **done;
    size_t num_done, done_cap;
} step_ctx;

int64_t eng_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int64_t model_now(const eng *e)
{
    return (int64_t)((double)(eng_now_ns() - e->t0_ns) * e->opt.time_scale);
}

static void push_resume(step_ctx *c, eng_req *r)
{
    if (!r->suspended)
        return;
    if (c->resume.n == c->resume.cap) {
        size_t cap = c->resume.cap ? c->resume.cap * 2 : 64;
        void **grown = realloc(c->resume.conns, cap * sizeof(*grown));
        if (!grown)
            return; /* the connection resumes at its next progress */
        c->resume.conns = grown;
        c->resume.cap = cap;
    }
    r->suspended = 0;
    c->resume.conns[c->resume.n++] = r->conn;
}

static void blocks_register(eng *e, const eng_req *r)
{
    const uint32_t bs = e->opt.cluster.block_size;
    for (uint32_t b = 0; b < r->num_blocks; b++) {
        int inserted;
        uint64_t *v = sim_u64map_upsert(&e->block_tokens, r->blocks[b], &inserted);
        if (!v)
            return; /* BlockStored then goes out without its tokens */
        if (!inserted) {
            ((eng_block *)(uintptr_t)*v)->refs++;
            continue;
        }
        eng_block *blk = malloc(sizeof(*blk) + bs * sizeof(uint32_t));
        if (!blk) {
            sim_u64map_erase(&e->block_tokens, r->blocks[b]);
            return;
        }
        blk->refs = 1;
        blk->has_parent = b > 0;
        blk->parent = b > 0 ? r->blocks[b - 1] : 0;
        memcpy(blk->tokens, r->tokens + (size_t)b * bs, bs * sizeof(uint32_t));
        *v = (uint64_t)(uintptr_t)blk;
    }
}

static void blocks_unregister(eng *e, const eng_req *r)
{
    for (uint32_t b = 0; b < r->num_blocks; b++) {
        uint64_t *v = sim_u64map_find(&e->block_tokens, r->blocks[b]);
        if (!v)
            continue;
        eng_block *blk = (eng_block *)(uintptr_t)*v;
        if (--blk->refs == 0) {
            sim_u64map_erase_found(&e->block_tokens, v);
            free(blk);
        }
    }
}

/* sim_engine_observer.on_request: under model_lock and io_lock. */
static void on_request(void *ctx, uint64_t id, uint32_t cached, uint32_t generated,
                       int finished)
{
    step_ctx *c = ctx;
    eng *e = c->e;
    uint64_t *v = sim_u64map_find(&e->reqs, id);
    if (!v)
        return;
    eng_req *r = (eng_req *)(uintptr_t)*v;
    eng_rank_stats *st = &e->stats[r->rank];
    int changed = 0;
    if (!r->admitted && (generated > 0 || !finished || cached > 0)) {
        r->admitted = 1;
        r->cached = cached;
        st->waiting--;
        st->running++;
        st->prefix_queries += r->isl;
        st->prefix_hits += cached;
        st->prompt_tokens += r->isl;
        changed = 1;
    }
    if (generated > r->generated) {
        st->generation_tokens += generated - r->generated;
        r->generated = generated;
        changed = 1;
    }
    if (finished) {
        if (r->admitted)
            st->running--;
        else
            st->waiting--;
        st->finished++;
        r->done = 1;
        changed = 1;
        sim_u64map_erase_found(&e->reqs, v);
        if (c->num_done == c->done_cap) {
            size_t cap = c->done_cap ? c->done_cap * 2 : 64;
            eng_req **grown = realloc(c->done, cap * sizeof(*grown));
            if (grown) {
                c->done = grown;
                c->done_cap = cap;
            }
        }
        if (c->num_done < c->done_cap)
            c->done[c->num_done++] = r; /* its model reference, dropped later */
    }
    if (changed)
        push_resume(c, r);
}

/* sim_engine_observer.on_kv: under model_lock. */
static void on_kv(void *ctx, uint32_t rank, uint64_t hash, int stored)
{
    step_ctx *c = ctx;
    eng *e = c->e;
    if (!e->kv)
        return;
    if (!stored) {
        eng_kv_removed(e->kv, rank, hash);
        return;
    }
    uint64_t *v = sim_u64map_find(&e->block_tokens, hash);
    const eng_block *blk = v ? (const eng_block *)(uintptr_t)*v : NULL;
    eng_kv_stored(e->kv, rank, hash, blk && blk->has_parent, blk ? blk->parent : 0,
                  blk ? blk->tokens : NULL);
}

/* vLLM's DP balancing: the rank with the fewest waiting x 4 + running. */
static uint32_t least_loaded(const eng *e)
{
    uint32_t best = 0;
    uint64_t best_score = UINT64_MAX;
    for (uint32_t k = 0; k < e->num_ranks; k++) {
        uint64_t score = e->stats[k].waiting * 4 + e->stats[k].running;
        if (score < best_score) {
            best = k;
            best_score = score;
        }
    }
    return best;
}

static void admit(eng *e, step_ctx *c, eng_req *r, int64_t now)
{
    char err[256];
    pthread_mutex_lock(&e->io_lock);
    if (r->rank == UINT32_MAX)
        r->rank = least_loaded(e);
    int inserted;
    uint64_t *v = r->cancelled ? NULL : sim_u64map_upsert(&e->reqs, r->id, &inserted);
    if (v) {
        *v = (uint64_t)(uintptr_t)r;
        e->stats[r->rank].waiting++;
    }
    pthread_mutex_unlock(&e->io_lock);
    int32_t rc = -1;
    if (v) {
        blocks_register(e, r);
        rc = sim_engine_submit(e->model, now, r->id, r->rank, r->isl, r->osl, r->blocks,
                               r->num_blocks, err, sizeof(err));
    }
    if (rc == 0)
        return;
    if (v && !e->opt.quiet)
        fprintf(stderr, "wsel-engine: request %llu: %s\n", (unsigned long long)r->id,
                err);
    pthread_mutex_lock(&e->io_lock);
    if (v) {
        sim_u64map_erase(&e->reqs, r->id);
        e->stats[r->rank].waiting--;
        blocks_unregister(e, r);
    }
    r->done = 1;
    push_resume(c, r);
    pthread_mutex_unlock(&e->io_lock);
    eng_req_release(e, r);
}

static void finish_step_ctx(eng *e, step_ctx *c)
{
    for (size_t i = 0; i < c->resume.n; i++)
        eng_http_resume(c->resume.conns[i]);
    c->resume.n = 0;
    for (size_t i = 0; i < c->num_done; i++) {
        blocks_unregister(e, c->done[i]);
        eng_req_release(e, c->done[i]);
    }
    c->num_done = 0;
}

/* Wait for the inbox or until the model time `until` (< 0: no limit). */
static void wait_inbox(eng *e, int64_t until)
{
    pthread_mutex_lock(&e->inbox_lock);
    while (!e->stop && !e->inbox_head && e->num_cancels == 0) {
        if (until < 0) {
            pthread_cond_wait(&e->inbox_cond, &e->inbox_lock);
            continue;
        }
        int64_t wall = e->t0_ns + (int64_t)((double)until / e->opt.time_scale);
        if (eng_now_ns() >= wall)
            break;
        struct timespec ts = {wall / 1000000000ll, wall % 1000000000ll};
        if (pthread_cond_timedwait(&e->inbox_cond, &e->inbox_lock, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&e->inbox_lock);
}

static void *model_main(void *arg)
{
    eng *e = arg;
    step_ctx c = {.e = e};
    uint64_t *cancels = NULL;
    size_t cancel_cap = 0;
    sim_engine_observer ob = {.ctx = &c, .on_request = on_request, .on_kv = on_kv};
    sim_engine_set_observer(e->model, &ob);
    for (;;) {
        pthread_mutex_lock(&e->inbox_lock);
        if (e->stop) { /* what is queued stays for eng_http_stop to end */
            pthread_mutex_unlock(&e->inbox_lock);
            break;
        }
        eng_req *in = e->inbox_head;
        e->inbox_head = e->inbox_tail = NULL;
        size_t nc = e->num_cancels;
        if (nc > cancel_cap) {
            uint64_t *grown = realloc(cancels, nc * sizeof(*grown));
            if (grown) {
                cancels = grown;
                cancel_cap = nc;
            }
        }
        if (nc > cancel_cap)
            nc = cancel_cap;
        if (nc)
            memcpy(cancels, e->cancels, nc * sizeof(*cancels));
        e->num_cancels -= nc;
        if (e->num_cancels)
            memmove(e->cancels, e->cancels + nc, e->num_cancels * sizeof(*cancels));
        pthread_mutex_unlock(&e->inbox_lock);

        pthread_mutex_lock(&e->model_lock);
        int64_t now = model_now(e), next;
        /* Steps due by now, in time order, before anything arrives. */
        while (sim_engine_next_step_end(e->model, &next) && next <= now) {
            pthread_mutex_lock(&e->io_lock);
            sim_engine_step(e->model);
            pthread_mutex_unlock(&e->io_lock);
            finish_step_ctx(e, &c);
        }
        for (eng_req *r = in, *nx; r; r = nx) {
            nx = r->next;
            admit(e, &c, r, now);
        }
        for (size_t i = 0; i < nc; i++) {
            pthread_mutex_lock(&e->io_lock);
            sim_engine_cancel(e->model, cancels[i]);
            pthread_mutex_unlock(&e->io_lock);
        }
        finish_step_ctx(e, &c);
        if (e->kv)
            eng_kv_flush(e->kv);
        int have = sim_engine_next_step_end(e->model, &next);
        pthread_mutex_unlock(&e->model_lock);
        wait_inbox(e, have ? next : -1);
    }
    free(cancels);
    free(c.resume.conns);
    free(c.done);
    return NULL;
}

int eng_model_start(eng *e, char *err, size_t err_size)
{
    e->num_ranks = sim_cluster_ranks(&e->opt.cluster);
    if (sim_u64map_init(&e->reqs, 1024, 1) != 0 ||
        sim_u64map_init(&e->block_tokens, 1024, 1) != 0) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    if (sim_engine_create(&e->model, &e->opt.cluster, NULL, err, err_size) != 0)
        return -1;
    e->t0_ns = eng_now_ns();
    if (pthread_create(&e->model_thread, NULL, model_main, e) != 0) {
        snprintf(err, err_size, "cannot start the model thread");
        return -1;
    }
    return 0;
}

void eng_model_stop(eng *e)
{
    pthread_mutex_lock(&e->inbox_lock);
    e->stop = 1;
    pthread_cond_signal(&e->inbox_cond);
    pthread_mutex_unlock(&e->inbox_lock);
    pthread_join(e->model_thread, NULL);
}

void eng_model_submit(eng *e, eng_req *r)
{
    pthread_mutex_lock(&e->io_lock);
    r->refs++;
    pthread_mutex_unlock(&e->io_lock);
    pthread_mutex_lock(&e->inbox_lock);
    r->next = NULL;
    if (e->inbox_tail)
        e->inbox_tail->next = r;
    else
        e->inbox_head = r;
    e->inbox_tail = r;
    pthread_cond_signal(&e->inbox_cond);
    pthread_mutex_unlock(&e->inbox_lock);
}

void eng_model_cancel(eng *e, uint64_t id)
{
    pthread_mutex_lock(&e->inbox_lock);
    if (e->num_cancels == e->cancel_cap) {
        size_t cap = e->cancel_cap ? e->cancel_cap * 2 : 64;
        uint64_t *grown = realloc(e->cancels, cap * sizeof(*grown));
        if (!grown) {
            pthread_mutex_unlock(&e->inbox_lock);
            return; /* it runs to its end instead */
        }
        e->cancels = grown;
        e->cancel_cap = cap;
    }
    e->cancels[e->num_cancels++] = id;
    pthread_cond_signal(&e->inbox_cond);
    pthread_mutex_unlock(&e->inbox_lock);
}

void eng_req_release(eng *e, eng_req *r)
{
    pthread_mutex_lock(&e->io_lock);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&e->io_lock);
    if (!last)
        return;
    free(r->tokens);
    free(r->blocks);
    free(r->body);
    free(r);
}
