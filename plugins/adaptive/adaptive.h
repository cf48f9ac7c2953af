// SPDX-License-Identifier: Apache-2.0
/*
 * adaptive.h -- the adaptive plugin's instance, shared by its sources and
 * its unit tests (tests/plugins/test_adaptive.c); not part of any ABI. The
 * policy itself is described at the top of adaptive.c.
 */
#ifndef WSEL_ADAPTIVE_H
#define WSEL_ADAPTIVE_H

#include <stdatomic.h>
#include <stdint.h>

#include "pending.h"
#include "sticky_table.h"
#include "ttft_model.h"
#include "wsel.h"

typedef struct adaptive {
    const wsel_host_api *host;
    double tolerance;  /* predicted TTFT over the least-loaded row's, minus 1 */
    double rel_margin; /* the dead band on cost, as hysteresis's */
    double abs_margin;
    double temperature;
    double spill_work;         /* weight of the prefill a spill adds, in the load bound */
    sticky_table owners;       /* prefix block -> owner fingerprint */
    pending routed;            /* request id -> row, its and its worker's load */
    atomic_flag fitting;       /* held while `model` is updated */
    ttft_model model;          /* guarded by `fitting` */
    _Atomic uint64_t overhead; /* bits of the fit's k in tokens, or negative
                                * while not fitted */
    _Atomic uint64_t coupling; /* bits of the fit's g (>= 0), or negative */
} adaptive;

/* The setting select uses now: k = a / b in tokens, in [0, 2^24], or a
 * negative value while the model is not fitted. [any thread] */
double adaptive_overhead(const adaptive *a);

/* g = c / b, the weight of a worker's busiest rank's prefill_tokens in a
 * row's predicted TTFT, in [0, 64]; negative while not fitted. [any thread] */
double adaptive_coupling(const adaptive *a);

/* Outcomes the model has learned from. [any thread; takes the spin flag] */
uint64_t adaptive_samples(adaptive *a);

#endif
