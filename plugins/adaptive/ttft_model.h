// SPDX-License-Identifier: Apache-2.0
/*
 * ttft_model.h -- the adaptive plugin's online model of time to first token:
 *
 *     ttft ~= a + b * P
 *
 * where P is the prefill_tokens the request's row showed when it was routed
 * (the tokens that rank had to prefill before this request's first token:
 * its queued prefill plus the request's own uncached tokens), b the time a
 * token of prefill costs and a what does not grow with P (a step, the
 * decode batch sharing it, the network). Fitted by least squares with
 * exponential forgetting over the outcomes: each moment (mean of P, of T,
 * of P^2, of P*T) is an exponentially weighted moving average with weight
 * 1/window for the newest sample, so the fit follows the cluster as its
 * load changes and remembers about `window` outcomes.
 *
 * What the policy uses is the ratio k = a / b, the intercept expressed in
 * tokens of prefill: "a rank with P more tokens to prefill delays a first
 * token by the fraction (P_owner - P_min) / (k + P_min)".
 *
 * Plain data, no locks, no allocation: the plugin serialises updates.
 */
#ifndef WSEL_ADAPTIVE_TTFT_MODEL_H
#define WSEL_ADAPTIVE_TTFT_MODEL_H

#include <stdint.h>

/* Outcomes before the fit is used (below, ttft_model_overhead answers -1). */
#define TTFT_MODEL_MIN_SAMPLES 16u
/* Largest overhead answered, tokens (2^24): the setting's upper bound. */
#define TTFT_MODEL_MAX_OVERHEAD 16777216.0

typedef struct ttft_model {
    double alpha;        /* weight of the newest sample, 1 / window */
    double p, t, pp, pt; /* the moving moments */
    uint64_t samples;    /* samples taken, saturating */
} ttft_model;

/* An empty model remembering about `window` (>= 1) samples. */
void ttft_model_init(ttft_model *m, double window);

/* Add one outcome: P tokens, ttft in microseconds. The first sample sets
 * the moments; every later one moves them by alpha. Non-finite or negative
 * inputs are ignored. */
void ttft_model_add(ttft_model *m, double p_tokens, double ttft_us);

/* The fitted slope b (us per token) and intercept a (us). Returns 0, or -1
 * when the fit is not usable: fewer than TTFT_MODEL_MIN_SAMPLES samples, P
 * without spread (all equal), or a slope that is not positive. */
int ttft_model_fit(const ttft_model *m, double *out_a, double *out_b);

/* k = a / b in tokens, clamped to [0, TTFT_MODEL_MAX_OVERHEAD]; -1 when the
 * fit is not usable. */
double ttft_model_overhead(const ttft_model *m);

#endif
