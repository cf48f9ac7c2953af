// SPDX-License-Identifier: Apache-2.0
/*
 * http.c -- the HTTP API on libmicrohttpd (http.h).
 */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat.h"
#include "format.h"
#include "request.h"

struct eng_http {
    eng *e;
    struct MHD_Daemon *daemon;
};

/* One connection's request: its body as it arrives, then its eng_req. */
typedef struct conn_state {
    char *body;
    size_t len, cap;
    int too_big;
    eng_req *req; /* one reference */
} conn_state;

/* What the content reader is copying out: one formatted piece. */
typedef struct stream_state {
    eng *e;
    eng_req *r; /* one reference */
    char piece[1024];
    size_t piece_len, piece_off;
} stream_state;

static unsigned unknown_logged;

void eng_http_resume(void *conn)
{
    MHD_resume_connection(conn);
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *type,
                              const char *body, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result answer_error(struct MHD_Connection *c, int status, const char *msg)
{
    char body[768];
    size_t n = eng_fmt_error(body, sizeof(body), status, msg);
    return answer(c, (unsigned)status, "application/json", body,
                  n < sizeof(body) ? n : sizeof(body) - 1);
}

/* Format the next piece of a response into s->piece; 0 when nothing is
 * ready. Under io_lock. */
static int next_piece(stream_state *s)
{
    eng_req *r = s->r;
    const eng_options *o = &s->e->opt;
    s->piece_off = 0;
    s->piece_len = 0;
    if (!r->stream) {
        if (!r->done || r->phase == 3)
            return 0;
        if (!r->body) {
            r->body = eng_fmt_whole(o, r, &r->body_len);
            if (!r->body) {
                r->phase = 3;
                return 0;
            }
        }
        size_t n = r->body_len - r->body_off;
        if (n > sizeof(s->piece))
            n = sizeof(s->piece);
        memcpy(s->piece, r->body + r->body_off, n);
        r->body_off += n;
        if (r->body_off == r->body_len)
            r->phase = 3;
        s->piece_len = n;
        return 1;
    }
    if (r->phase == 0) {
        r->phase = 1;
        if (r->api == ENG_API_CHAT) {
            s->piece_len = eng_fmt_role_event(s->piece, sizeof(s->piece), o, r);
            return 1;
        }
    }
    if (r->phase == 1 && r->sent < r->generated) {
        s->piece_len = eng_fmt_token_event(s->piece, sizeof(s->piece), o, r, r->sent++);
        return 1;
    }
    if (r->phase == 1 && r->done) {
        r->phase = 3;
        s->piece_len = eng_fmt_tail(s->piece, sizeof(s->piece), o, r);
        return 1;
    }
    return 0;
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_state *s = cls;
    eng *e = s->e;
    (void)pos;
    size_t n = 0;
    pthread_mutex_lock(&e->io_lock);
    while (n < max) {
        if (s->piece_off == s->piece_len && !next_piece(s))
            break;
        size_t k = s->piece_len - s->piece_off;
        if (k > max - n)
            k = max - n;
        memcpy(buf + n, s->piece + s->piece_off, k);
        s->piece_off += k;
        n += k;
    }
    if (n == 0 && s->r->phase == 3 && s->piece_off == s->piece_len) {
        pthread_mutex_unlock(&e->io_lock);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n == 0) {
        /* Wait for the model: it resumes us when this request progresses. */
        s->r->suspended = 1;
        MHD_suspend_connection(s->r->conn);
    }
    pthread_mutex_unlock(&e->io_lock);
    return (ssize_t)n;
}

static void free_stream(void *cls)
{
    stream_state *s = cls;
    eng_req_release(s->e, s->r);
    free(s);
}

static enum MHD_Result start_generation(eng *e, struct MHD_Connection *c, conn_state *cs,
                                        uint32_t api)
{
    eng_parse_result res;
    eng_req *r;
    if (cs->too_big)
        return answer_error(c, 413, "the request body is too large");
    if (eng_request_parse(&e->opt, api, cs->body ? cs->body : "", cs->len, &r, &res) != 0)
        return answer_error(c, res.status, res.message);
    if (res.unknown[0] && unknown_logged < 16 && !e->opt.quiet) {
        unknown_logged++;
        fprintf(stderr, "wsel-engine: ignored unknown field '%s' (as vLLM does)\n",
                res.unknown);
    }
    const char *dp =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-data-parallel-rank");
    if (dp) {
        char *end;
        long v = strtol(dp, &end, 10);
        if (*dp == '\0' || *end != '\0' || v < 0 || v >= (long)e->num_ranks) {
            eng_req_release(e, r);
            char msg[128];
            snprintf(msg, sizeof(msg), "X-data-parallel-rank must be 0 to %u",
                     e->num_ranks - 1);
            return answer_error(c, 400, msg);
        }
        r->rank = (uint32_t)v;
    }
    stream_state *s = calloc(1, sizeof(*s));
    if (!s) {
        eng_req_release(e, r);
        return answer_error(c, 500, "out of memory");
    }
    pthread_mutex_lock(&e->io_lock);
    r->id = e->next_id++;
    r->conn = c;
    r->refs++; /* the stream's; r's first reference is the connection's */
    pthread_mutex_unlock(&e->io_lock);
    s->e = e;
    s->r = r;
    cs->req = r;
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 4096, read_stream, s, free_stream);
    if (!resp) {
        free_stream(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            r->stream ? "text/event-stream" : "application/json");
    if (r->stream)
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (dp) { /* who serves it, for clients behind a router (wsel replay) */
        char by[96];
        snprintf(by, sizeof(by), "%s:%u/%u", e->opt.host, e->port, r->rank);
        MHD_add_response_header(resp, "X-wsel-served-by", by);
    }
    eng_model_submit(e, r);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result models(eng *e, struct MHD_Connection *c)
{
    char body[1024];
    int n =
        snprintf(body, sizeof(body),
                 "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
                 "\"created\":%lld,\"owned_by\":\"vllm\",\"root\":\"%s\",\"parent\":null,"
                 "\"max_model_len\":%u}]}",
                 e->opt.model, (long long)time(NULL), e->opt.model, e->opt.max_model_len);
    return answer(c, 200, "application/json", body, (size_t)n);
}

typedef struct hash_list {
    char *s;
    size_t n, cap;
    int first, failed;
} hash_list;

static void add_hash(void *ctx, uint64_t hash)
{
    hash_list *l = ctx;
    if (l->failed)
        return;
    if (l->n + 32 > l->cap) {
        size_t cap = l->cap * 2;
        char *g = realloc(l->s, cap);
        if (!g) {
            l->failed = 1;
            return;
        }
        l->s = g;
        l->cap = cap;
    }
    l->n += (size_t)snprintf(l->s + l->n, l->cap - l->n, "%s%llu", l->first ? "" : ",",
                             (unsigned long long)hash);
    l->first = 0;
}

static enum MHD_Result kv_blocks(eng *e, struct MHD_Connection *c)
{
    const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "rank");
    char *end;
    long rank = q ? strtol(q, &end, 10) : -1;
    if (!q || *end || rank < 0 || rank >= (long)e->num_ranks)
        return answer_error(c, 400, "rank=R is required, R a DP rank of this engine");
    hash_list l = {malloc(4096), 0, 4096, 1, 0};
    if (!l.s)
        return answer_error(c, 500, "out of memory");
    l.n = (size_t)snprintf(l.s, l.cap, "{\"rank\":%ld,\"blocks\":[", rank);
    pthread_mutex_lock(&e->model_lock);
    sim_engine_kv_blocks(e->model, (uint32_t)rank, add_hash, &l);
    pthread_mutex_unlock(&e->model_lock);
    l.first = 1;
    add_hash(&l, 0); /* room for the tail */
    enum MHD_Result rc;
    if (l.failed) {
        rc = answer_error(c, 500, "out of memory");
    } else {
        l.n -= l.s[l.n - 2] == ',' ? 2 : 1; /* drop the 0 added for room */
        l.n += (size_t)snprintf(l.s + l.n, l.cap - l.n, "]}");
        rc = answer(c, 200, "application/json", l.s, l.n);
    }
    free(l.s);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    eng *e = cls;
    (void)version;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof(*cs));
        if (!cs)
            return MHD_NO;
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cs->too_big || cs->len + n > e->opt.max_body) {
            cs->too_big = 1;
            return MHD_YES;
        }
        if (cs->len + n + 1 > cs->cap) {
            size_t cap = cs->cap ? cs->cap : 4096;
            while (cap < cs->len + n + 1)
                cap *= 2;
            char *g = realloc(cs->body, cap);
            if (!g)
                return MHD_NO;
            cs->body = g;
            cs->cap = cap;
        }
        memcpy(cs->body + cs->len, upload, n);
        cs->len += n;
        return MHD_YES;
    }
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    uint32_t api = UINT32_MAX;
    if (strcmp(url, "/v1/completions") == 0)
        api = ENG_API_COMPLETIONS;
    else if (strcmp(url, "/v1/chat/completions") == 0)
        api = ENG_API_CHAT;
    if (api != UINT32_MAX)
        return post ? start_generation(e, c, cs, api)
                    : answer_error(c, 405, "Method Not Allowed");
    eng_compat_reply cr;
    int compat = eng_compat_answer(e, url, method, cs->body, cs->len, &cr);
    if (compat != 0) {
        enum MHD_Result rc = compat < 0 ? answer_error(c, 500, "out of memory")
                                        : answer(c, cr.status, "application/json", cr.body, cr.len);
        free(cr.body);
        return rc;
    }
    int known = 1;
    if (strcmp(url, "/health") == 0 && get)
        return answer(c, 200, "text/plain", "", 0);
    if (strcmp(url, "/v1/models") == 0 && get)
        return models(e, c);
    if (strcmp(url, "/wsel/kv_blocks") == 0 && get)
        return kv_blocks(e, c);
    if (strcmp(url, "/metrics") == 0 && get) {
        size_t len;
        char *text = eng_metrics_text(e, &len);
        if (!text)
            return answer_error(c, 500, "out of memory");
        enum MHD_Result rc = answer(c, 200, "text/plain; version=0.0.4", text, len);
        free(text);
        return rc;
    }
    known = strcmp(url, "/health") == 0 || strcmp(url, "/v1/models") == 0 ||
            strcmp(url, "/wsel/kv_blocks") == 0 || strcmp(url, "/metrics") == 0;
    return known ? answer_error(c, 405, "Method Not Allowed")
                 : answer_error(c, 404, "Not Found");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    eng *e = cls;
    conn_state *cs = *con_cls;
    (void)c;
    if (!cs)
        return;
    if (cs->req) {
        pthread_mutex_lock(&e->io_lock);
        int running = !cs->req->done;
        cs->req->cancelled = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
        pthread_mutex_unlock(&e->io_lock);
        if (running)
            eng_model_cancel(e, cs->req->id); /* the client went away */
        eng_req_release(e, cs->req);
    }
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

