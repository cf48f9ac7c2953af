/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_tokenize.c -- wsel_tokenizer: text prompts and chat
 * requests turned into the model's token ids (libwsel-tokenizer,
 * docs/tokenize.md) so their blocks hash like the engines' KV events.
 *
 * The files are opened at configuration time in the master (a malformed
 * or unsupported file refuses the configuration with the reason, and the
 * workers inherit the tokenizer). Tokenizing costs about a microsecond
 * per token, so it runs in one of nginx's thread pools
 * (ngx_thread_task_post): the request waits, blocked as for aio, while
 * the event loop serves others; the task's completion event routes it.
 * Prompts of `large=` bytes or more may go to a pool of their own
 * (`large_pool=`) whose threads run at the lowest priority, so a huge
 * prompt does not take the CPU from a small one's tokenizing.
 *
 * A chat request's rendering is cut where its first non-system message
 * begins, at the start of a special token; the ids of that leading part
 * (the system prompt, repeated across requests) are cached per worker,
 * bounded in bytes, behind a mutex, and only the rest is encoded. Added
 * tokens are split out before the tokenizer's normalizer and
 * pre-tokenizer run, so the ids of a text cut where a special token
 * starts are the ids of its two parts; an entry is kept only when its ids
 * are also the whole rendering's first ids.
 */

#include "ngx_http_wsel_module.h"

#if (NGX_THREADS) && defined(NGX_HTTP_WSEL_TOKENIZER)

#include <pthread.h>
#include <sched.h>

#include "wsel_json.h"
#include "wsel_tokenizer.h"


#define NGX_HTTP_WSEL_TOK_ENTRIES  16
#define NGX_HTTP_WSEL_TOK_CACHE    (16 * 1024 * 1024)
#define NGX_HTTP_WSEL_TOK_LARGE    (64 * 1024)


/* One cached leading part of a rendering: its text and ids (malloc'd). */
typedef struct {
    u_char                         *text;
    size_t                          len;
    uint32_t                       *ids;
    size_t                          n;
    uint64_t                        used;      /* LRU clock */
} ngx_http_wsel_tok_entry_t;


struct ngx_http_wsel_tok_s {
    wsel_tokenizer                 *tok;
    ngx_thread_pool_t              *pool;
    ngx_thread_pool_t              *large_pool; /* or NULL */
    size_t                          large;     /* its prompts' bytes */
    /* special tokens a cut may sit in front of (lstrip false) */
    ngx_str_t                      *added;
    ngx_uint_t                      nadded;
    u_char                          first[256]; /* their first bytes */
    /* the prefix cache */
    pthread_mutex_t                 mu;
    size_t                          cache_max;
    size_t                          cache_bytes;
    uint64_t                        clock;
    ngx_http_wsel_tok_entry_t       entry[NGX_HTTP_WSEL_TOK_ENTRIES];
};


/* One request's tokenizing: set by the event loop, filled by the thread. */
struct ngx_http_wsel_tok_task_s {
    ngx_http_wsel_tok_t            *tk;
    ngx_http_request_t             *request;
    u_char                         *in;        /* escaped string or body */
    size_t                          in_len;
    ngx_uint_t                      chat;
    ngx_uint_t                      low;       /* in large_pool */
    u_char                         *text;      /* hashed if refused */
    size_t                          text_len;
    /* the answer */
    int32_t                         rc;
    uint32_t                       *ids;       /* malloc'd */
    size_t                          n;
    ngx_uint_t                      cache;     /* 0 none, 1 hit, 2 miss */
    size_t                          reused;    /* ids taken from the cache */
};


/* ------------------------------------------------------------------------ */
/* in the pool's threads                                                    */
/* ------------------------------------------------------------------------ */

