/*
 * sample.c -- the selection helpers offered to plugins: Dynamo's
 * softmax_sample and argmin with a uniform random tie-break.
 *
 * Both scan a cost column once or twice, skip rows whose flags intersect
 * skip_mask, and allocate nothing (softmax keeps its weights in a fixed
 * stack buffer and recomputes them past it).
 */
#include <math.h>

#include "wsel_host.h"

/* Rows of softmax weights kept on the stack; past this they are recomputed. */
#define SOFTMAX_STACK_ROWS 1024u

static int is_candidate(const uint8_t *flags, uint32_t i, uint8_t skip_mask)
{
    return flags == NULL || (flags[i] & skip_mask) == 0;
}

/* The k-th (0-based) candidate among rows whose cost equals `value`. */
static uint32_t nth_equal(const double *costs, const uint8_t *flags, uint32_t n,
                          uint8_t skip_mask, double value, uint32_t k)
{
    uint32_t last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_candidate(flags, i, skip_mask) || costs[i] != value)
            continue;
        if (k-- == 0)
            return i;
        last = i;
    }
    return last; /* unreachable when k < count */
}

/* Scan candidates: their count, min and max cost, the count at the minimum.
 * Returns WSEL_EINVAL on a non-finite cost, WSEL_ENOCANDIDATE when none. */
static int32_t scan(const double *costs, const uint8_t *flags, uint32_t n,
                    uint8_t skip_mask, double *out_min, double *out_max,
                    uint32_t *out_count, uint32_t *out_at_min)
{
    double min = INFINITY, max = -INFINITY;
    uint32_t count = 0, at_min = 0;
    int finite = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_candidate(flags, i, skip_mask))
            continue;
        double c = costs[i];
        finite &= isfinite(c);
        count++;
        if (c < min) {
            min = c;
            at_min = 1;
        } else if (c == min) {
            at_min++;
        }
        if (c > max)
            max = c;
    }
    if (!finite)
        return WSEL_EINVAL;
    if (count == 0)
        return WSEL_ENOCANDIDATE;
    *out_min = min;
    *out_max = max;
    *out_count = count;
    *out_at_min = at_min;
    return 0;
}

/* floor(u * k), clamped to k - 1 (u < 1, but rounding may reach k). */
static uint32_t scale_uniform(double u, uint32_t k)
{
    uint32_t j = (uint32_t)(u * (double)k);
    return j < k ? j : k - 1;
}

int32_t wsel_argmin(const double *costs, const uint8_t *flags, uint32_t n,
                    uint8_t skip_mask, wsel_rng *rng, uint32_t *out_row)
{
    if (costs == NULL || rng == NULL || out_row == NULL)
        return WSEL_EINVAL;
    double min, max;
    uint32_t count, at_min;
    int32_t rc = scan(costs, flags, n, skip_mask, &min, &max, &count, &at_min);
    if (rc < 0)
        return rc;
    uint32_t k = at_min > 1 ? wsel_rng_below(rng, at_min) : 0;
    *out_row = nth_equal(costs, flags, n, skip_mask, min, k);
    return 0;
}

int32_t wsel_softmax_sample(const double *costs, const uint8_t *flags, uint32_t n,
                            uint8_t skip_mask, double temperature, double u,
                            uint32_t *out_row)
{
    if (costs == NULL || out_row == NULL || !isfinite(temperature) || temperature < 0.0 ||
        !(u >= 0.0 && u < 1.0))
        return WSEL_EINVAL;
    double min, max;
    uint32_t count, at_min;
    int32_t rc = scan(costs, flags, n, skip_mask, &min, &max, &count, &at_min);
    if (rc < 0)
        return rc;

    /* Temperature 0: the minimum, ties uniform. All equal: uniform. */
    if (temperature == 0.0 || min == max) {
        uint32_t k = scale_uniform(u, at_min);
        *out_row = nth_equal(costs, flags, n, skip_mask, min, k);
        return 0;
    }

    /* Dynamo: s_i = -(c_i / range) / T; p_i = exp(s_i - max s) / sum. The
     * largest s belongs to the smallest cost. Same operations, same order,
     * so the same doubles as Dynamo's f64 code. */
    double range = max - min;
    double s_max = -(min / range) / temperature;
    double weights[SOFTMAX_STACK_ROWS];
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_candidate(flags, i, skip_mask))
            continue;
        double w = exp(-(costs[i] / range) / temperature - s_max);
        if (i < SOFTMAX_STACK_ROWS)
            weights[i] = w;
        sum += w;
    }
    double cumulative = 0.0;
    uint32_t last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_candidate(flags, i, skip_mask))
            continue;
        double w = i < SOFTMAX_STACK_ROWS
                       ? weights[i]
                       : exp(-(costs[i] / range) / temperature - s_max);
        cumulative += w / sum;
        last = i;
        if (cumulative >= u) {
            *out_row = i;
            return 0;
        }
    }
    *out_row = last; /* rounding left the running sum short of u */
    return 0;
}
