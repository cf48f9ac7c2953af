// SPDX-License-Identifier: Apache-2.0
/*
 * ttft_model.c -- see ttft_model.h.
 */
#include "ttft_model.h"

#include <math.h>

void ttft_model_init(ttft_model *m, double window)
{
    m->alpha = window >= 1.0 ? 1.0 / window : 1.0;
    m->p = m->g = m->t = 0.0;
    m->pp = m->pg = m->gg = m->pt = m->gt = 0.0;
    m->samples = 0;
}

void ttft_model_add(ttft_model *m, double p, double g, double t)
{
    if (!isfinite(p) || !isfinite(g) || !isfinite(t) || p < 0.0 || g < 0.0 || t < 0.0)
        return;
    double w = m->samples == 0 ? 1.0 : m->alpha;
    m->p += w * (p - m->p);
    m->g += w * (g - m->g);
    m->t += w * (t - m->t);
    m->pp += w * (p * p - m->pp);
    m->pg += w * (p * g - m->pg);
    m->gg += w * (g * g - m->gg);
    m->pt += w * (p * t - m->pt);
    m->gt += w * (g * t - m->gt);
    if (m->samples != UINT64_MAX)
        m->samples++;
}

int ttft_model_fit(const ttft_model *m, double *out_a, double *out_b, double *out_c)
{
    if (m->samples < TTFT_MODEL_MIN_SAMPLES)
        return -1;
    double vp = m->pp - m->p * m->p;
    double vg = m->gg - m->g * m->g;
    double cpg = m->pg - m->p * m->g;
    double cpt = m->pt - m->p * m->t;
    double cgt = m->gt - m->g * m->t;
    /* Spread below rounding of the moments counts as none. */
    if (!(vp > 1e-9 * m->pp))
        return -1;
    /* G beside P: the 2 x 2 normal equations, when G varies by more than
     * rounding apart from P (1 - r^2 above 1e-6). */
    double det = vp * vg - cpg * cpg;
    if (vg > 1e-9 * m->gg && det > 1e-6 * vp * vg) {
        double b = (cpt * vg - cgt * cpg) / det;
        double c = (vp * cgt - cpg * cpt) / det;
        if (b > 0.0 && c > 0.0 && isfinite(b) && isfinite(c)) {
            *out_a = m->t - b * m->p - c * m->g;
            *out_b = b;
            *out_c = c;
            return 0;
        }
    }
    double b = cpt / vp;
    if (!(b > 0.0) || !isfinite(b))
        return -1;
    *out_a = m->t - b * m->p;
    *out_b = b;
    *out_c = 0.0;
    return 0;
}

int ttft_model_setting(const ttft_model *m, double *out_k, double *out_g)
{
    double a, b, c;
    if (ttft_model_fit(m, &a, &b, &c) != 0)
        return -1;
    double k = a / b, g = c / b;
    k = k > 0.0 ? k : 0.0;
    *out_k = k < TTFT_MODEL_MAX_OVERHEAD ? k : TTFT_MODEL_MAX_OVERHEAD;
    *out_g = g < TTFT_MODEL_MAX_COUPLING ? g : TTFT_MODEL_MAX_COUPLING;
    return 0;
}
