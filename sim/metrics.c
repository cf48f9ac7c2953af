// SPDX-License-Identifier: Apache-2.0
/*
 * metrics.c -- sample arrays, percentiles (nearest rank), flicker (prefix
 * ownership), key moves, prefix copies, share volatility, herding and
 * time-averaged load imbalance.
 */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sim_acc_init(sim_acc *a)
{
    memset(a, 0, sizeof(*a));
    a->first_arrival_ns = -1;
    a->window = -1;
    a->herd_window = -1;
}

void sim_acc_free(sim_acc *a)
{
    free(a->ttft_ms.v);
    free(a->e2e_ms.v);
    free(a->select_ns.v);
    memset(a, 0, sizeof(*a));
}

static void push(sim_acc *a, sim_samples *s, float v)
{
    if (s->n == s->capacity) {
        size_t cap = s->capacity ? s->capacity * 2 : 1024;
        float *grown = realloc(s->v, cap * sizeof(*grown));
        if (!grown) {
            a->failed_alloc = 1;
            return;
        }
        s->v = grown;
        s->capacity = cap;
    }
    s->v[s->n++] = v;
}

/* Close the current share window: add each worker's share to its sums. */
static void close_window(sim_acc *a)
{
    if (a->window_total == 0)
        return;
    for (uint32_t w = 0; w < SIM_MAX_RANKS; w++) {
        double share = (double)a->window_count[w] / (double)a->window_total;
        a->share_sum[w] += share;
        a->share_sumsq[w] += share * share;
    }
    a->windows++;
    a->window_total = 0;
    memset(a->window_count, 0, sizeof(a->window_count));
}

/* Close the current burst: its most loaded rank against the fairest
 * split, ceil(burst / ranks). Bursts of one request say nothing. */
static void close_burst(sim_acc *a)
{
    if (a->herd_total >= 2 && a->num_ranks > 0) {
        uint32_t most = 0;
        for (uint32_t r = 0; r < a->num_ranks; r++)
            most = a->herd_count[r] > most ? a->herd_count[r] : most;
        uint32_t fair = (a->herd_total + a->num_ranks - 1) / a->num_ranks;
        a->herd_sum += (double)most / (double)fair;
        a->herd_bursts++;
    }
    if (a->herd_total > 0)
        memset(a->herd_count, 0, sizeof(a->herd_count));
    a->herd_total = 0;
}

void sim_acc_route(sim_acc *a, int64_t now_ns, uint32_t worker, uint32_t isl,
                   uint64_t select_ns)
{
    if (a->first_arrival_ns < 0)
        a->first_arrival_ns = now_ns;
    a->requests++;
    a->input_tokens += isl;
    push(a, &a->select_ns, (float)select_ns);
    int64_t window = now_ns / SIM_SHARE_WINDOW_NS;
    if (window != a->window) {
        close_window(a);
        a->window = window;
    }
    a->window_count[worker]++;
    a->window_total++;
}

void sim_acc_herd(sim_acc *a, int64_t now_ns, uint32_t rank)
{
    int64_t burst = now_ns / SIM_HERD_WINDOW_NS;
    if (burst != a->herd_window) {
        close_burst(a);
        a->herd_window = burst;
    }
    a->herd_count[rank]++;
    a->herd_total++;
}

void sim_acc_affinity(sim_acc *a, int moved)
{
    a->affinity_seen++;
    a->affinity_moved += moved != 0;
}

void sim_acc_ownership(sim_acc *a, uint32_t owned, int away)
{
    a->owned_blocks += owned;
    if (away)
        a->away_blocks += owned;
}

void sim_acc_copies(sim_acc *a, double seconds, double copies)
{
    a->copies_s += seconds * copies;
    a->copies_time_s += seconds;
}

void sim_acc_admitted(sim_acc *a, uint32_t cached_tokens)
{
    a->cached_tokens += cached_tokens;
}

void sim_acc_first_token(sim_acc *a, double ttft_ms)
{
    push(a, &a->ttft_ms, (float)ttft_ms);
}

void sim_acc_finished(sim_acc *a, int64_t now_ns, double e2e_ms, uint32_t output_tokens)
{
    a->finished++;
    a->output_tokens += output_tokens;
    if (now_ns > a->last_finish_ns)
        a->last_finish_ns = now_ns;
    push(a, &a->e2e_ms, (float)e2e_ms);
}

void sim_acc_load(sim_acc *a, double seconds, double rank_ratio, double group_ratio)
{
    a->rank_ratio_s += seconds * rank_ratio;
    a->group_ratio_s += seconds * group_ratio;
    a->loaded_s += seconds;
}

