// SPDX-License-Identifier: Apache-2.0
/*
 * sample.c -- the selection helpers offered to plugins: Dynamo's
 * softmax_sample and argmin with a uniform random tie-break.
 *
 * softmax_sample gives the row Dynamo's current selector gives for the same
 * costs (in row order), temperature and draw; tests/host/
 * test_softmax_parity.c checks it against a reference written from
 * Dynamo's source. Where Dynamo's arithmetic overflows, see weight_terms.
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

/*
 * How the weights of one softmax_sample call are computed. Dynamo
 * (lib/kv-router/src/scheduling/selector/default.rs, softmax_sample_index)
 * works on c / magnitude, where magnitude is 1 when max - min is finite and
 * max(|min|, |max|) when it is not:
 *   scale = -1 / ((max / m - min / m) * T),  w = exp(c / m * scale - min / m * scale)
 * and wsel repeats those operations in that order. Where Dynamo's own
 * arithmetic breaks (the denominator overflows, and Dynamo samples
 * uniformly; or scale or min / m * scale is infinite, and its NaN weights
 * make it answer the last candidate), wsel computes
 *   w = exp(-((c / m - min / m) / (max / m - min / m)) / T)
 * instead: no intermediate can overflow, the cheapest rows keep weight 1
 * and the odds best / worst stay e^(1/T).
 */
typedef enum weight_mode {
    WEIGHT_DYNAMO,           /* magnitude 1: exp(c * scale - max_scaled) */
    WEIGHT_DYNAMO_MAGNITUDE, /* exp(c / m * scale - max_scaled) */
    WEIGHT_FALLBACK          /* exp(-((c / m - min / m) / range_n) / T) */
} weight_mode;

typedef struct weight_terms {
    weight_mode mode;
    double magnitude, scale, max_scaled; /* the Dynamo modes */
    double min_n, range_n, temperature;  /* the fallback */
} weight_terms;

static weight_terms weight_terms_for(double min, double max, double temperature)
{
    weight_terms t = {WEIGHT_DYNAMO, 1.0, 0, 0, 0, 0, temperature};
    double range = max - min;
    if (!isfinite(range)) {
        t.mode = WEIGHT_DYNAMO_MAGNITUDE;
        t.magnitude = fmax(fabs(min), fabs(max));
    }
    double min_n = min / t.magnitude, max_n = max / t.magnitude;
    t.scale = -1.0 / ((max_n - min_n) * temperature);
    t.max_scaled = min_n * t.scale;
    t.min_n = min_n;
    t.range_n = max_n - min_n;
    /* Dynamo's weights are sound when scale is finite and not 0 and the
     * cheapest cost's exponent term min / m * scale is finite: every other
     * c / m * scale is then <= it, so each exponent is finite or -inf and
     * <= 0. Otherwise the cheapest row's exponent is inf - inf (NaN) or
     * every exponent is 0 (scale -0: the denominator overflowed). */
    if (!(t.scale < 0.0 && isfinite(t.scale) && isfinite(t.max_scaled)))
        t.mode = WEIGHT_FALLBACK;
    return t;
}

/* The argument of exp for cost c. */
static inline double exponent_of(const weight_terms *t, weight_mode mode, double c)
{
    switch (mode) {
    case WEIGHT_DYNAMO:
        return c * t->scale - t->max_scaled;
    case WEIGHT_DYNAMO_MAGNITUDE:
        return c / t->magnitude * t->scale - t->max_scaled;
    case WEIGHT_FALLBACK:
    default:
        return -((c / t->magnitude - t->min_n) / t->range_n) / t->temperature;
    }
}

static inline double weight_of(const weight_terms *t, weight_mode mode, double c)
{
    return exp(exponent_of(t, mode, c));
}

/*
 * exp(c * scale - shift) for candidate rows [0, m), m <= SOFTMAX_STACK_ROWS,
 * into `weights`; returns their sum in row order. The common case of
 * softmax_sample (WEIGHT_DYNAMO), in a function of its own: in a loop
 * around a call, only a small function keeps its counters in callee-saved
 * registers and its doubles as memory operands instead of spilling and
 * reloading them on every row.
 */
__attribute__((noinline)) static double
sum_dynamo_weights(const double *costs, const uint8_t *flags, uint32_t m,
                   uint8_t skip_mask, double scale, double shift, double *weights)
{
    double sum = 0.0;
    for (uint32_t i = 0; i < m; i++) {
        if (!is_candidate(flags, i, skip_mask))
            continue;
        double w = exp(costs[i] * scale - shift);
        weights[i] = w;
        sum += w;
    }
    return sum;
}

