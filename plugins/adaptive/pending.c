// SPDX-License-Identifier: Apache-2.0
/*
 * pending.c -- see pending.h.
 */
#include "pending.h"

#include <stdlib.h>

#include "mix64.h"
#include "wsel.h"

int32_t pending_init(pending *p, uint32_t capacity)
{
    if (capacity == 0 || capacity > (1u << 24))
        return WSEL_EINVAL;
    uint64_t n = 1;
    while (n < capacity)
        n <<= 1;
    pending_slot *s = calloc((size_t)n, sizeof(*s));
    if (s == NULL)
        return WSEL_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        atomic_init(&s[i].id, 0);
        atomic_init(&s[i].value, 0);
        atomic_init(&s[i].worker, 0);
    }
    p->slots = s;
    p->mask = n - 1;
    return 0;
}

void pending_free(pending *p)
{
    free(p->slots);
    p->slots = NULL;
    p->mask = 0;
}

void pending_put(pending *p, uint64_t request_id, uint32_t row_fp, uint64_t tokens,
                 uint64_t worker_tokens)
{
    pending_slot *s = &p->slots[mix64(request_id) & p->mask];
    uint64_t v = (uint64_t)row_fp << 32 | (tokens < UINT32_MAX ? tokens : UINT32_MAX);
    /* Empty the slot first, so no reader pairs the new id with the old value. */
    atomic_store_explicit(&s->value, 0, memory_order_relaxed);
    atomic_store_explicit(&s->id, request_id, memory_order_release);
    atomic_store_explicit(&s->worker,
                          worker_tokens < UINT32_MAX ? worker_tokens : UINT32_MAX,
                          memory_order_release);
    atomic_store_explicit(&s->value, v, memory_order_release);
}

int pending_take(pending *p, uint64_t request_id, uint32_t row_fp, uint32_t *out_tokens,
                 uint32_t *out_worker_tokens)
{
    pending_slot *s = &p->slots[mix64(request_id) & p->mask];
    uint64_t v = atomic_load_explicit(&s->value, memory_order_acquire);
    if (v == 0 || (uint32_t)(v >> 32) != row_fp ||
        atomic_load_explicit(&s->id, memory_order_acquire) != request_id)
        return 0;
    uint64_t w = atomic_load_explicit(&s->worker, memory_order_acquire);
    if (!atomic_compare_exchange_strong_explicit(&s->value, &v, 0, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0;
    *out_tokens = (uint32_t)v;
    *out_worker_tokens = (uint32_t)w;
    return 1;
}