/* Sort non-negative floats ascending: their bit patterns order like the
 * values, so an LSD radix sort (4 passes of 8 bits) does it in O(n);
 * qsort if the buffers cannot be allocated. */
static int cmp_float(const void *pa, const void *pb)
{
    float x = *(const float *)pa, y = *(const float *)pb;
    return (x > y) - (x < y);
}

static void sort_samples(sim_samples *s)
{
    uint32_t *keys = malloc(s->n * sizeof(uint32_t));
    uint32_t *tmp = malloc(s->n * sizeof(uint32_t));
    if (!keys || !tmp) {
        free(keys);
        free(tmp);
        qsort(s->v, s->n, sizeof(float), cmp_float);
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        float f = s->v[i] > 0 ? s->v[i] : 0.0f; /* samples are >= 0; -0 too */
        memcpy(&keys[i], &f, sizeof(f));
    }
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < s->n; i++)
            count[((keys[i] >> shift) & 0xffu) + 1]++;
        for (int b = 0; b < 256; b++)
            count[b + 1] += count[b];
        for (size_t i = 0; i < s->n; i++)
            tmp[count[(keys[i] >> shift) & 0xffu]++] = keys[i];
        uint32_t *swap = keys;
        keys = tmp;
        tmp = swap;
    }
    for (size_t i = 0; i < s->n; i++)
        memcpy(&s->v[i], &keys[i], sizeof(float));
    free(keys);
    free(tmp);
}

/* Nearest-rank percentile of sorted v: the value at index ceil(p * n) - 1. */
static double percentile(const sim_samples *s, double p)
{
    if (s->n == 0)
        return 0;
    size_t k = (size_t)ceil(p * (double)s->n);
    return s->v[k > 0 ? k - 1 : 0];
}

static sim_percentiles summarize(sim_samples *s)
{
    sim_percentiles out = {0, 0, 0, 0};
    if (s->n == 0)
        return out;
    sort_samples(s);
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->v[i];
    out.mean = sum / (double)s->n;
    out.p50 = percentile(s, 0.50);
    out.p90 = percentile(s, 0.90);
    out.p99 = percentile(s, 0.99);
    return out;
}

int32_t sim_acc_finish(sim_acc *a, uint32_t num_workers, sim_metrics *out)
{
    if (a->failed_alloc)
        return WSEL_ENOMEM;
    close_window(a);
    close_burst(a);
    sim_metrics m;
    memset(&m, 0, sizeof(m));
    m.requests = a->requests;
    m.finished = a->finished;
    m.input_tokens = a->input_tokens;
    m.cached_tokens = a->cached_tokens;
    m.output_tokens = a->output_tokens;
    m.kv_hit_rate =
        a->input_tokens ? (double)a->cached_tokens / (double)a->input_tokens : 0;
    m.ttft_ms = summarize(&a->ttft_ms);
    m.e2e_ms = summarize(&a->e2e_ms);
    double span_s = (double)(a->last_finish_ns - a->first_arrival_ns) / 1e9;
    m.throughput_tok_s = span_s > 0 ? (double)a->output_tokens / span_s : 0;
    m.flicker_rate =
        a->owned_blocks ? (double)a->away_blocks / (double)a->owned_blocks : 0;
    m.key_move_rate =
        a->affinity_seen ? (double)a->affinity_moved / (double)a->affinity_seen : 0;
    m.prefix_copies = a->copies_time_s > 0 ? a->copies_s / a->copies_time_s : 0;
    double vol = 0;
    if (a->windows > 0 && num_workers > 0) {
        for (uint32_t w = 0; w < num_workers; w++) {
            double mean = a->share_sum[w] / (double)a->windows;
            double var = a->share_sumsq[w] / (double)a->windows - mean * mean;
            vol += sqrt(var > 0 ? var : 0);
        }
        vol /= num_workers;
    }
    m.share_volatility = vol;
    m.rank_load_imbalance = a->loaded_s > 0 ? a->rank_ratio_s / a->loaded_s : 0;
    m.group_load_imbalance = a->loaded_s > 0 ? a->group_ratio_s / a->loaded_s : 0;
    m.fallbacks = a->fallbacks_end - a->fallbacks_start;
    sim_percentiles sel = summarize(&a->select_ns);
    m.select_ns_p50 = (uint64_t)sel.p50;
    m.select_ns_p99 = (uint64_t)sel.p99;
    m.lost_requests = a->requests - a->finished;
    m.herding_index = a->herd_bursts ? a->herd_sum / (double)a->herd_bursts : 0;
    *out = m;
    return 0;
}
