// SPDX-License-Identifier: Apache-2.0
/*
 * run.c -- sim_run: set up the cluster, then the event loop (arrivals,
 * step ends, policy switches) until every request has finished. Engine
 * steps woken at one instant start once all of that instant's events have
 * run, so a burst of simultaneous arrivals is admitted together.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcore.h"

/* Time-weighted load imbalance over [s->now_ns, until). A worker's load is
 * the active tokens of its busiest rank: its ranks step in lockstep, so
 * that rank sets the pace of all of them (and DP sizes may differ). */
static void integrate_load(sim_state *s, int64_t until)
{
    if (until <= s->now_ns)
        return;
    double seconds = (double)(until - s->now_ns) / 1e9;
    double rank_max = 0, rank_sum = 0, group_max = 0, group_sum = 0;
    for (uint32_t w = 0; w < s->cluster->num_workers; w++) {
        const sim_worker *wk = &s->workers[w];
        double g = 0;
        for (uint32_t k = 0; k < wk->num_ranks; k++) {
            double t = (double)s->ranks[wk->first_rank + k].load_tokens;
            rank_sum += t;
            if (t > g)
                g = t;
            if (t > rank_max)
                rank_max = t;
        }
        group_sum += g;
        if (g > group_max)
            group_max = g;
    }
    if (s->index.size > 0) {
        double copies = (double)s->index_holdings / (double)s->index.size;
        sim_acc_copies(&s->acc[0], seconds, copies);
        if (s->num_acc > 1)
            sim_acc_copies(&s->acc[1 + s->phase], seconds, copies);
    }
    if (rank_sum <= 0)
        return;
    double rank_ratio = rank_max / (rank_sum / s->num_ranks);
    double group_ratio = group_max / (group_sum / s->cluster->num_workers);
    sim_acc_load(&s->acc[0], seconds, rank_ratio, group_ratio);
    if (s->num_acc > 1)
        sim_acc_load(&s->acc[1 + s->phase], seconds, rank_ratio, group_ratio);
}

static void report_load(sim_state *s)
{
    const sim_observer *ob = s->args->observer;
    if (!ob || !ob->on_load)
        return;
    uint64_t tokens[SIM_MAX_RANKS];
    for (uint32_t w = 0; w < s->cluster->num_workers; w++) {
        tokens[w] = 0;
        const sim_worker *wk = &s->workers[w];
        for (uint32_t k = 0; k < wk->num_ranks; k++)
            if (s->ranks[wk->first_rank + k].load_tokens > tokens[w])
                tokens[w] = s->ranks[wk->first_rank + k].load_tokens;
    }
    ob->on_load(ob->ctx, s->now_ns, tokens, s->cluster->num_workers);
}

static int32_t do_switch(sim_state *s, uint32_t i)
{
    const sim_switch *sw = &s->args->switches[i];
    char msg[512];
    for (uint32_t q = 0; q < s->num_replicas; q++) {
        const sim_policy *p = &s->args->policy[q];
        if (!p->switch_to) {
            snprintf(s->err, s->err_size, "this policy cannot switch");
            return WSEL_EINVAL;
        }
        int32_t rc = p->switch_to(p->ctx, sw->path, sw->config, msg, sizeof(msg));
        if (rc != 0) {
            snprintf(s->err, s->err_size, "--switch-at %s: %s", sw->label, msg);
            return rc;
        }
    }
    uint64_t fb = sim_router_fallbacks(s);
    s->acc[1 + s->phase].fallbacks_end = fb;
    s->phase = i + 1;
    s->acc[1 + s->phase].fallbacks_start = fb;
    return 0;
}

/* The replay clock (sim_router_config): time from the first request,
 * divided by the speedup, each arrival instant jittered as a whole. */
static int32_t replay_clock(sim_state *s, sim_request *req)
{
    const sim_router_config *rc = s->args->router;
    int64_t t = req->arrival_ns;
    int first = s->first_arrival_ns < 0;
    if (first)
        s->first_arrival_ns = s->last_source_ns = t;
    if (t < s->last_source_ns) {
        snprintf(s->err, s->err_size, "request %llu arrives before the previous one",
                 (unsigned long long)req->id);
        return WSEL_EINVAL;
    }
    int64_t at = t - s->first_arrival_ns;
    if (rc->jitter_ns > 0) {
        if (first || t != s->last_source_ns)
            s->jitter_off_ns =
                (int64_t)(wsel_rng_uniform(&s->jitter_rng) * (double)rc->jitter_ns);
        at += s->jitter_off_ns;
    }
    if (rc->speedup > 0 && rc->speedup != 1)
        at = (int64_t)llround((double)at / rc->speedup);
    if (!first && at < s->last_arrival_ns)
        at = s->last_arrival_ns; /* jitter keeps the order */
    s->last_source_ns = t;
    s->last_arrival_ns = at;
    req->arrival_ns = at;
    return 0;
}