int eng_http_start(eng_http **out, eng *e, uint32_t *port, char *err, size_t err_size)
{
    eng_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    h->e = e;
    e->port = e->opt.port; /* port 0: set below, before anyone knows the port */
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)e->opt.port);
    if (inet_pton(AF_INET, e->opt.host, &addr.sin_addr) != 1) {
        snprintf(err, err_size, "--host %s: not an IPv4 address", e->opt.host);
        free(h);
        return -1;
    }
    /* poll, not epoll: with libmicrohttpd 0.9.75's edge-triggered epoll,
     * some of 256 connections opened at once were never read (their
     * requests sat in the socket); poll is level-triggered. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem pool[] = {
        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)e->opt.http_threads, NULL},
        {MHD_OPTION_END, 0, NULL}};
    if (e->opt.http_threads < 2)
        pool[0].option = MHD_OPTION_END; /* one thread: no pool */
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, e, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, e,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)16384, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned)4096, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_ARRAY, pool,
        MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, err_size, "cannot listen on %s:%u (in use, or no permission)",
                 e->opt.host, e->opt.port);
        free(h);
        return -1;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : e->opt.port;
    e->port = *port;
    *out = h;
    return 0;
}

void eng_http_stop(eng_http *h)
{
    if (!h)
        return;
    eng *e = h->e;
    /* MHD must not stop with suspended connections: end every request. */
    pthread_mutex_lock(&e->io_lock);
    for (size_t i = 0; e->reqs.slots && i <= e->reqs.mask; i++) {
        if (!e->reqs.slots[i].mixed)
            continue;
        eng_req *r = (eng_req *)(uintptr_t)e->reqs.slots[i].value;
        r->done = 1;
        if (r->suspended) {
            r->suspended = 0;
            MHD_resume_connection(r->conn);
        }
    }
    for (eng_req *r = e->inbox_head; r; r = r->next) {
        r->done = 1;
        if (r->suspended) {
            r->suspended = 0;
            MHD_resume_connection(r->conn);
        }
    }
    pthread_mutex_unlock(&e->io_lock);
    MHD_stop_daemon(h->daemon);
    free(h);
}
