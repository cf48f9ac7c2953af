// SPDX-License-Identifier: Apache-2.0
/*
 * router_bench.h -- what router_bench's parts share (router_bench.c):
 * the clock, the seeded generator, a router of W workers x D ranks, and
 * a vLLM KV event batch in msgpack.
 */
#ifndef WSEL_ROUTER_BENCH_H
#define WSEL_ROUTER_BENCH_H

#include <msgpack.h>
#include <stdint.h>

#include "wsel_router.h"

/* The calling thread's CPU time, microseconds. */
double rb_now_us(void);
/* The bench's seeded generator. */
uint32_t rb_rnd(void);
/* qsort's comparison of doubles. */
int rb_cmp_double(const void *a, const void *b);
/* A router (block size 64) of `workers` workers x `dp` ranks over host,
 * max_rows = workers x dp; exits on error. */
wsel_router *rb_make(wsel_host *host, uint32_t source, uint32_t workers, uint32_t dp,
                     uint32_t capacity);

/* One KVEventBatch of rank dp_rank: a BlockStored of `stored` blocks of 64
 * tokens (engine hashes first_hash, first_hash + 1, ...; no parent; token
 * ids tokens[0 .. stored x 64)), then, if `removed`, a BlockRemoved of
 * engine hashes removed_first, removed_first + 1, ... */
typedef struct rb_batch {
    uint64_t first_hash;
    uint32_t stored;
    const uint32_t *tokens;
    uint64_t removed_first;
    uint32_t removed;
    uint32_t dp_rank;
} rb_batch;
/* b packed into sb (appended to what it holds). */
void rb_pack_batch(msgpack_sbuffer *sb, const rb_batch *b);
/* Apply sb's message as batch `seq` of (worker, rank): the three ZeroMQ
 * frames wsel_router_apply_kv_message takes. */
int32_t rb_apply(wsel_router *r, uint64_t worker, uint32_t rank, uint64_t seq,
                 const msgpack_sbuffer *sb);

/* The whole route at scale (router_bench_scale.c): 0, or 1 after printing
 * what failed. plugins[0 .. n) are switched to in turn (none: the host's
 * policy as it is). */
int rb_bench_scale(wsel_host *host, char *const *plugins, int n);

#endif
