// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_request.c -- requests: validation, table building from them, and
 * routing through a loaded plugin.
 *
 * A host with the stress plugin (pick argmin through the host's helpers;
 * WSEL_FUZZ_PLUGIN overrides the path) is made once. Each input decodes to
 * a wsel_request, every field chosen by the input (struct_size, reserved
 * fields, block hashes present or NULL, weight, temperature and uniform as
 * any double, the random stream present or NULL). Properties checked,
 * abort() on breach:
 *   - wsel_request_validate answers 0 or WSEL_EREQUEST with a message;
 *   - a valid request builds a table from fixed rank states that
 *     validates and is valid by table_oracle.h, or is refused with a
 *     negative code;
 *   - a valid request on a valid table is answered by the plugin or the
 *     fallback with a row in range and not excluded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_reader.h"
#include "table_oracle.h"
#include "wsel_host.h"

#ifndef WSEL_FUZZ_PLUGIN
#error "WSEL_FUZZ_PLUGIN must be defined by the build"
#endif

#define ROWS       8
#define MAX_HASHES 64

static wsel_host *fuzz_host;
static wsel_rank_state fuzz_ranks[ROWS];

static void breach(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_request: %s (%s)\n", what, detail ? detail : "");
    abort();
}

static void quiet_log(void *user, int32_t level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = getenv("WSEL_FUZZ_PLUGIN");
    wsel_host_options opts;
    char err[512] = "";

    (void)argc;
    (void)argv;
    if (!path || !*path)
        path = WSEL_FUZZ_PLUGIN;
    wsel_host_options_default(&opts);
    opts.seed = 11;
    opts.log = quiet_log;
    opts.max_consecutive_failures = WSEL_HOST_NEVER_EJECT;
    if (wsel_host_create(&opts, &fuzz_host) != 0)
        breach("cannot create a host", NULL);
    if (wsel_host_switch(fuzz_host, path, "{\"log_lifecycle\": false}", err, sizeof err))
        breach("cannot load the plugin", err);
    /* 4 workers x 2 ranks; rank 2 excluded, rank 5 without a load record. */
    for (uint32_t i = 0; i < ROWS; i++) {
        fuzz_ranks[i].worker_id = 10 + i / 2;
        fuzz_ranks[i].dp_rank = i % 2;
        fuzz_ranks[i].overlap_blocks = i % 3;
        fuzz_ranks[i].active_prefill_tokens = 300u * (i % 4);
        fuzz_ranks[i].active_blocks = 50u + 7u * i;
        fuzz_ranks[i].kv_capacity_blocks = 16384;
        fuzz_ranks[i].active_requests = i;
    }
    fuzz_ranks[2].flags = WSEL_ROW_EXCLUDED;
    fuzz_ranks[5].flags = WSEL_ROW_NO_LOAD;
    return 0;
}

/* Mode bits. */
#define REQ_ANY_SIZE     0x01u
#define REQ_RESERVED     0x02u
#define REQ_NULL_HASHES  0x04u
#define REQ_NULL_RNG     0x08u
#define REQ_HOST_PREPARE 0x10u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t hashes[MAX_HASHES];
    fuzz_reader r;
    wsel_request req;
    wsel_rng rng;
    wsel_table_buf buf;
    wsel_choice choice;
    char err[256];
    uint8_t mode;
    int32_t rc;

    fuzz_reader_init(&r, data, size);
    mode = fuzz_u8(&r);
    memset(&req, 0, sizeof req);
    req.struct_size = (mode & REQ_ANY_SIZE) ? fuzz_u32(&r) : (uint32_t)sizeof req;
    if (mode & REQ_RESERVED) {
        req.reserved0 = fuzz_u8(&r);
        req.reserved1 = fuzz_u8(&r);
    }
    req.request_id = fuzz_u64(&r);
    req.affinity_key = fuzz_u64(&r);
    req.timestamp_us = fuzz_u64(&r);
    req.isl_tokens = fuzz_u32(&r);
    req.block_size = fuzz_u32(&r) % 1025;
    req.num_block_hashes = fuzz_u8(&r) % (MAX_HASHES + 1);
    for (uint32_t i = 0; i < req.num_block_hashes; i++)
        hashes[i] = fuzz_u64(&r);
    req.block_hashes = (mode & REQ_NULL_HASHES) ? NULL : hashes;
    req.overlap_score_weight = fuzz_double(&r);
    req.temperature = fuzz_double(&r);
    req.uniform = fuzz_double(&r);
    wsel_rng_seed(&rng, fuzz_u64(&r));
    req.rng = (mode & REQ_NULL_RNG) ? NULL : &rng;
    if (mode & REQ_HOST_PREPARE) {
        uint32_t keep = req.struct_size;
        wsel_host_prepare_request(fuzz_host, &req, &rng);
        if (mode & REQ_ANY_SIZE)
            req.struct_size = keep;
    }

    memset(err, 0, sizeof err);
    rc = wsel_request_validate(&req, err, sizeof err);
    if (rc != 0) {
        if (rc != WSEL_EREQUEST || err[0] == '\0' ||
            memchr(err, '\0', sizeof err) == NULL)
            breach("a refused request has no WSEL_EREQUEST and message", err);
        return 0;
    }

    memset(&buf, 0, sizeof buf);
    if (wsel_table_buf_init(&buf, ROWS) != 0)
        breach("cannot allocate a table buffer", NULL);
    memset(err, 0, sizeof err);
    rc = wsel_table_build(&buf, &req, fuzz_ranks, ROWS, 1, err, sizeof err);
    if (rc != 0) {
        if (rc > 0 || memchr(err, '\0', sizeof err) == NULL)
            breach("a refused build returned a positive value or no message", err);
        goto out_free_buf;
    }
    memset(err, 0, sizeof err);
    if (wsel_table_validate(&buf.table, err, sizeof err) != 0)
        breach("a table built from a valid request does not validate", err);
    if (oracle_table_fault(&buf.table))
        breach("a built table is invalid", oracle_table_fault(&buf.table));

    memset(&choice, 0, sizeof choice);
    choice.struct_size = sizeof choice;
    rc = wsel_host_select(fuzz_host, &req, &buf.table, &choice);
    if (rc != WSEL_ANSWER_PLUGIN && rc != WSEL_ANSWER_FALLBACK)
        breach("a valid request on a valid table was not answered", wsel_errname(rc));
    if (choice.row >= ROWS || (buf.table.flags[choice.row] & WSEL_ROW_EXCLUDED))
        breach("the answer names an invalid row", NULL);

out_free_buf:
    wsel_table_buf_free(&buf);
    return 0;
}
