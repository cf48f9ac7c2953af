// SPDX-License-Identifier: Apache-2.0
/*
 * heap.h -- the event queue: a binary min-heap ordered by (time, insertion
 * order), so events at equal times run in the order they were scheduled
 * and every run is deterministic. Not thread-safe.
 */
#ifndef WSEL_SIM_HEAP_H
#define WSEL_SIM_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_event {
    int64_t time_ns;
    uint64_t order;
    uint32_t type;
    uint32_t arg;
} sim_event;

typedef struct sim_heap {
    sim_event *items;
    size_t size;
    size_t capacity;
    uint64_t next_order;
} sim_heap;

/* Returns 0 or WSEL_ENOMEM. */
int32_t sim_heap_push(sim_heap *h, int64_t time_ns, uint32_t type, uint32_t arg);
/* Pop the earliest event into *out; 0 when empty, 1 otherwise. */
int sim_heap_pop(sim_heap *h, sim_event *out);
void sim_heap_free(sim_heap *h);

#endif
