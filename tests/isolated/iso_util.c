// SPDX-License-Identifier: Apache-2.0
/*
 * iso_util.c -- helpers shared by test_isolated and bench_isolated.
 */
#include "iso_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *iso_temp_dir(void)
{
    char tmpl[] = "/tmp/wsel-iso-XXXXXX";
    if (mkdtemp(tmpl) == NULL)
        return NULL;
    return strdup(tmpl);
}

void iso_remove_dir(char *dir)
{
    if (dir == NULL)
        return;
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

char *iso_install(const char *dir, const char *name)
{
    char src[4096], dst[4096];
    snprintf(src, sizeof(src), "%s/%s.so", WSEL_ISO_FIXTURE_DIR, name);
    snprintf(dst, sizeof(dst), "%s/%s.so", dir, name);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return NULL;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0) {
        close(in);
        return NULL;
    }
    char buf[65536];
    ssize_t n;
    int ok = 1;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        ok &= write(out, buf, (size_t)n) == n;
    ok &= n == 0;
    close(in);
    ok &= fchmod(out, 0755) == 0;
    ok &= close(out) == 0;
    return ok ? strdup(dst) : NULL;
}

void iso_options(wsel_host_options *opts, uint32_t deadline_us, uint32_t backoff_us)
{
    wsel_host_options_default(opts);
    opts->seed = 42;
    opts->isolated = 1;
    opts->select_deadline_us = deadline_us;
    opts->restart_backoff_us = backoff_us;
    opts->helper_path = WSEL_ISO_HELPER;
}

void iso_quiet_sanitizer(void)
{
#ifdef WSEL_ISO_SANITIZED
    setenv("ASAN_OPTIONS", "symbolize=0:detect_leaks=0", 1);
    setenv("UBSAN_OPTIONS", "symbolize=0:print_stacktrace=0", 1);
#endif
}

/* Random small loads and overlaps drawn from the stream in `ctx`. */
static void fill_random(wsel_rank_state *ranks, uint32_t n, uint32_t dp, void *ctx)
{
    wsel_rng *rng = ctx;
    (void)dp;
    for (uint32_t i = 0; i < n; i++) {
        ranks[i].overlap_blocks = wsel_rng_below(rng, 4);
        ranks[i].active_blocks = wsel_rng_below(rng, 8);
        ranks[i].active_prefill_tokens = 16u * wsel_rng_below(rng, 4);
        ranks[i].kv_capacity_blocks = 1024;
    }
}

int iso_table_init(iso_table *t, uint32_t workers, uint32_t dp, uint64_t seed)
{
    wsel_rng rng;
    wsel_rng_seed(&rng, seed);
    char err[256];
    int32_t rc = ts_table_init(t, workers, dp, 256, 16, 0, seed, fill_random, &rng, err,
                               sizeof(err));
    if (rc != 0)
        return rc;
    /* The prompt's hashes come after the loads from the same stream. */
    for (uint32_t i = 0; i < TS_MAX_HASHES; i++)
        t->hashes[i] = wsel_rng_u64(&rng);
    t->request.num_block_hashes = TS_MAX_HASHES;
    t->request.block_hashes = t->hashes;
    return 0;
}

void iso_table_free(iso_table *t)
{
    ts_table_free(t);
}

uint64_t iso_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
