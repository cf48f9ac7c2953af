// SPDX-License-Identifier: Apache-2.0
/*
 * client.c -- the HTTP side of `wsel replay` (replay.h): libcurl's multi
 * interface, one easy handle per request in flight, at most --concurrency
 * of them; each request starts at its arrival time / --speedup (or as soon
 * as the bound allows), streams, and is timed from the client side. With
 * a route (route.h) it goes where the router says, and the router hears
 * its first token and its end; with --failover a failed transfer goes to
 * the next URL.
 */
#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "replay.h"
#include "route.h"
#include "words.h"

typedef struct flight {
    struct flight *prev, *next; /* the requests in flight */
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char line[4096]; /* the SSE line being read */
    size_t line_len;
    int done_seen;
    int answered; /* a response byte came (no failover after it, a resend) */
    uint32_t attempts; /* URLs tried */
    double t0, first, last, gap_sum;
    replay_route *route; /* NULL: not routed */
    replay_result res;
} flight;

/* The requests in flight (one replay at a time per process). */
static flight *flying;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Integer value of "key" inside the JSON object text (usage figures). */
static int usage_field(const char *js, size_t len, const char *key, uint32_t *out)
{
    jsmn_parser p;
    jsmntok_t t[128];
    jsmn_init(&p);
    int n = jsmn_parse(&p, js, len, t, 128);
    size_t k = strlen(key);
    for (int i = 0; i + 1 < n; i++) {
        if (t[i].type == JSMN_STRING && (size_t)(t[i].end - t[i].start) == k &&
            memcmp(js + t[i].start, key, k) == 0 && t[i + 1].type == JSMN_PRIMITIVE) {
            *out = (uint32_t)strtoul(js + t[i + 1].start, NULL, 10);
            return 0;
        }
    }
    return -1;
}

static void on_line(flight *f, const char *s, size_t n)
{
    if (n < 6 || memcmp(s, "data: ", 6) != 0)
        return;
    s += 6;
    n -= 6;
    if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
        f->done_seen = 1;
        return;
    }
    double t = now_s();
    /* A chat stream's first chunk names the role and carries no token. */
    const char *choice = memmem(s, n, "\"choices\":[{", 12);
    if (choice && !memmem(s, n, "\"delta\":{\"role\":", 16)) {
        if (f->res.tokens == 0 && f->route)
            replay_route_first_token(f->route, f->res.index);
        if (f->res.tokens == 0)
            f->first = t;
        else
            f->gap_sum += t - f->last;
        f->last = t;
        f->res.tokens++;
    }
    if (memmem(s, n, "\"usage\":{", 9)) {
        f->res.usage = usage_field(s, n, "prompt_tokens", &f->res.prompt_tokens) == 0;
        usage_field(s, n, "completion_tokens", &f->res.completion_tokens);
        usage_field(s, n, "cached_tokens", &f->res.cached_tokens);
    }
}

/* A response header line: the engine's X-wsel-served-by. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
    flight *f = ctx;
    size_t n = size * nmemb;
    static const char name[] = "X-wsel-served-by:";
    const size_t k = sizeof(name) - 1;
    f->answered = 1;
    if (n > k && strncasecmp(data, name, k) == 0) {
        size_t a = k, b = n;
        while (a < b && (data[a] == ' ' || data[a] == '\t'))
            a++;
        while (b > a && (data[b - 1] == '\r' || data[b - 1] == '\n' || data[b - 1] == ' '))
            b--;
        if (b - a < sizeof(f->res.served_by))
            snprintf(f->res.served_by, sizeof(f->res.served_by), "%.*s", (int)(b - a),
                     data + a);
    }
    return n;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *ctx)
{
    flight *f = ctx;
    size_t n = size * nmemb;
    f->answered = 1;
    for (size_t i = 0; i < n; i++) {
        char c = data[i];
        if (c == '\n') {
            on_line(f, f->line, f->line_len);
            f->line_len = 0;
        } else if (f->line_len < sizeof(f->line) - 1) {
            f->line[f->line_len++] = c;
        } else {
            f->line_len = 0; /* a line too long to be ours: drop it */
        }
    }
    return n;
}

const char *const replay_prompt_names[] = {"tokens", "text", "words", "chat", NULL};

