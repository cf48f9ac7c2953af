// SPDX-License-Identifier: Apache-2.0
/*
 * route.c -- `wsel replay --plugin`: libwsel-router in the replayer
 * (route.h).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h" /* sim_explain_reason_name */
#include "json_write.h"
#include "plugin_path.h"
#include "route.h"
#include "wsel_router.h"

struct replay_route {
    const replay_options *o;
    wsel_host *host;
    wsel_router *router;
    char path[PATH_MAX];
    uint32_t first[REPLAY_MAX_URLS]; /* index of each URL's rank 0 in routed[] */
    uint32_t num_ranks;
    uint64_t *routed; /* requests routed per (URL, rank) */
    uint64_t plugin_answers, fallbacks, refused;
    uint64_t outcomes; /* finishes the router took (an outcome each) */
    uint64_t finish_errors;
    int events; /* the KV index follows KV events */
};

/* Split "tcp://a,tcp://b" into `n` endpoints in `buf` (a copy). 0 or -1. */
static int split_endpoints(const char *list, char *buf, size_t size, const char **out,
                           uint32_t n)
{
    snprintf(buf, size, "%s", list);
    uint32_t k = 0;
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p;
         p = strtok_r(NULL, ",", &save)) {
        if (k == n)
            return -1;
        out[k++] = p;
    }
    return k == n ? 0 : -1;
}

static int add_workers(replay_route *r, char *err, size_t err_size)
{
    const replay_options *o = r->o;
    for (uint32_t i = 0; i < o->num_urls; i++) {
        uint32_t dp = o->dp[i];
        char buf[4096];
        const char *endpoints[64];
        wsel_router_worker w = {.worker_id = i, .address = o->urls[i], .dp_size = dp};
        if (o->kv_events[i] != NULL) {
            if (dp > 64 ||
                split_endpoints(o->kv_events[i], buf, sizeof(buf), endpoints, dp) != 0) {
                snprintf(err, err_size, "--kv-events %s: expected %u endpoint(s) for %s",
                         o->kv_events[i], dp, o->urls[i]);
                return -1;
            }
            w.kv_endpoints = endpoints;
        }
        char why[512];
        if (wsel_router_add_worker(r->router, &w, why, sizeof(why)) != 0) {
            snprintf(err, err_size, "%s: %s", o->urls[i], why);
            return -1;
        }
        r->first[i] = r->num_ranks;
        r->num_ranks += dp;
    }
    r->routed = calloc(r->num_ranks, sizeof(*r->routed));
    if (r->routed == NULL) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    return 0;
}

int replay_route_open(replay_route **out, const replay_options *o, char *err,
                      size_t err_size)
{
    replay_route *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    r->o = o;
    char why[1024];
    if (wsel_plugin_resolve(o->plugin, r->path, sizeof(r->path), why, sizeof(why)) != 0) {
        snprintf(err, err_size, "--plugin %s: %s", o->plugin, why);
        goto out_free;
    }
    wsel_host_options ho;
    wsel_host_options_default(&ho);
    ho.seed = o->seed;
    int32_t rc = wsel_host_create(&ho, &r->host);
    if (rc != 0) {
        snprintf(err, err_size, "cannot create a host: %s", wsel_strerror(rc));
        goto out_free;
    }
    if (wsel_host_switch(r->host, r->path, o->config, why, sizeof(why)) != 0) {
        snprintf(err, err_size, "%s", why);
        goto out_close;
    }
    for (uint32_t i = 0; i < o->num_urls; i++)
        r->events |= o->kv_events[i] != NULL;
    wsel_router_options ro = {
        .struct_size = sizeof(ro),
        .block_size = o->block_size,
        .kv_source = r->events ? WSEL_ROUTER_KV_EVENTS : WSEL_ROUTER_KV_HISTORY,
        .host = r->host,
    };
    if (wsel_router_create(&ro, &r->router, why, sizeof(why)) != 0) {
        snprintf(err, err_size, "cannot create the router: %s", why);
        goto out_close;
    }
    if (add_workers(r, err, err_size) != 0)
        goto out_close;
    *out = r;
    return 0;

out_close:
    replay_route_close(r);
    return -1;
out_free:
    free(r);
    return -1;
}

void replay_route_close(replay_route *r)
{
    if (r == NULL)
        return;
    wsel_router_destroy(r->router);
    wsel_host_destroy(r->host);
    free(r->routed);
    free(r);
}

int replay_route_pick(replay_route *r, const replay_request *q, uint32_t *url,
                      uint32_t *rank)
{
    wsel_route_request rq;
    memset(&rq, 0, sizeof(rq));
    rq.struct_size = sizeof(rq);
    rq.request_id = q->index + 1;
    rq.tokens = q->tokens;
    rq.num_tokens = q->num_tokens;
    wsel_route_result res;
    int32_t rc = wsel_router_route(r->router, &rq, &res);
    if (rc != 0 || res.worker_id >= r->o->num_urls ||
        res.dp_rank >= r->o->dp[res.worker_id]) {
        r->refused++;
        return rc != 0 ? rc : WSEL_ESTATE;
    }
    *url = (uint32_t)res.worker_id;
    *rank = res.dp_rank;
    r->routed[r->first[*url] + *rank]++;
    if (res.answer == WSEL_ANSWER_PLUGIN)
        r->plugin_answers++;
    else
        r->fallbacks++;
    return 0;
}

void replay_route_first_token(replay_route *r, uint64_t index)
{
    (void)wsel_router_first_token(r->router, index + 1);
}

