// SPDX-License-Identifier: Apache-2.0
/*
 * ttft_model.c -- see ttft_model.h.
 */
#include "ttft_model.h"

#include <math.h>

void ttft_model_init(ttft_model *m, double window)
{
    m->alpha = window >= 1.0 ? 1.0 / window : 1.0;
    m->p = m->t = m->pp = m->pt = 0.0;
    m->samples = 0;
}

void ttft_model_add(ttft_model *m, double p, double t)
{
    if (!isfinite(p) || !isfinite(t) || p < 0.0 || t < 0.0)
        return;
    double w = m->samples == 0 ? 1.0 : m->alpha;
    m->p += w * (p - m->p);
    m->t += w * (t - m->t);
    m->pp += w * (p * p - m->pp);
    m->pt += w * (p * t - m->pt);
    if (m->samples != UINT64_MAX)
        m->samples++;
}

int ttft_model_fit(const ttft_model *m, double *out_a, double *out_b)
{
    if (m->samples < TTFT_MODEL_MIN_SAMPLES)
        return -1;
    double var = m->pp - m->p * m->p;
    double cov = m->pt - m->p * m->t;
    /* Spread below rounding of the moments counts as none. */
    if (!(var > 1e-9 * m->pp))
        return -1;
    double b = cov / var;
    if (!(b > 0.0) || !isfinite(b))
        return -1;
    *out_b = b;
    *out_a = m->t - b * m->p;
    return 0;
}

double ttft_model_overhead(const ttft_model *m)
{
    double a, b;
    if (ttft_model_fit(m, &a, &b) != 0)
        return -1.0;
    double k = a / b;
    if (!(k > 0.0))
        return 0.0;
    return k < TTFT_MODEL_MAX_OVERHEAD ? k : TTFT_MODEL_MAX_OVERHEAD;
}