/* The prompt as JSON members: "prompt" (ids or words) or "messages". */
static size_t prompt_members(char *b, size_t cap, const replay_options *o,
                             const replay_request *q)
{
    size_t n = 0;
    if (q->words) {
        int chat = o->prompt_text == REPLAY_PROMPT_CHAT;
        n += (size_t)snprintf(b, cap, chat ? REPLAY_CHAT_OPEN : "\"prompt\":\"");
        n += replay_words_text(b + n, q->words, q->num_words);
        n += (size_t)snprintf(b + n, cap - n, chat ? REPLAY_CHAT_CLOSE : "\"");
        return n;
    }
    int text = o->prompt_text == REPLAY_PROMPT_TEXT;
    n += (size_t)snprintf(b, cap, text ? "\"prompt\":\"" : "\"prompt\":[");
    for (uint32_t i = 0; i < q->num_tokens; i++)
        n += (size_t)snprintf(b + n, cap - n, i ? (text ? " %u" : ",%u") : "%u",
                              q->tokens[i]);
    n += (size_t)snprintf(b + n, cap - n, text ? "\"" : "]");
    return n;
}

static char *request_body(const replay_options *o, const replay_request *q)
{
    size_t cap = 256 + (q->words ? replay_words_text(NULL, q->words, q->num_words)
                                 : (size_t)q->num_tokens * 11);
    if (o->model)
        cap += strlen(o->model);
    char *b = malloc(cap);
    if (!b)
        return NULL;
    size_t n = 0;
    if (o->model)
        n += (size_t)snprintf(b + n, cap - n, "{\"model\":\"%s\",", o->model);
    else
        n += (size_t)snprintf(b + n, cap - n, "{");
    n += prompt_members(b + n, cap - n, o, q);
    snprintf(b + n, cap - n,
             ",\"max_tokens\":%u,\"min_tokens\":%u,\"ignore_eos\":true,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}",
             q->osl, q->osl);
    return b;
}

/* A request the router refused: a result with no answer, never sent. */
static void refuse(const replay_request *q, double t_start, replay_result_fn fn,
                   void *ctx)
{
    replay_result res;
    memset(&res, 0, sizeof(res));
    res.index = q->index;
    res.isl = q->isl;
    res.osl = q->osl;
    res.start_s = now_s() - t_start;
    fn(ctx, &res);
}

static void set_url(const replay_options *o, flight *f)
{
    char url[2048];
    snprintf(url, sizeof(url), "%s/v1/%scompletions", o->urls[f->res.url],
             o->prompt_text == REPLAY_PROMPT_CHAT ? "chat/" : "");
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
}

/* --failover: a transfer that failed goes to the next URL, the request's
 * clock still running from its first send. 1 when sent again. */
static int fail_over(const replay_options *o, CURLM *multi, flight *f, CURLcode code)
{
    if (!o->failover || code == CURLE_OK || f->attempts >= o->num_urls)
        return 0;
    curl_multi_remove_handle(multi, f->easy);
    if (f->answered)
        f->res.resent++;
    else
        f->res.retries++;
    f->attempts++;
    f->res.url = (f->res.url + 1) % o->num_urls;
    f->answered = f->done_seen = 0;
    f->line_len = 0;
    f->first = f->last = f->gap_sum = 0;
    f->res.tokens = 0;
    f->res.usage = 0;
    f->res.prompt_tokens = f->res.completion_tokens = f->res.cached_tokens = 0;
    f->res.served_by[0] = '\0';
    set_url(o, f);
    return curl_multi_add_handle(multi, f->easy) == CURLM_OK;
}