void replay_route_finished(replay_route *r, const replay_result *res)
{
    wsel_router_finish info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    int ok = res->status == 200 && !res->protocol_error && res->usage;
    if (!ok)
        info.flags |= WSEL_ROUTER_FINISH_FAILED;
    if (res->usage) {
        info.flags |= WSEL_ROUTER_FINISH_CACHED_KNOWN;
        info.cached_tokens = res->cached_tokens;
        info.output_tokens = res->completion_tokens;
    } else {
        info.output_tokens = res->tokens;
    }
    /* The replay's own times, in model time like the report; a time it
     * could not measure (no token came) is left to the router's clock. */
    info.ttft_us = (uint64_t)(res->ttft_ms * 1e3 + 0.5);
    info.e2e_us = (uint64_t)(res->e2e_ms * 1e3 + 0.5);
    if (info.e2e_us < info.ttft_us)
        info.e2e_us = info.ttft_us;
    if (wsel_router_finished_ex(r->router, res->index + 1, &info) == 0)
        r->outcomes++;
    else
        r->finish_errors++;
}

static void reasons(const replay_route *r, wsel_host_counters *c)
{
    memset(c, 0, sizeof(*c));
    wsel_host_read_counters(r->host, c, sizeof(*c));
}

void replay_route_report(FILE *out, const replay_route *r)
{
    wsel_host_counters c;
    reasons(r, &c);
    fprintf(
        out,
        "routing: policy %s (%s); %llu routed: %llu by the plugin, %llu by the host's "
        "fallback, %llu refused; %llu outcomes delivered\n",
        wsel_host_policy_name(r->host), r->path,
        (unsigned long long)(r->plugin_answers + r->fallbacks),
        (unsigned long long)r->plugin_answers, (unsigned long long)r->fallbacks,
        (unsigned long long)r->refused, (unsigned long long)r->outcomes);
    fprintf(out, "  reasons:");
    for (uint32_t k = 0; k < WSEL_HOST_REASON_SLOTS; k++)
        if (c.answers_by_reason[k])
            fprintf(out, " %s %llu",
                    k + 1 == WSEL_HOST_REASON_SLOTS ? "plugin"
                                                    : sim_explain_reason_name(k),
                    (unsigned long long)c.answers_by_reason[k]);
    fputc('\n', out);
    wsel_router_counters k;
    wsel_router_read_counters(r->router, &k);
    uint64_t skipped = 0;
    for (uint32_t i = 0; i < WSEL_KV_SKIP_REASONS; i++)
        skipped += k.kv_skipped[i];
    fprintf(out,
            "  KV index from %s: %llu of %llu prompt blocks cached on the chosen rank",
            r->events ? "KV events" : "routing history",
            (unsigned long long)k.overlap_blocks, (unsigned long long)k.prompt_blocks);
    if (r->events)
        fprintf(out, "; %llu event messages, %llu blocks stored, %llu skipped",
                (unsigned long long)k.kv_messages, (unsigned long long)k.kv_blocks_stored,
                (unsigned long long)skipped);
    fputc('\n', out);
    for (uint32_t i = 0; i < r->o->num_urls; i++) {
        fprintf(out, "  worker %u %s:", i, r->o->urls[i]);
        for (uint32_t k = 0; k < r->o->dp[i]; k++)
            fprintf(out, "%s rank %u: %llu", k ? "," : "", k,
                    (unsigned long long)r->routed[r->first[i] + k]);
        fputc('\n', out);
    }
}

void replay_route_json(FILE *out, const replay_route *r)
{
    wsel_host_counters c;
    reasons(r, &c);
    fputs("{\"policy\":", out);
    wsel_json_write_string(out, wsel_host_policy_name(r->host));
    fputs(",\"path\":", out);
    wsel_json_write_string(out, r->path);
    fprintf(
        out,
        ",\"routed\":%llu,\"plugin_answers\":%llu,\"fallbacks\":%llu,\"refused\":%llu,"
        "\"outcomes\":%llu,\"answers_by_reason\":{",
        (unsigned long long)(r->plugin_answers + r->fallbacks),
        (unsigned long long)r->plugin_answers, (unsigned long long)r->fallbacks,
        (unsigned long long)r->refused, (unsigned long long)r->outcomes);
    int first = 1;
    for (uint32_t k = 0; k < WSEL_HOST_REASON_SLOTS; k++) {
        if (!c.answers_by_reason[k])
            continue;
        fprintf(out, "%s\"%s\":%llu", first ? "" : ",",
                k + 1 == WSEL_HOST_REASON_SLOTS ? "plugin" : sim_explain_reason_name(k),
                (unsigned long long)c.answers_by_reason[k]);
        first = 0;
    }
    wsel_router_counters k;
    wsel_router_read_counters(r->router, &k);
    fprintf(out,
            "},\"kv_source\":\"%s\",\"prompt_blocks\":%llu,\"overlap_blocks\":%llu,"
            "\"kv_messages\":%llu,\"kv_blocks_stored\":%llu",
            r->events ? "events" : "history", (unsigned long long)k.prompt_blocks,
            (unsigned long long)k.overlap_blocks, (unsigned long long)k.kv_messages,
            (unsigned long long)k.kv_blocks_stored);
    fputs(",\"ranks\":[", out);
    first = 1;
    for (uint32_t i = 0; i < r->o->num_urls; i++)
        for (uint32_t k = 0; k < r->o->dp[i]; k++) {
            fprintf(out, "%s{\"url\":", first ? "" : ",");
            wsel_json_write_string(out, r->o->urls[i]);
            fprintf(out, ",\"worker\":%u,\"dp_rank\":%u,\"requests\":%llu}", i, k,
                    (unsigned long long)r->routed[r->first[i] + k]);
            first = 0;
        }
    fputs("]}", out);
}
