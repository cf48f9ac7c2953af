// SPDX-License-Identifier: Apache-2.0
/*
 * main.c -- wsel-engine: start the KV event publisher, the model thread
 * and the HTTP server; say where they listen; stop on SIGINT or SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "engine.h"
#include "http.h"
#include "kv_events.h"
#include "wsel_version.h"

/* Where everything listens, one line each: "http URL", then per rank
 * "kv_events R ENDPOINT" and "kv_events_replay R ENDPOINT". */
static void describe(FILE *f, const eng *e, uint32_t port)
{
    fprintf(f, "http http://%s:%u\n", e->opt.host, port);
    for (uint32_t r = 0; e->kv && r < e->num_ranks; r++) {
        fprintf(f, "kv_events %u %s\n", r, eng_kv_endpoint(e->kv, r));
        if (e->opt.kv_events_replay)
            fprintf(f, "kv_events_replay %u %s\n", r, eng_kv_replay_endpoint(e->kv, r));
    }
}

static int write_port_file(const eng *e, uint32_t port)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", e->opt.port_file);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    describe(f, e, port);
    if (fclose(f) != 0 || rename(tmp, e->opt.port_file) != 0)
        return -1;
    return 0;
}

/* Many connections at once need many descriptors: raise the soft limit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    static eng e;
    int rc = eng_options_parse(&e.opt, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (e.opt.version) {
        wsel_version_print(stdout, "wsel-engine");
        return 0;
    }
    raise_fd_limit();
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL); /* threads inherit the mask */
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&e.model_lock, NULL);
    pthread_mutex_init(&e.inbox_lock, NULL);
    pthread_mutex_init(&e.io_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e.inbox_cond, &ca);
    e.next_id = 1;

    char err[512];
    eng_http *http = NULL;
    uint32_t port = 0;
    int status = 1;
    if (eng_tokenizer_open(&e.opt, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel-engine: --tokenizer %s: %s\n", e.opt.tokenizer_dir, err);
        return 1;
    }
    if (e.opt.kv_events &&
        eng_kv_open(&e.kv, e.opt.kv_events, e.opt.kv_events_replay, e.opt.kv_events_topic,
                    sim_cluster_ranks(&e.opt.cluster), e.opt.cluster.block_size, err,
                    sizeof(err)) != 0) {
        fprintf(stderr, "wsel-engine: --kv-events: %s\n", err);
        goto out_close_tokenizer;
    }
    if (e.kv)
        eng_kv_set_batch_form(e.kv, e.opt.kv_events_batch);
    if (eng_model_start(&e, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel-engine: %s\n", err);
        goto out_close_kv;
    }
    if (eng_http_start(&http, &e, &port, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel-engine: %s\n", err);
        goto out_stop_model;
    }
    if (e.opt.port_file && write_port_file(&e, port) != 0) {
        fprintf(stderr, "wsel-engine: cannot write %s\n", e.opt.port_file);
        goto out_stop_http;
    }
    describe(stdout, &e, port);
    fflush(stdout);
    int sig;
    sigwait(&stop, &sig);
    status = 0;

out_stop_http:
    eng_model_stop(&e); /* first, so nothing resumes a connection behind MHD */
    eng_http_stop(http);
    goto out_close_kv;
out_stop_model:
    eng_model_stop(&e);
out_close_kv:
    eng_kv_close(e.kv);
    sim_engine_destroy(e.model);
out_close_tokenizer:
    eng_tokenizer_close(&e.opt);
    return status;
}