static int32_t pull(sim_state *s, sim_request *req, int *have)
{
    int32_t rc = s->args->source->next(s->args->source_ctx, req, s->err, s->err_size);
    if (rc < 0)
        return rc;
    *have = rc;
    if (rc > 0 && replay_clock(s, req) != 0)
        return WSEL_EINVAL;
    if (rc > 0 && req->arrival_ns < s->now_ns) {
        snprintf(s->err, s->err_size, "request %llu arrives before the previous one",
                 (unsigned long long)req->id);
        return WSEL_EINVAL;
    }
    return rc > 0 ? sim_heap_push(&s->heap, req->arrival_ns, SIM_EV_ARRIVAL, 0) : 0;
}

static int32_t loop(sim_state *s)
{
    sim_request req;
    int have = 0;
    int32_t rc = pull(s, &req, &have);
    for (uint32_t i = 0; rc == 0 && i < s->args->num_switches; i++)
        rc = sim_heap_push(&s->heap, s->args->switches[i].at_ns, SIM_EV_SWITCH, i);
    const sim_observer *ob = s->args->observer;
    sim_event ev;
    while (rc == 0 && !s->failed && sim_heap_pop(&s->heap, &ev)) {
        if (ev.type == SIM_EV_SWITCH && !have && s->in_flight == 0)
            continue; /* nothing left to route */
        integrate_load(s, ev.time_ns);
        s->now_ns = ev.time_ns;
        sim_router_apply_due(s, s->now_ns);
        if (ev.type == SIM_EV_ARRIVAL) {
            rc = sim_router_route(s, &req);
            if (rc == 0)
                rc = pull(s, &req, &have);
            if (ob && ob->on_progress && (s->routed & 1023) == 0)
                ob->on_progress(ob->ctx, s->now_ns, s->routed);
        } else if (ev.type == SIM_EV_STEP_END) {
            sim_engine_end_step(s, ev.arg);
            sim_engine_wake(s, ev.arg);
            report_load(s);
        } else {
            rc = do_switch(s, ev.arg);
        }
        /* Steps start once nothing else happens at this instant. */
        if (rc == 0 && s->num_pending > 0 &&
            (s->heap.size == 0 || s->heap.items[0].time_ns > s->now_ns))
            rc = sim_engine_start_pending(s);
    }
    if (rc == 0 && s->failed) {
        snprintf(s->err, s->err_size, "out of memory in the router index");
        rc = s->failed;
    }
    return rc;
}

int32_t sim_run(const sim_run_args *args, sim_result *out, char *err, size_t err_size)
{
    sim_state *s = malloc(sizeof(*s));
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    int32_t rc = sim_state_setup(s, args, err, err_size);
    if (rc != 0)
        goto out_teardown;
    uint64_t fb0 = sim_router_fallbacks(s);
    s->acc[0].fallbacks_start = fb0;
    if (s->num_acc > 1)
        s->acc[1].fallbacks_start = fb0;
    rc = loop(s);
    if (rc != 0)
        goto out_teardown;
    uint64_t fb = sim_router_fallbacks(s);
    s->acc[0].fallbacks_end = fb;
    if (s->num_acc > 1)
        s->acc[1 + s->phase].fallbacks_end = fb;
    sim_result res;
    memset(&res, 0, sizeof(res));
    res.sim_seconds = (double)s->now_ns / 1e9;
    rc = sim_acc_finish(&s->acc[0], args->cluster->num_workers, &res.total);
    res.num_phases = s->num_acc > 1 ? s->phase + 1 : 1;
    for (uint32_t i = 0; rc == 0 && s->num_acc > 1 && i < res.num_phases; i++) {
        rc = sim_acc_finish(&s->acc[1 + i], args->cluster->num_workers, &res.phase[i]);
        res.phase_label[i] = i == 0 ? args->first_label : args->switches[i - 1].label;
    }
    if (s->num_acc == 1) {
        res.phase[0] = res.total;
        res.phase_label[0] = args->first_label;
    }
    if (rc != 0) {
        snprintf(err, err_size, "out of memory for the metrics");
        goto out_teardown;
    }
    *out = res;

out_teardown:
    sim_state_teardown(s);
    free(s);
    return rc;
}