/* Encode text[0..len) into *ids (grown to *cap), its count in *n. */
static int32_t
ngx_http_wsel_tok_encode(ngx_http_wsel_tok_t *tk, const u_char *text,
    size_t len, uint32_t flags, uint32_t **ids, size_t *cap, size_t *n)
{
    size_t     want;
    int32_t    rc;
    uint32_t  *buf;

    want = len + 16;    /* a token is a byte at least, plus the specials */

    for ( ;; ) {
        if (*cap < want) {
            buf = realloc(*ids, want * sizeof(uint32_t));
            if (buf == NULL) {
                return WSEL_TOKENIZER_EINTERNAL;
            }
            *ids = buf;
            *cap = want;
        }

        rc = wsel_tokenizer_encode(tk->tok, (const char *) text, len, flags,
                                   *ids, *cap, n);
        if (rc != WSEL_TOKENIZER_ERANGE) {
            return rc;
        }

        want = *n;
    }
}


/* Does a special token (one a cut may precede) start at p? */
static ngx_uint_t
ngx_http_wsel_tok_special_at(ngx_http_wsel_tok_t *tk, const u_char *p,
    const u_char *e)
{
    ngx_uint_t  i;

    if (p >= e || !tk->first[*p]) {
        return 0;
    }

    for (i = 0; i < tk->nadded; i++) {
        if ((size_t) (e - p) >= tk->added[i].len
            && ngx_memcmp(p, tk->added[i].data, tk->added[i].len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* The next member of the object p is in (p after its '{' or a member):
 * NGX_OK with the key k[0..klen) and the value v..ve, NGX_DONE at its
 * '}', NGX_DECLINED when it is not JSON. */
static ngx_int_t
ngx_http_wsel_tok_member(u_char **pp, u_char *e, u_char **k, size_t *klen,
    u_char **v, u_char **ve)
{
    u_char  *p;

    p = ngx_http_wsel_js_ws(*pp, e);
    if (p < e && *p == ',') {
        p = ngx_http_wsel_js_ws(p + 1, e);
    }

    if (p < e && *p == '}') {
        return NGX_DONE;
    }

    if (p == e || *p != '"') {
        return NGX_DECLINED;
    }

    *k = p + 1;
    p = ngx_http_wsel_js_string(p, e);
    if (p == NULL) {
        return NGX_DECLINED;
    }
    *klen = (size_t) (p - 1 - *k);

    p = ngx_http_wsel_js_ws(p, e);
    if (p == e || *p != ':') {
        return NGX_DECLINED;
    }

    *v = ngx_http_wsel_js_ws(p + 1, e);
    *ve = ngx_http_wsel_js_value(*v, e, 2);
    if (*ve == NULL) {
        return NGX_DECLINED;
    }

    *pp = *ve;
    return NGX_OK;
}


#define ngx_http_wsel_tok_key(k, klen, s)                                     \
    ((klen) == sizeof(s) - 1 && ngx_strncmp(k, s, sizeof(s) - 1) == 0)


/* Message m (p at its '{'): is its role system or developer; its content
 * when a string (the quotes included), else c = NULL. */
static ngx_int_t
ngx_http_wsel_tok_message(u_char *p, u_char *e, ngx_uint_t *system,
    u_char **c, u_char **ce)
{
    u_char     *k, *v, *ve;
    size_t      klen;
    ngx_int_t   rc;

    *system = 0;
    *c = NULL;
    p++;

    while ((rc = ngx_http_wsel_tok_member(&p, e, &k, &klen, &v, &ve))
           == NGX_OK)
    {
        if (ngx_http_wsel_tok_key(k, klen, "role")) {
            *system = (ve - v == 8 && ngx_strncmp(v, "\"system\"", 8) == 0)
                      || (ve - v == 11
                          && ngx_strncmp(v, "\"developer\"", 11) == 0);

        } else if (ngx_http_wsel_tok_key(k, klen, "content") && *v == '"') {
            *c = v;
            *ce = ve;
        }
    }

    return rc == NGX_DONE ? NGX_OK : NGX_DECLINED;
}


/* The first non-system message's content (a string) after at least one
 * system message: its JSON text c..ce, or NGX_DECLINED. */
static ngx_int_t
ngx_http_wsel_tok_first_turn(u_char *p, u_char *e, u_char **c, u_char **ce)
{
    u_char      *k, *v, *ve;
    size_t       klen;
    ngx_int_t    rc;
    ngx_uint_t   system, nsystem;

    p = ngx_http_wsel_js_ws(p, e);
    if (p == e || *p != '{') {
        return NGX_DECLINED;
    }
    p++;

    do {
        rc = ngx_http_wsel_tok_member(&p, e, &k, &klen, &v, &ve);
        if (rc != NGX_OK) {
            return NGX_DECLINED;
        }
    } while (!(ngx_http_wsel_tok_key(k, klen, "messages") && *v == '['));

    nsystem = 0;
    p = v + 1;

    for ( ;; ) {
        p = ngx_http_wsel_js_ws(p, e);
        if (p < e && *p == ',') {
            p = ngx_http_wsel_js_ws(p + 1, e);
        }
        if (p == e || *p != '{') {
            return NGX_DECLINED;
        }
        ve = ngx_http_wsel_js_value(p, e, 2);
        if (ve == NULL
            || ngx_http_wsel_tok_message(p, ve, &system, c, ce) != NGX_OK)
        {
            return NGX_DECLINED;
        }
        if (!system) {
            break;
        }
        nsystem++;
        p = ve;
    }

    return nsystem && *c && *ce - *c > 2 ? NGX_OK : NGX_DECLINED;
}


/* Where the leading part of the rendering text[0..len) ends: the last
 * special token starting before the first non-system message's content;
 * 0 for none. */
static size_t
ngx_http_wsel_tok_cut(ngx_http_wsel_tok_t *tk, ngx_http_wsel_tok_task_t *t,
    const u_char *text, size_t len)
{
    u_char           *c, *ce, *turn;
    long              got;
    size_t            at;
    const u_char     *hit;
    wsel_json_token   jt;

    if (ngx_http_wsel_tok_first_turn(t->in, t->in + t->in_len, &c, &ce)
        != NGX_OK)
    {
        return 0;
    }

    turn = malloc(ce - c);
    if (turn == NULL) {
        return 0;
    }

    ngx_memzero(&jt, sizeof(jt));
    jt.type = WSEL_JSON_STRING;
    jt.start = 1;
    jt.end = (uint32_t) (ce - c - 1);

    got = wsel_json_string((const char *) c, &jt, (char *) turn, ce - c);
    hit = got > 0 ? memmem(text, len, turn, (size_t) got) : NULL;
    free(turn);

    if (hit == NULL) {
        return 0;
    }

    for (at = (size_t) (hit - text); at > 0; at--) {
        if (ngx_http_wsel_tok_special_at(tk, text + at, text + len)) {
            return at;
        }
    }

    return 0;
}


/* The cached leading part of text, if any: its ids copied into ids[],
 * their count returned, *len the text it covers. [any thread] */
static size_t
ngx_http_wsel_tok_lookup(ngx_http_wsel_tok_t *tk, const u_char *text,
    size_t len, uint32_t *ids, size_t *cut)
{
    size_t                      n;
    ngx_uint_t                  i;
    ngx_http_wsel_tok_entry_t  *en;

    n = 0;
    *cut = 0;
    pthread_mutex_lock(&tk->mu);

    for (i = 0; i < NGX_HTTP_WSEL_TOK_ENTRIES; i++) {
        en = &tk->entry[i];

        if (en->text == NULL || en->len > len || en->len <= *cut
            || ngx_memcmp(en->text, text, en->len) != 0
            || !ngx_http_wsel_tok_special_at(tk, text + en->len, text + len))
        {
            continue;
        }

        *cut = en->len;
        n = en->n;
        ngx_memcpy(ids, en->ids, n * sizeof(uint32_t));
        en->used = ++tk->clock;
    }

    pthread_mutex_unlock(&tk->mu);
    return n;
}


/* Keep text[0..len) and its ids, evicting the least recently used
 * entries to stay within the cache's bytes. [any thread] */
static void
ngx_http_wsel_tok_insert(ngx_http_wsel_tok_t *tk, const u_char *text,
    size_t len, const uint32_t *ids, size_t n)
{
    size_t                      bytes;
    ngx_uint_t                  i, old;
    ngx_http_wsel_tok_entry_t  *en, e;

    bytes = len + n * sizeof(uint32_t);
    if (bytes > tk->cache_max) {
        return;
    }

    e.text = malloc(len);
    e.ids = malloc(n * sizeof(uint32_t) + 1);
    if (e.text == NULL || e.ids == NULL) {
        free(e.text);
        free(e.ids);
        return;
    }

    ngx_memcpy(e.text, text, len);
    ngx_memcpy(e.ids, ids, n * sizeof(uint32_t));
    e.len = len;
    e.n = n;

    pthread_mutex_lock(&tk->mu);

    for ( ;; ) {
        old = 0;
        for (i = 0; i < NGX_HTTP_WSEL_TOK_ENTRIES; i++) {
            en = &tk->entry[i];
            if (en->text && en->len == len
                && ngx_memcmp(en->text, text, len) == 0)
            {
                goto done;          /* another thread was first */
            }
            if (en->text == NULL || (tk->entry[old].text
                                     && en->used < tk->entry[old].used))
            {
                old = i;
            }
        }

        en = &tk->entry[old];
        if (en->text == NULL && tk->cache_bytes + bytes <= tk->cache_max) {
            break;
        }

        tk->cache_bytes -= en->len + en->n * sizeof(uint32_t);
        free(en->text);
        free(en->ids);
        en->text = NULL;
    }

    e.used = ++tk->clock;
    *en = e;
    e.text = NULL;
    e.ids = NULL;
    tk->cache_bytes += bytes;

done:

    pthread_mutex_unlock(&tk->mu);
    free(e.text);
    free(e.ids);
}


/* The rendering's ids: the cached leading part's, then the rest encoded;
 * on a miss, the whole encoded and its leading part kept when its ids
 * begin the whole's. */
static int32_t
ngx_http_wsel_tok_rendered(ngx_http_wsel_tok_t *tk,
    ngx_http_wsel_tok_task_t *t, const u_char *text, size_t len)
{
    int32_t    rc;
    size_t     cap, cut, n, pn, pcap;
    uint32_t  *rest, *pre;

    cap = len + 16;
    t->ids = malloc(cap * sizeof(uint32_t));
    if (t->ids == NULL) {
        return WSEL_TOKENIZER_EINTERNAL;
    }

    if (tk->cache_max == 0) {
        return ngx_http_wsel_tok_encode(tk, text, len, 0, &t->ids, &cap,
                                        &t->n);
    }

    n = ngx_http_wsel_tok_lookup(tk, text, len, t->ids, &cut);

    if (cut) {
        t->cache = 1;
        t->reused = n;
        rest = NULL;
        pcap = 0;
        rc = ngx_http_wsel_tok_encode(tk, text + cut, len - cut, 0, &rest,
                                      &pcap, &pn);
        if (rc == 0) {
            if (n + pn > cap) {
                rc = WSEL_TOKENIZER_EINTERNAL;
            } else {
                ngx_memcpy(t->ids + n, rest, pn * sizeof(uint32_t));
                t->n = n + pn;
            }
        }
        free(rest);
        return rc;
    }

    rc = ngx_http_wsel_tok_encode(tk, text, len, 0, &t->ids, &cap, &t->n);
    cut = rc == 0 ? ngx_http_wsel_tok_cut(tk, t, text, len) : 0;
    if (cut == 0) {
        return rc;
    }

    t->cache = 2;
    pre = NULL;
    pcap = 0;

    if (ngx_http_wsel_tok_encode(tk, text, cut, 0, &pre, &pcap, &pn) == 0
        && pn <= t->n
        && ngx_memcmp(pre, t->ids, pn * sizeof(uint32_t)) == 0)
    {
        ngx_http_wsel_tok_insert(tk, text, cut, pre, pn);
    }

    free(pre);
    return rc;
}


/* A chat body rendered by the model's template, then its ids. */
static int32_t
ngx_http_wsel_tok_chat(ngx_http_wsel_tok_t *tk, ngx_http_wsel_tok_task_t *t)
{
    char     *out, *more;
    size_t    cap, n;
    int32_t   rc;

    cap = t->in_len * 2 + 4096;
    out = NULL;

    for ( ;; ) {
        more = realloc(out, cap);
        if (more == NULL) {
            rc = WSEL_TOKENIZER_EINTERNAL;
            goto failed;
        }
        out = more;

        rc = wsel_tokenizer_render_chat(tk->tok, (const char *) t->in,
                                        t->in_len, out, cap, &n, NULL, 0);
        if (rc != WSEL_TOKENIZER_ERANGE) {
            break;
        }
        cap = n + 1;
    }

    if (rc == 0) {
        rc = ngx_http_wsel_tok_rendered(tk, t, (u_char *) out, n);
    }

failed:

    free(out);
    return rc;
}


/* A /v1/completions string prompt: its JSON escapes decoded, then its ids
 * with the tokenizer's special tokens, as vLLM encodes it. */
static int32_t
ngx_http_wsel_tok_text(ngx_http_wsel_tok_t *tk, ngx_http_wsel_tok_task_t *t)
{
    long              got;
    size_t            cap;
    u_char           *text;
    int32_t           rc;
    wsel_json_token   jt;

    text = malloc(t->in_len + 1);
    if (text == NULL) {
        return WSEL_TOKENIZER_EINTERNAL;
    }

    /* t->in holds the string's quotes */
    ngx_memzero(&jt, sizeof(jt));
    jt.type = WSEL_JSON_STRING;
    jt.start = 1;
    jt.end = (uint32_t) (t->in_len - 1);

    got = wsel_json_string((const char *) t->in, &jt, (char *) text,
                           t->in_len + 1);
    if (got < 0) {
        rc = WSEL_TOKENIZER_EUTF8;   /* a lone surrogate, an escaped NUL */

    } else {
        cap = 0;
        rc = ngx_http_wsel_tok_encode(tk, text, (size_t) got,
                                      WSEL_TOKENIZER_ADD_SPECIAL, &t->ids,
                                      &cap, &t->n);
    }

    free(text);
    return rc;
}


/* large_pool's threads yield to everything else: SCHED_IDLE, run only
 * when no other thread wants the core, preempted at once when one wakes
 * (Linux, per thread; an unprivileged thread may lower itself, never
 * raise itself back, so only a pool of its own is lowered). */
static void
ngx_http_wsel_tok_lower(void)
{
    static __thread int  lowered;
    struct sched_param   sp;

    if (lowered) {
        return;
    }

    lowered = 1;
    ngx_memzero(&sp, sizeof(sp));
    (void) sched_setscheduler(0, SCHED_IDLE, &sp);
}


static void
ngx_http_wsel_tok_thread(void *data, ngx_log_t *log)
{
    ngx_http_wsel_tok_task_t  *t = data;

    if (t->low) {
        ngx_http_wsel_tok_lower();
    }

    t->rc = t->chat ? ngx_http_wsel_tok_chat(t->tk, t)
                    : ngx_http_wsel_tok_text(t->tk, t);
    (void) log;
}


/* ------------------------------------------------------------------------ */
/* in the event loop                                                        */
/* ------------------------------------------------------------------------ */

/* The task is done: unblock the request and go on where it waits (the
 * route, or nginx's finalizer if it was terminated meanwhile). */
static void
ngx_http_wsel_tok_done(ngx_event_t *ev)
{
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_http_wsel_tok_task_t  *t;

    t = ev->data;
    r = t->request;
    c = r->connection;

    ngx_http_set_log_request(c->log, r);

    r->main->blocked--;
    r->aio = 0;

    r->write_event_handler(r);
    ngx_http_run_posted_requests(c);
}


static void
ngx_http_wsel_tok_cleanup(void *data)
{
    ngx_http_wsel_tok_task_t  *t = data;

    free(t->ids);
    t->ids = NULL;
}


ngx_int_t
ngx_http_wsel_tokenize_post(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx,
    ngx_http_wsel_prompt_t *prompt, u_char *body, size_t len)
{
    ngx_thread_task_t         *task;
    ngx_pool_cleanup_t        *cln;
    ngx_http_wsel_tok_task_t  *t;
    ngx_http_wsel_upstream_t  *up = ctx->up;

    if (up->tok == NULL || up->tok->tok == NULL) {
        return NGX_DECLINED;
    }

    task = ngx_thread_task_alloc(r->pool, sizeof(ngx_http_wsel_tok_task_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (task == NULL || cln == NULL) {
        goto fallback;
    }

    t = task->ctx;
    t->tk = up->tok;
    t->request = r;
    t->chat = prompt->chat;
    t->text = prompt->text;
    t->text_len = prompt->text_len;

    if (t->chat) {
        t->in = body;
        t->in_len = len;

    } else {
        /* the string with its quotes */
        t->in = prompt->text - 1;
        t->in_len = prompt->text_len + 2;
    }

    cln->handler = ngx_http_wsel_tok_cleanup;
    cln->data = t;

    task->handler = ngx_http_wsel_tok_thread;
    task->event.data = t;
    task->event.handler = ngx_http_wsel_tok_done;

    t->low = up->tok->large_pool && len >= up->tok->large;

    if (ngx_thread_task_post(t->low ? up->tok->large_pool : up->tok->pool,
                             task)
        != NGX_OK)
    {
        goto fallback;
    }

    ctx->tok_task = t;
    r->main->blocked++;
    r->aio = 1;
    r->write_event_handler = ngx_http_wsel_route_tokens;

    return NGX_AGAIN;

fallback:

    up->tok_fallbacks++;
    return NGX_DECLINED;
}


ngx_int_t
ngx_http_wsel_tokenize_result(ngx_http_wsel_ctx_t *ctx, wsel_route_request *q)
{
    ngx_http_wsel_tok_task_t  *t = ctx->tok_task;
    ngx_http_wsel_upstream_t  *up = ctx->up;

    if (t->cache == 1) {
        up->tok_cache_hits++;
        up->tok_cache_tokens += t->reused;

    } else if (t->cache == 2) {
        up->tok_cache_misses++;
    }

    if (t->rc != 0 || t->n > 0xffffffffu) {
        up->tok_fallbacks++;
        q->text = (const char *) t->text;
        q->text_len = t->text_len;
        return NGX_DECLINED;
    }

    if (t->chat) {
        up->tok_chat++;

    } else {
        up->tok_text++;
    }

    up->tok_tokens += t->n;
    q->tokens = t->ids;
    q->num_tokens = (uint32_t) t->n;
    q->text = NULL;
    q->text_len = 0;

    return NGX_OK;
}


/* ------------------------------------------------------------------------ */
/* configuration                                                            */
/* ------------------------------------------------------------------------ */

static void
ngx_http_wsel_tok_close(void *data)
{
    ngx_http_wsel_tok_t  *tk = data;

    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_WSEL_TOK_ENTRIES; i++) {
        free(tk->entry[i].text);
        free(tk->entry[i].ids);
    }

    wsel_tokenizer_close(tk->tok);
    (void) pthread_mutex_destroy(&tk->mu);
}


/* Element i of the "added_tokens" array at p into *a: NGX_OK when it is a
 * special token a prefix may be cut in front of (a content, no lstrip or
 * single_word), NGX_DECLINED otherwise. */
static ngx_int_t
ngx_http_wsel_tok_added_one(ngx_conf_t *cf, const u_char *p,
    wsel_json_doc *doc, ngx_uint_t i, ngx_str_t *a)
{
    long              got;
    ngx_uint_t        j;
    wsel_json_token  *t, *o;

    o = &doc->tokens[i];
    a->data = NULL;
    a->len = 0;

    for (j = i + 1; j < o->next; j = doc->tokens[j + 1].next) {
        t = &doc->tokens[j + 1];

        if ((wsel_json_string_is((const char *) p, &doc->tokens[j], "lstrip")
             || wsel_json_string_is((const char *) p, &doc->tokens[j],
                                    "single_word"))
            && t->type == WSEL_JSON_TRUE)
        {
            return NGX_DECLINED;
        }

        if (wsel_json_string_is((const char *) p, &doc->tokens[j], "content")
            && t->type == WSEL_JSON_STRING && t->end > t->start)
        {
            a->data = ngx_pnalloc(cf->pool, t->end - t->start + 1);
            got = a->data ? wsel_json_string((const char *) p, t,
                                             (char *) a->data,
                                             t->end - t->start + 1)
                          : -1;
            a->len = got > 0 ? (size_t) got : 0;
        }
    }

    return (a->data && a->len) ? NGX_OK : NGX_DECLINED;
}


/* The special tokens of DIR/tokenizer.json ("added_tokens", those that
 * strip no whitespace on their left) a prefix may be cut in front of.
 * The file was read by the tokenizer a moment ago: an error here only
 * leaves the cache off. */
static ngx_int_t
ngx_http_wsel_tok_added(ngx_conf_t *cf, ngx_http_wsel_tok_t *tk,
    ngx_str_t *dir)
{
    u_char            *data, *p, *e, *end;
    char               err[NGX_HTTP_WSEL_ERR];
    ngx_fd_t           fd;
    ngx_str_t         *a;
    ngx_int_t          rc;
    ngx_uint_t         i;
    ngx_file_info_t    fi;
    wsel_json_doc      doc;
    wsel_json_limits   lim;

    u_char             path[PATH_MAX];

    rc = NGX_ERROR;
    data = NULL;
    ngx_memzero(&doc, sizeof(doc));
    ngx_snprintf(path, sizeof(path) - 1, "%V/tokenizer.json%Z", dir);

    fd = ngx_open_file(path, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        return NGX_ERROR;
    }

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR
        || (data = malloc(ngx_file_size(&fi) + 1)) == NULL
        || read(fd, data, ngx_file_size(&fi)) != ngx_file_size(&fi))
    {
        goto done;
    }

    e = data + ngx_file_size(&fi);
    *e = '\0';
    p = (u_char *) ngx_strstr(data, "\"added_tokens\"");
    if (p == NULL) {
        goto done;
    }

    p = ngx_http_wsel_js_ws(p + 14, e);
    if (p == e || *p != ':') {
        goto done;
    }
    p = ngx_http_wsel_js_ws(p + 1, e);
    end = ngx_http_wsel_js_value(p, e, 1);
    if (end == NULL || *p != '[') {
        goto done;
    }

    lim.max_bytes = (size_t) (end - p);
    lim.max_depth = 8;
    lim.max_tokens = 1 << 20;
    if (wsel_json_parse(&doc, (const char *) p, end - p, &lim, err,
                        sizeof(err)) != 0)
    {
        goto done;
    }

    tk->added = ngx_pcalloc(cf->pool, doc.tokens[0].size * sizeof(ngx_str_t));
    if (tk->added == NULL) {
        goto done;
    }

    /* each element: {"id":.., "content":"..", "lstrip":false, ...} */
    for (i = 1; i < doc.count; i = doc.tokens[i].next) {
        a = &tk->added[tk->nadded];
        if (ngx_http_wsel_tok_added_one(cf, p, &doc, i, a) == NGX_OK) {
            tk->first[a->data[0]] = 1;
            tk->nadded++;
        }
    }

    rc = NGX_OK;

done:

    wsel_json_doc_free(&doc);
    free(data);
    (void) ngx_close_file(fd);
    return rc;
}


/* pool=NAME and cache=SIZE after the folder. */
static char *
ngx_http_wsel_tok_options(ngx_conf_t *cf, ngx_http_wsel_tok_t *tk,
    ngx_str_t **pool, ngx_str_t **large_pool)
{
    ssize_t     size;
    ngx_str_t  *value, v;
    ngx_uint_t  i;

    value = cf->args->elts;
    *pool = NULL;
    *large_pool = NULL;
    tk->cache_max = NGX_HTTP_WSEL_TOK_CACHE;
    tk->large = NGX_HTTP_WSEL_TOK_LARGE;

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "pool=", 5) == 0
            && value[i].len > 5)
        {
            value[i].data += 5;
            value[i].len -= 5;
            *pool = &value[i];

        } else if (ngx_strncmp(value[i].data, "large_pool=", 11) == 0
                   && value[i].len > 11)
        {
            value[i].data += 11;
            value[i].len -= 11;
            *large_pool = &value[i];

        } else if (ngx_strncmp(value[i].data, "large=", 6) == 0) {
            v.data = value[i].data + 6;
            v.len = value[i].len - 6;
            size = ngx_parse_size(&v);
            if (size == NGX_ERROR || size == 0) {
                return "has a bad large= size (request bytes, e.g. large=64k)";
            }
            tk->large = (size_t) size;

        } else if (ngx_strncmp(value[i].data, "cache=", 6) == 0) {
            v.data = value[i].data + 6;
            v.len = value[i].len - 6;
            size = ngx_parse_size(&v);
            if (size == NGX_ERROR) {
                return "has a bad cache= size (e.g. cache=16m, or 0 for none)";
            }
            tk->cache_max = (size_t) size;

        } else {
            return "takes the model's folder, then pool=NAME, "
                   "large_pool=NAME, large=SIZE and cache=SIZE";
        }
    }

    return NGX_CONF_OK;
}


char *
ngx_http_wsel_tokenizer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    char                 *rv, err[NGX_HTTP_WSEL_ERR];
    int32_t               rc;
    ngx_str_t            *value, *pool, *large_pool, dir;
    ngx_pool_cleanup_t   *cln;
    ngx_http_wsel_tok_t  *tk;

    if (up->tok) {
        return "is duplicate";
    }

    value = cf->args->elts;
    dir = value[1];

    if (ngx_conf_full_name(cf->cycle, &dir, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    tk = ngx_pcalloc(cf->pool, sizeof(ngx_http_wsel_tok_t));
    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (tk == NULL || cln == NULL) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_http_wsel_tok_options(cf, tk, &pool, &large_pool);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    tk->pool = ngx_thread_pool_add(cf, pool);
    if (tk->pool == NULL) {
        return NGX_CONF_ERROR;
    }

    if (large_pool) {
        tk->large_pool = ngx_thread_pool_add(cf, large_pool);
        if (tk->large_pool == NULL) {
            return NGX_CONF_ERROR;
        }
        if (tk->large_pool == tk->pool) {
            return "needs a large_pool= other than its pool= (its threads "
                   "are lowered)";
        }
    }

    /* nginx's tokens are NUL-terminated; so is ngx_conf_full_name's */
    err[0] = '\0';
    rc = wsel_tokenizer_open((const char *) dir.data, &tk->tok, err,
                             sizeof(err));
    if (rc != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": wsel_tokenizer \"%V\": "
                           "%s: %s", &up->name, &dir,
                           wsel_tokenizer_strerror(rc), err);
        return NGX_CONF_ERROR;
    }

    if (pthread_mutex_init(&tk->mu, NULL) != 0) {
        wsel_tokenizer_close(tk->tok);
        return NGX_CONF_ERROR;
    }

    cln->handler = ngx_http_wsel_tok_close;
    cln->data = tk;

    if (tk->cache_max
        && ngx_http_wsel_tok_added(cf, tk, &dir) != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "wsel: upstream \"%V\": wsel_tokenizer \"%V\": "
                           "its special tokens could not be read: chat "
                           "prefixes are not cached", &up->name, &dir);
        tk->cache_max = 0;
    }

    up->tok = tk;

    (void) cmd;
    return NGX_CONF_OK;
}


#else /* no thread pools, or no libwsel-tokenizer */


struct ngx_http_wsel_tok_s {
    void                           *tok;
};


struct ngx_http_wsel_tok_task_s {
    int32_t                         rc;
};


char *
ngx_http_wsel_tokenizer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void) cf;
    (void) cmd;
    (void) conf;

#if !(NGX_THREADS)
    return "needs nginx built with thread pools (--with-threads)";
#else
    return "is not available: this module was built without "
           "libwsel-tokenizer (WSEL_TOKENIZER=OFF, or no cargo); text "
           "prompts are hashed in approximate mode only";
#endif
}


ngx_int_t
ngx_http_wsel_tokenize_post(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx,
    ngx_http_wsel_prompt_t *prompt, u_char *body, size_t len)
{
    (void) r;
    (void) ctx;
    (void) prompt;
    (void) body;
    (void) len;

    return NGX_DECLINED;
}


ngx_int_t
ngx_http_wsel_tokenize_result(ngx_http_wsel_ctx_t *ctx, wsel_route_request *q)
{
    (void) ctx;
    (void) q;

    return NGX_DECLINED;
}


#endif
