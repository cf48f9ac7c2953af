// SPDX-License-Identifier: Apache-2.0
/*
 * router.c -- embed libwsel-host in a router: load a policy plugin, build
 * a candidate table per request, select. docs/embedding.md walks through it.
 *
 *     cc -std=c11 router.c -o router $(pkg-config --cflags --libs wsel)
 *     ./router $(pkg-config --variable=plugindir wsel)/softmax.so '{}'
 */
#include <stdio.h>

#include "wsel_host.h"

/* What the router knows about each (worker, dp_rank), in canonical order:
 * worker 11 rank 1 holds the request's whole prefix, worker 12 rank 1 is
 * draining. */
static const wsel_rank_state ranks[] = {
    {.worker_id = 10, .dp_rank = 0, .active_blocks = 40, .active_requests = 3},
    {.worker_id = 10, .dp_rank = 1, .active_blocks = 42, .active_requests = 3},
    {.worker_id = 11, .dp_rank = 0, .overlap_blocks = 1, .active_blocks = 10},
    {.worker_id = 11, .dp_rank = 1, .overlap_blocks = 4, .active_blocks = 12},
    {.worker_id = 12, .dp_rank = 0, .active_blocks = 5},
    {.worker_id = 12, .dp_rank = 1, .flags = WSEL_ROW_EXCLUDED},
};
#define NUM_RANKS ((uint32_t)(sizeof(ranks) / sizeof(ranks[0])))

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: router PLUGIN.so CONFIG_JSON\n");
        return 2;
    }
    char err[512];
    int status = 1;
    wsel_host *host;
    wsel_table_buf buf = {0};
    if (wsel_host_create(NULL, &host) != 0)
        return 1;
    /* Control thread: load and publish a policy. On failure the previous
     * policy (here the built-in one) keeps serving; err says why. */
    if (wsel_host_switch(host, argv[1], argv[2], err, sizeof(err)) != 0) {
        fprintf(stderr, "router: %s\n", err);
        goto out_destroy_host;
    }
    /* Once per thread: table storage, reused for every request. */
    if (wsel_table_buf_init(&buf, 64) != 0)
        goto out_destroy_host;

    /* Per request, on any thread: */
    wsel_request req = {
        .request_id = 1, .isl_tokens = 64, .block_size = 16, .overlap_score_weight = 1.0};
    wsel_rng rng;
    wsel_host_prepare_request_sized(host, &req, sizeof(req), &rng);
    if (wsel_table_build(&buf, &req, ranks, NUM_RANKS, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "router: %s\n", err);
        goto out_free_table;
    }
    wsel_choice choice = {.struct_size = sizeof(choice)};
    int32_t who = wsel_host_select(host, &req, &buf.table, &choice);
    if (who < 0) {
        fprintf(stderr, "router: no answer: %s\n", wsel_strerror(who));
        goto out_free_table;
    }
    printf("%s chose row %u: worker %llu dp_rank %u%s\n", wsel_host_policy_name(host),
           choice.row, (unsigned long long)buf.table.worker_id[choice.row],
           buf.table.dp_rank[choice.row],
           who == WSEL_ANSWER_FALLBACK ? " (fallback)" : "");
    status = 0;

out_free_table:
    wsel_table_buf_free(&buf);
out_destroy_host:
    wsel_host_destroy(host);
    return status;
}
