// SPDX-License-Identifier: Apache-2.0
/*
 * heap.c -- binary min-heap of events.
 */
#include "heap.h"

#include <stdlib.h>

#include "wsel.h"

static int before(const sim_event *a, const sim_event *b)
{
    return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->order < b->order);
}

int32_t sim_heap_push(sim_heap *h, int64_t time_ns, uint32_t type, uint32_t arg)
{
    if (h->size == h->capacity) {
        size_t cap = h->capacity ? h->capacity * 2 : 64;
        sim_event *grown = realloc(h->items, cap * sizeof(*grown));
        if (!grown)
            return WSEL_ENOMEM;
        h->items = grown;
        h->capacity = cap;
    }
    sim_event e = {time_ns, h->next_order++, type, arg};
    size_t i = h->size++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &h->items[parent]))
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = e;
    return 0;
}

int sim_heap_pop(sim_heap *h, sim_event *out)
{
    if (h->size == 0)
        return 0;
    *out = h->items[0];
    sim_event last = h->items[--h->size];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->size)
            break;
        if (child + 1 < h->size && before(&h->items[child + 1], &h->items[child]))
            child++;
        if (!before(&h->items[child], &last))
            break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->size > 0)
        h->items[i] = last;
    return 1;
}

void sim_heap_free(sim_heap *h)
{
    free(h->items);
    h->items = NULL;
    h->size = h->capacity = 0;
}
