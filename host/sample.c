/*
 * sample.c -- the selection helpers offered to plugins: Dynamo's
 * softmax_sample and argmin with a uniform random tie-break.
 *
 * Both start with one scan of the cost column (count, min, max of the
 * candidates, ties at the minimum and the first of them); a second scan for
 * the k-th tie runs only when the answer is a tie other than the first.
 * Rows whose flags intersect skip_mask are not candidates. Nothing
 * allocates: softmax keeps its weights in a fixed stack buffer and
 * recomputes them past it. At T > 0 one exp per candidate is the floor
 * (docs/bench.md): Dynamo parity rules out any other exp.
 */
#include <math.h>

#include "wsel_host.h"

/* Rows of softmax weights kept on the stack; past this they are recomputed. */
#define SOFTMAX_STACK_ROWS 1024u

/* What the scan learns about the candidates. */
typedef struct scan_result {
    double min, max;
    uint32_t count;
    /* Candidates at the minimum, and the first of them. */
    uint32_t at_min, first_min;
} scan_result;

static int is_candidate(const uint8_t *flags, uint32_t i, uint8_t skip_mask)
{
    return flags == NULL || (flags[i] & skip_mask) == 0;
}

/* Fold the cost c of row i into *r. The branches are predictable: past the
 * first rows a new minimum or maximum is rare. */
static inline void scan_row(scan_result *r, double c, uint32_t i)
{
    if (c < r->min) {
        r->min = c;
        r->at_min = 1;
        r->first_min = i;
    } else if (c == r->min) {
        r->at_min++;
    }
    if (c > r->max)
        r->max = c;
}

/* One pass over the candidates: count, min and max, ties at the minimum and
 * the first of them. Returns WSEL_EINVAL on a non-finite candidate cost,
 * WSEL_ENOCANDIDATE when there is no candidate. */
static int32_t scan(const double *costs, const uint8_t *flags, uint32_t n,
                    uint8_t skip_mask, scan_result *out)
{
    scan_result r = {INFINITY, -INFINITY, 0, 0, 0};
    int finite = 1;
    if (flags == NULL || skip_mask == 0) { /* every row a candidate */
        for (uint32_t i = 0; i < n; i++) {
            finite &= isfinite(costs[i]);
            scan_row(&r, costs[i], i);
        }
        r.count = n;
    } else {
        for (uint32_t i = 0; i < n; i++) {
            if (flags[i] & skip_mask)
                continue;
            finite &= isfinite(costs[i]);
            r.count++;
            scan_row(&r, costs[i], i);
        }
    }
    if (!finite)
        return WSEL_EINVAL;
    if (r.count == 0)
        return WSEL_ENOCANDIDATE;
    *out = r;
    return 0;
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
    scan_result s;
    int32_t rc = scan(costs, flags, n, skip_mask, &s);
    if (rc < 0)
        return rc;
    if (s.at_min == 1) {
        *out_row = s.first_min;
        return 0;
    }
    uint32_t k = wsel_rng_below(rng, s.at_min);
    *out_row = nth_equal(costs, flags, n, skip_mask, s.min, k);
    return 0;
}

int32_t wsel_softmax_sample(const double *costs, const uint8_t *flags, uint32_t n,
                            uint8_t skip_mask, double temperature, double u,
                            uint32_t *out_row)
{
    if (costs == NULL || out_row == NULL || !isfinite(temperature) || temperature < 0.0 ||
        !(u >= 0.0 && u < 1.0))
        return WSEL_EINVAL;
    scan_result s;
    int32_t rc = scan(costs, flags, n, skip_mask, &s);
    if (rc < 0)
        return rc;
    double min = s.min, max = s.max;

    /* Temperature 0: the minimum, ties uniform. All equal: uniform. */
    if (temperature == 0.0 || min == max) {
        uint32_t k = scale_uniform(u, s.at_min);
        *out_row = k == 0 ? s.first_min : nth_equal(costs, flags, n, skip_mask, min, k);
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
