// SPDX-License-Identifier: Apache-2.0
/*
 * herd.c -- `wsel replay`'s herding index (replay.h): the ranks that served
 * the requests, as the engines name them, given to wsel sim's accumulator,
 * whose sim_acc_herd is the one definition (docs/sim.md, "Herding index").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "replay.h"

struct replay_herd_sample {
    double start_s;
    uint32_t rank;
};

static int rank_of(replay_herd *h, const char *name, uint32_t *rank)
{
    for (uint32_t i = 0; i < h->num_names; i++)
        if (strcmp(h->names[i], name) == 0) {
            *rank = i;
            return 0;
        }
    if (h->num_names == SIM_MAX_RANKS)
        return -1;
    snprintf(h->names[h->num_names], sizeof(h->names[0]), "%s", name);
    *rank = h->num_names++;
    return 0;
}

int replay_herd_add(replay_herd *h, double start_s, const char *served_by)
{
    uint32_t rank;
    if (served_by[0] == '\0' || rank_of(h, served_by, &rank) != 0) {
        h->unnamed++;
        return 0;
    }
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 1024;
        struct replay_herd_sample *v = realloc(h->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n].start_s = start_s;
    h->v[h->n++].rank = rank;
    return 0;
}

static int by_start(const void *a, const void *b)
{
    double x = ((const struct replay_herd_sample *)a)->start_s;
    double y = ((const struct replay_herd_sample *)b)->start_s;
    return (x > y) - (x < y);
}

void replay_herd_feed(replay_herd *h, sim_acc *acc, uint32_t ranks)
{
    acc->num_ranks = ranks > h->num_names ? ranks : h->num_names;
    if (acc->num_ranks > SIM_MAX_RANKS)
        acc->num_ranks = SIM_MAX_RANKS;
    if (h->n > 0)
        qsort(h->v, h->n, sizeof(h->v[0]), by_start);
    for (size_t i = 0; i < h->n; i++)
        sim_acc_herd(acc, (int64_t)(h->v[i].start_s * 1e9), h->v[i].rank);
}

void replay_herd_free(replay_herd *h)
{
    free(h->v);
    memset(h, 0, sizeof(*h));
}
