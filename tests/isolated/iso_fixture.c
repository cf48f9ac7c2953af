// SPDX-License-Identifier: Apache-2.0
/*
 * iso_fixture.c -- fixture plugins for isolated mode, one misbehaviour
 * each, chosen at build time by FX_MODE:
 *
 *   good     argmin of the default cost (temperature 0) or softmax_sample
 *            (temperature > 0), drawing from the request's stream: the
 *            same answers in and out of isolation;
 *   segv     a write through NULL on every n-th select of a helper's life;
 *   abort    abort() on every n-th select;
 *   loop     spins forever on every n-th select;
 *   sleep    sleeps 300 ms, then answers, on every n-th select;
 *   exit     exit(0) on every n-th select;
 *   leak     keeps 32 MiB more (touched) on every select, never freed,
 *            and writes through malloc's NULL once the limit is hit;
 *   stdout   writes garbage to stdout on every select, then answers;
 *   hooks    answers row (finished notices + last topology epoch) mod
 *            rows, so a test can see both hooks arrive in the helper;
 *   forge    on every n-th select, maps the helper's slot (descriptor 3,
 *            host/isolated_shm.h) and writes an answer sequence the host
 *            never posted, then hangs: a malformed answer;
 *   trigger  a write through NULL when the request id is FX_TRIGGER_ID, so
 *            a test crashes the active helper exactly when it wants;
 *   positive returns 1 (not 0) with no row written: not a success;
 *   overrides answers row = the request's `overrides` bits (ABI 1.1), so a
 *            test can see them cross into the helper, or not.
 *
 * The counter lives in the instance: the plugin keeps no global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wsel.h"

#define FX_GOOD      0
#define FX_SEGV      1
#define FX_ABORT     2
#define FX_LOOP      3
#define FX_SLEEP     4
#define FX_EXIT      5
#define FX_LEAK      6
#define FX_STDOUT    7
#define FX_HOOKS     8
#define FX_FORGE     9
#define FX_TRIGGER   10
#define FX_POSITIVE  11
#define FX_OVERRIDES 12

#define FX_TRIGGER_ID (1ull << 40)

#if FX_MODE == FX_FORGE
#include <sys/mman.h>

#include "isolated_shm.h"
#endif

#ifndef FX_MODE
#error "FX_MODE must be defined"
#endif

static const wsel_param_def fx_params[] = {
    {
        .name = "n",
        .doc = "misbehave on every n-th select",
        .type = WSEL_PARAM_INT,
        .default_value = 3,
        .min_value = 1,
        .max_value = 1000000,
    },
};

typedef struct fx_instance {
    const wsel_host_api *host;
    uint32_t n;
    uint32_t count;
    void *leaked; /* the leak chain's head */
    uint64_t finished;
    uint64_t epoch;
} fx_instance;

static int32_t fx_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    if (num_params != 1)
        return WSEL_EINVAL;
    fx_instance *fx = calloc(1, sizeof(*fx));
    if (fx == NULL)
        return WSEL_ENOMEM;
    fx->host = host;
    fx->n = (uint32_t)params[0];
    *out_instance = fx;
    return 0;
}

static void fx_destroy(void *instance)
{
    free(instance);
}

static void misbehave(fx_instance *fx)
{
    switch (FX_MODE) {
    case FX_SEGV:
        *(volatile int *)(uintptr_t)fx->leaked = 1; /* leaked is NULL */
        break;
    case FX_ABORT:
        abort();
    case FX_LOOP:
        for (volatile uint64_t i = 0;; i++)
            ;
    case FX_SLEEP: {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        break;
    }
    case FX_EXIT:
        exit(0);
#if FX_MODE == FX_FORGE
    case FX_FORGE: {
        wsel_iso_slot *s = mmap(NULL, sizeof(wsel_iso_slot), PROT_READ | PROT_WRITE,
                                MAP_SHARED, WSEL_ISO_SHM_FD, 0);
        if (s != MAP_FAILED)
            atomic_store(&s->ack_seq, atomic_load(&s->req_seq) + 7u);
        for (volatile uint64_t i = 0;; i++)
            ;
    }
#endif
    default:
        break;
    }
}

static int32_t fx_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    fx_instance *fx = instance;
    fx->count++;
    if (FX_MODE == FX_LEAK) {
        /* Like the careless code it stands for, it does not check for
         * NULL: under the helper's RLIMIT_AS it dies writing through it. */
        size_t size = 32u << 20;
        void **volatile block = malloc(size);
        memset(block, 1, size);
        *block = fx->leaked;
        fx->leaked = block;
    } else if (FX_MODE == FX_STDOUT) {
        printf("garbage \x01\x02 not an answer %u\n", fx->count);
        fflush(stdout);
    } else if (FX_MODE == FX_TRIGGER) {
        if (request->request_id == FX_TRIGGER_ID)
            *(volatile int *)(uintptr_t)fx->leaked = 1; /* leaked is NULL */
    } else if (FX_MODE == FX_POSITIVE) {
        return 1;
    } else if (FX_MODE != FX_GOOD && fx->count % fx->n == 0) {
        misbehave(fx);
    }
    if (FX_MODE == FX_HOOKS) {
        choice->row = (uint32_t)((fx->finished + fx->epoch) % table->num_rows);
        return 0;
    }
    if (FX_MODE == FX_OVERRIDES) {
        int covered = request->struct_size >=
                      offsetof(wsel_request, overrides) + sizeof(request->overrides);
        choice->row = covered ? request->overrides % table->num_rows : 0;
        return 0;
    }
    if (request->temperature > 0)
        return fx->host->softmax_sample(table->cost, table->flags, table->num_rows,
                                        WSEL_ROW_EXCLUDED, request->temperature,
                                        request->uniform, &choice->row);
    return fx->host->argmin(table->cost, table->flags, table->num_rows, WSEL_ROW_EXCLUDED,
                            request->rng, &choice->row);
}

static void fx_finished(void *instance, uint64_t request_id, uint64_t worker_id,
                        uint32_t dp_rank)
{
    (void)request_id;
    (void)worker_id;
    (void)dp_rank;
    ((fx_instance *)instance)->finished++;
}

static void fx_topology(void *instance, const wsel_table *table)
{
    ((fx_instance *)instance)->epoch = table->topology_epoch;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .name = FX_NAME,
    .version = "1.0.0",
    .description = "isolated-mode fixture",
    .params = fx_params,
    .num_params = 1,
    .param_def_size = sizeof(wsel_param_def),
    .create = fx_create,
    .destroy = fx_destroy,
    .select = fx_select,
    .on_request_finished = FX_MODE == FX_HOOKS ? fx_finished : NULL,
    .on_topology_changed = FX_MODE == FX_HOOKS ? fx_topology : NULL,
};