static flight *start(const replay_options *o, CURLM *multi, const replay_request *q,
                     double t_start, replay_route *route, uint32_t url_index,
                     uint32_t rank)
{
    flight *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->body = request_body(o, q);
    f->easy = curl_easy_init();
    if (!f->body || !f->easy)
        goto fail_free;
    f->res.index = q->index;
    f->res.url = url_index;
    f->res.isl = q->isl;
    f->res.osl = q->osl;
    f->route = route;
    f->res.routed = route != NULL;
    f->res.dp_rank = rank;
    f->attempts = 1;
    f->t0 = now_s();
    f->res.start_s = f->t0 - t_start;
    f->headers = curl_slist_append(NULL, "Content-Type: application/json");
    /* No "Expect: 100-continue" round trip before the body. */
    f->headers = curl_slist_append(f->headers, "Expect:");
    if (route) {
        char h[64];
        snprintf(h, sizeof(h), "X-data-parallel-rank: %u", rank);
        f->headers = curl_slist_append(f->headers, h);
    }
    set_url(o, f);
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, f->body);
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, f->headers);
    curl_easy_setopt(f->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(f->easy, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(f->easy, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(f->easy, CURLOPT_PRIVATE, f);
    curl_easy_setopt(f->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->easy, CURLOPT_TCP_NODELAY, 1L);
    if (o->timeout_s > 0)
        curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, (long)(o->timeout_s * 1000));
    if (curl_multi_add_handle(multi, f->easy) != CURLM_OK)
        goto fail_free;
    f->next = flying;
    if (flying)
        flying->prev = f;
    flying = f;
    return f;

fail_free:
    if (f->easy)
        curl_easy_cleanup(f->easy);
    curl_slist_free_all(f->headers);
    free(f->body);
    free(f);
    return NULL;
}

static void finish(CURLM *multi, flight *f, CURLcode code, double scale,
                   replay_result_fn fn, void *ctx)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        flying = f->next;
    if (f->next)
        f->next->prev = f->prev;
    double t = now_s();
    long status = 0;
    if (code == CURLE_OK)
        curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
    f->res.status = status;
    const double ms = 1e3 * scale; /* model ms per wall second */
    f->res.start_s *= scale;
    f->res.e2e_ms = (t - f->t0) * ms;
    f->res.ttft_ms = f->res.tokens ? (f->first - f->t0) * ms : 0;
    f->res.itl_ms = f->res.tokens > 1 ? f->gap_sum / (f->res.tokens - 1) * ms : 0;
    f->res.protocol_error = status == 200 && !f->done_seen;
    if (f->route)
        replay_route_finished(f->route, &f->res);
    fn(ctx, &f->res);
    curl_multi_remove_handle(multi, f->easy);
    curl_easy_cleanup(f->easy);
    curl_slist_free_all(f->headers);
    free(f->body);
    free(f);
}

int replay_run(const replay_options *o, replay_source *src, replay_route *route,
               replay_result_fn fn, void *ctx, char *err, size_t err_size)
{
    CURLM *multi = curl_multi_init();
    if (!multi) {
        snprintf(err, err_size, "curl_multi_init failed");
        return -1;
    }
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)o->concurrency);
    replay_request next;
    int have = replay_source_next(src, &next, err, err_size), rc = 0;
    uint32_t in_flight = 0;
    double t_start = now_s();
    while (have > 0 || in_flight > 0) {
        double t = now_s() - t_start;
        while (have > 0 && in_flight < o->concurrency &&
               next.arrival_s / (o->speedup * o->time_scale) <= t) {
            uint32_t url = (uint32_t)(next.index % o->num_urls), rank = 0;
            if (route && replay_route_pick(route, &next, &url, &rank) != 0) {
                refuse(&next, t_start, fn, ctx);
                replay_request_free(&next);
                have = replay_source_next(src, &next, err, err_size);
                continue;
            }
            flight *f = start(o, multi, &next, t_start, route, url, rank);
            replay_request_free(&next);
            if (!f) {
                snprintf(err, err_size, "out of memory starting request %llu",
                         (unsigned long long)next.index);
                have = -1;
                break;
            }
            in_flight++;
            have = replay_source_next(src, &next, err, err_size);
        }
        if (have < 0) {
            rc = -1;
            break;
        }
        int running;
        curl_multi_perform(multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            flight *f;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&f);
            if (fail_over(o, multi, f, m->data.result))
                continue;
            finish(multi, f, m->data.result, o->time_scale, fn, ctx);
            in_flight--;
        }
        int wait_ms = 100;
        if (have > 0 && in_flight < o->concurrency) {
            double due =
                next.arrival_s / (o->speedup * o->time_scale) - (now_s() - t_start);
            wait_ms = due <= 0 ? 0 : due < 0.1 ? (int)(due * 1e3) + 1 : 100;
        }
        if (in_flight > 0 || wait_ms > 0)
            curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    }
    if (have > 0)
        replay_request_free(&next);
    /* On a source error, the requests in flight are abandoned. */
    while (flying)
        finish(multi, flying, CURLE_ABORTED_BY_CALLBACK, o->time_scale, fn, ctx);
    curl_multi_cleanup(multi);
    return rc;
}