/* Sum the candidates' weights in row order, keeping the first
 * SOFTMAX_STACK_ROWS rows' in `weights`. `mode` is a constant at each call
 * site, so the switch in exponent_of folds away. */
static inline double sum_weights(const double *costs, const uint8_t *flags, uint32_t n,
                                 uint8_t skip_mask, const weight_terms *t,
                                 weight_mode mode, double *weights)
{
    uint32_t buffered = n < SOFTMAX_STACK_ROWS ? n : SOFTMAX_STACK_ROWS;
    double sum;
    if (mode == WEIGHT_DYNAMO) {
        sum = sum_dynamo_weights(costs, flags, buffered, skip_mask, t->scale,
                                 t->max_scaled, weights);
    } else {
        sum = 0.0;
        for (uint32_t i = 0; i < buffered; i++) {
            if (!is_candidate(flags, i, skip_mask))
                continue;
            weights[i] = weight_of(t, mode, costs[i]);
            sum += weights[i];
        }
    }
    for (uint32_t i = buffered; i < n; i++)
        if (is_candidate(flags, i, skip_mask))
            sum += weight_of(t, mode, costs[i]);
    return sum;
}

/* The first candidate whose running sum of w / sum reaches u (Dynamo:
 * `sample <= cumulative`), or the last candidate if rounding leaves the
 * running sum short of u. */
static inline uint32_t walk_weights(const double *costs, const uint8_t *flags, uint32_t n,
                                    uint8_t skip_mask, const weight_terms *t,
                                    weight_mode mode, const double *weights, double sum,
                                    double u)
{
    double cumulative = 0.0;
    uint32_t last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_candidate(flags, i, skip_mask))
            continue;
        double w = i < SOFTMAX_STACK_ROWS ? weights[i] : weight_of(t, mode, costs[i]);
        cumulative += w / sum;
        last = i;
        if (u <= cumulative)
            return i;
    }
    return last;
}

/* All candidates at one cost, T > 0: Dynamo gives each probability 1 / count,
 * normalises by their running sum, and walks the running sum of the
 * normalised values; same operations here, without storing them. */
static uint32_t walk_uniform(const uint8_t *flags, uint32_t n, uint8_t skip_mask,
                             uint32_t count, double u)
{
    double p = 1.0 / (double)count, sum = 0.0;
    for (uint32_t k = 0; k < count; k++)
        sum += p;
    p /= sum;
    double cumulative = 0.0;
    uint32_t last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_candidate(flags, i, skip_mask))
            continue;
        cumulative += p;
        last = i;
        if (u <= cumulative)
            return i;
    }
    return last;
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

    /* Temperature 0: the minimum, exact ties split by u into equal slices
     * (Dynamo breaks them uniformly at random from its own stream). */
    if (temperature == 0.0) {
        uint32_t k = scale_uniform(u, s.at_min);
        *out_row = k == 0 ? s.first_min : nth_equal(costs, flags, n, skip_mask, s.min, k);
        return 0;
    }
    if (s.min == s.max) {
        *out_row = walk_uniform(flags, n, skip_mask, s.count, u);
        return 0;
    }

    weight_terms t = weight_terms_for(s.min, s.max, temperature);
    double weights[SOFTMAX_STACK_ROWS];
    double sum;
    switch (t.mode) {
    case WEIGHT_DYNAMO:
        sum = sum_weights(costs, flags, n, skip_mask, &t, WEIGHT_DYNAMO, weights);
        *out_row =
            walk_weights(costs, flags, n, skip_mask, &t, WEIGHT_DYNAMO, weights, sum, u);
        break;
    case WEIGHT_DYNAMO_MAGNITUDE:
        sum =
            sum_weights(costs, flags, n, skip_mask, &t, WEIGHT_DYNAMO_MAGNITUDE, weights);
        *out_row = walk_weights(costs, flags, n, skip_mask, &t, WEIGHT_DYNAMO_MAGNITUDE,
                                weights, sum, u);
        break;
    case WEIGHT_FALLBACK:
    default:
        sum = sum_weights(costs, flags, n, skip_mask, &t, WEIGHT_FALLBACK, weights);
        *out_row = walk_weights(costs, flags, n, skip_mask, &t, WEIGHT_FALLBACK, weights,
                                sum, u);
        break;
    }
    return 0;
}

int32_t wsel_eligible_skip(const uint8_t *flags, uint32_t n, uint8_t *out_skip,
                           uint32_t *out_count)
{
    /* The rule is written once, in wsel.h, so the inline fallback a plugin
     * uses in an older host and this helper cannot disagree. */
    return wsel_inline_eligible_skip(flags, n, out_skip, out_count);
}
