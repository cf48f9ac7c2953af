// SPDX-License-Identifier: Apache-2.0
/* A router built by a parent project: one select through libwsel-host with
 * no policy loaded (the built-in policy answers). Prints the row. */
#include <stdio.h>
#include <string.h>

#include <wsel_host.h>

int main(void)
{
    wsel_host *host = NULL;
    if (wsel_host_create(NULL, &host) != 0)
        return 1;
    wsel_table_buf buf;
    memset(&buf, 0, sizeof(buf));
    wsel_rank_state ranks[2];
    memset(ranks, 0, sizeof(ranks));
    ranks[0].worker_id = 1;
    ranks[0].active_blocks = 50;
    ranks[1].worker_id = 2;
    ranks[1].active_blocks = 5;
    wsel_rng rng;
    wsel_request req;
    memset(&req, 0, sizeof(req));
    wsel_host_prepare_request(host, &req, &rng);
    req.isl_tokens = 64;
    req.block_size = 16;
    req.overlap_score_weight = 1.0;
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    int rc = wsel_table_buf_init(&buf, 2);
    if (rc == 0)
        rc = wsel_table_build(&buf, &req, ranks, 2, 1, NULL, 0);
    if (rc == 0)
        rc = wsel_host_select(host, &req, &buf.table, &choice);
    if (rc >= 0)
        printf("embedded wsel: row %u\n", (unsigned)choice.row);
    wsel_table_buf_free(&buf);
    wsel_host_destroy(host);
    return rc < 0 ? 1 : 0;
}
