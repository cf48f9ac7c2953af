// SPDX-License-Identifier: Apache-2.0
/*
 * sim_fixture.c -- temporary files and the stand-in policy.
 */
#include "sim_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

const char *fixture_write(int slot, const char *text)
{
    static char paths[8][64];
    char *path = paths[slot & 7];
    snprintf(path, 64, "/tmp/wsel-sim-test-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n)
        abort();
    close(fd);
    return path;
}

void fixture_remove(const char *path)
{
    unlink(path);
}

static int32_t standin_select(void *ctx, wsel_request *request,
                              const wsel_rank_state *ranks, uint32_t num_ranks,
                              uint32_t *row, uint64_t *select_ns)
{
    standin *st = ctx;
    if (st->calls < 64) {
        st->keys[st->calls] = request->affinity_key;
        st->max_overlap[st->calls] = 0;
        for (uint32_t i = 0; i < num_ranks; i++)
            if (ranks[i].overlap_blocks > st->max_overlap[st->calls])
                st->max_overlap[st->calls] = ranks[i].overlap_blocks;
    }
    *select_ns = 0;
    if (st->rows) {
        *row = st->rows[st->calls++ % st->num_rows];
        return WSEL_ANSWER_PLUGIN;
    }
    st->calls++;
    double best = 0;
    for (uint32_t i = 0; i < num_ranks; i++) {
        const wsel_rank_state *r = &ranks[i];
        uint64_t bs = request->block_size;
        uint64_t covered = (uint64_t)r->overlap_blocks * bs;
        uint64_t prefill =
            (covered < request->isl_tokens ? request->isl_tokens - covered : 0) +
            r->active_prefill_tokens;
        uint64_t own = request->isl_tokens / bs;
        uint64_t decode =
            r->active_blocks + (own > r->overlap_blocks ? own - r->overlap_blocks : 0);
        double cost =
            request->overlap_score_weight * (double)prefill / (double)bs + (double)decode;
        if (i == 0 || cost < best) {
            best = cost;
            *row = i;
        }
    }
    return WSEL_ANSWER_PLUGIN;
}

static void standin_finished(void *ctx, uint64_t request_id, uint64_t worker_id,
                             uint32_t dp_rank)
{
    (void)request_id;
    (void)worker_id;
    (void)dp_rank;
    ((standin *)ctx)->finished++;
}

static int32_t standin_switch(void *ctx, const char *path, const char *config, char *err,
                              size_t err_size)
{
    (void)path;
    (void)config;
    (void)err;
    (void)err_size;
    standin *st = ctx;
    st->switches++;
    st->rows = NULL;
    return 0;
}

void standin_policy(standin *st, sim_policy *out)
{
    memset(out, 0, sizeof(*out));
    out->ctx = st;
    out->select = standin_select;
    out->finished = standin_finished;
    out->switch_to = standin_switch;
}

const char *fixture_wsel_path(void)
{
    static char wsel[4096];
    if (wsel[0] == '\0') {
        const char *build = getenv("WSEL_BUILD_DIR");
        snprintf(wsel, sizeof(wsel), "%s/bin/wsel", build ? build : ".");
    }
    return wsel;
}

int fixture_run_wsel(const char *subcommand, const char *args, char **out)
{
    const char *wsel = fixture_wsel_path();
    if (access(wsel, X_OK) != 0) {
        print_message("%s not built; skipping\n", wsel);
        skip();
    }
    char cmd[9000];
    snprintf(cmd, sizeof(cmd), "'%s' %s --no-progress %s 2>&1", wsel, subcommand, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = 0;
    FILE *mem = open_memstream(out, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(mem);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
