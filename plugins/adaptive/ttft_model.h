// SPDX-License-Identifier: Apache-2.0
/*
 * ttft_model.h -- the adaptive plugin's online model of time to first token:
 *
 *     ttft ~= a + b * P + c * G
 *
 * where P is the prefill_tokens the request's row showed when it was routed
 * (the tokens that rank had to prefill before this request's first token:
 * its queued prefill plus the request's own uncached tokens), G the largest
 * prefill_tokens among the rows of the same worker at that moment, b the
 * time a token of the row's own prefill costs, c what a token of the
 * busiest rank of its worker adds (ranks that step in lockstep wait for the
 * slowest: a long prefill on one rank lengthens every rank's step), and a
 * what grows with neither (a step, the decode batch sharing it, the
 * network). Fitted by least squares with exponential forgetting over the
 * outcomes: each moment (the means of P, G, T and of their products) is an
 * exponentially weighted moving average with weight 1/window for the newest
 * sample, so the fit follows the cluster as its load changes and remembers
 * about `window` outcomes.
 *
 * Where G tells nothing beside P (workers of one rank, where G = P; ranks
 * that do not wait for each other, where c comes out 0 or below), the fit
 * is the line a + b * P and c = 0.
 *
 * What the policy uses are the ratios k = a / b, the intercept in tokens of
 * prefill, and g = c / b, the weight of the worker's busiest rank beside
 * the row's own prefill: a row's predicted TTFT is b (k + P + g G).
 *
 * Plain data, no locks, no allocation: the plugin serialises updates.
 */
#ifndef WSEL_ADAPTIVE_TTFT_MODEL_H
#define WSEL_ADAPTIVE_TTFT_MODEL_H

#include <stdint.h>

/* Outcomes before the fit is used (below, ttft_model_setting answers -1). */
#define TTFT_MODEL_MIN_SAMPLES 16u
/* Largest overhead answered, tokens (2^24): the setting's upper bound. */
#define TTFT_MODEL_MAX_OVERHEAD 16777216.0
/* Largest coupling g answered: a token of the busiest rank never weighs
 * more than this many of the row's own. */
#define TTFT_MODEL_MAX_COUPLING 64.0

typedef struct ttft_model {
    double alpha;              /* weight of the newest sample, 1 / window */
    double p, g, t;            /* the moving means */
    double pp, pg, gg, pt, gt; /* and products */
    uint64_t samples;          /* samples taken, saturating */
} ttft_model;

/* An empty model remembering about `window` (>= 1) samples. */
void ttft_model_init(ttft_model *m, double window);

/* Add one outcome: P and G tokens, ttft in microseconds. The first sample
 * sets the moments; every later one moves them by alpha. Non-finite or
 * negative inputs are ignored. */
void ttft_model_add(ttft_model *m, double p_tokens, double g_tokens, double ttft_us);

/* The fitted intercept a (us), slope b (us per token of P) and coupling c
 * (us per token of G, >= 0). Returns 0, or -1 when the fit is not usable:
 * fewer than TTFT_MODEL_MIN_SAMPLES samples, P without spread (all equal),
 * or a slope b that is not positive. c is 0 when G has no spread of its own
 * beside P (collinear) or its fitted weight is not positive; then a and b
 * are the line's. */
int ttft_model_fit(const ttft_model *m, double *out_a, double *out_b, double *out_c);

/* k = a / b in tokens, clamped to [0, TTFT_MODEL_MAX_OVERHEAD], and
 * g = c / b, clamped to [0, TTFT_MODEL_MAX_COUPLING]. Returns 0, or -1
 * (outputs untouched) when the fit is not usable. */
int ttft_model_setting(const ttft_model *m, double *out_k, double *out_g);

#endif
