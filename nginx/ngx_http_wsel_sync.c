/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_sync.c -- wsel_sync: the upstream's load shared with the
 * other nginx instances in front of the same engines, over NATS, through
 * libwsel-router's replica sync (docs/replicas.md). Every worker process
 * is a replica of its own, with the id
 *   instance << 32 | generation << 16 | worker slot
 * where instance is replica= or drawn at random when the configuration is
 * read, and generation is drawn at random at each configuration load
 * (start or reload): a reload's workers never share an id with the old
 * ones still finishing their requests, and a worker nginx respawns takes
 * its slot's id again (a new incarnation, which replaces the dead one's
 * load at once). With wsel_sync the workers of one instance share their
 * load over NATS too, not through the zone (nginx/README.md, "Several
 * instances", says why).
 */

#include "ngx_http_wsel_module.h"

#include <sys/random.h>


#define NGX_HTTP_WSEL_SYNC_REPLICAS  256


/* 32 random bits, never 0. */
static uint32_t
ngx_http_wsel_sync_random(void)
{
    uint32_t  v;

    if (getrandom(&v, sizeof(v), 0) != (ssize_t) sizeof(v)) {
        v = (uint32_t) ngx_random() ^ (uint32_t) ngx_pid
            ^ (uint32_t) ngx_current_msec << 12;
    }

    return v ? v : 1;
}


/* "nats://HOST:PORT": NULL, or what is wrong with it. */
static char *
ngx_http_wsel_sync_url(ngx_str_t *url)
{
    u_char     *host, *colon, *e;
    ngx_int_t   port;

    if (url->len < sizeof("nats://") - 1
        || ngx_strncmp(url->data, "nats://", sizeof("nats://") - 1) != 0)
    {
        return "needs a nats://HOST:PORT URL first";
    }

    if (url->len >= 512) {
        return "has a URL of 512 bytes or more";
    }

    host = url->data + sizeof("nats://") - 1;
    e = url->data + url->len;

    for (colon = e; colon > host && colon[-1] != ':'; colon--) { /* void */ }

    if (colon <= host + 1 || ngx_strlchr(host, e, '/') != NULL
        || ngx_strlchr(host, e, ',') != NULL)
    {
        return "needs a URL of the form nats://HOST:PORT";
    }

    port = ngx_atoi(colon, e - colon);
    if (port < 1 || port > 65535) {
        return "has a URL whose port is not 1..65535";
    }

    return NULL;
}


/* A subject a replica may publish on: 1..127 bytes, dot-separated
 * non-empty tokens, no wildcard and no white space. */
static char *
ngx_http_wsel_sync_subject(ngx_str_t *s)
{
    size_t  i;

    if (s->len == 0 || s->len >= 128 || s->data[0] == '.'
        || s->data[s->len - 1] == '.')
    {
        return "has a bad subject= (1..127 bytes, tokens separated by dots)";
    }

    for (i = 0; i < s->len; i++) {
        if (s->data[i] <= ' ' || s->data[i] == '*' || s->data[i] == '>'
            || (s->data[i] == '.' && s->data[i + 1] == '.'))
        {
            return "has a bad subject= (no empty token, wildcard or space)";
        }
    }

    return NULL;
}


/* NAME=N within lo..hi into *out: NGX_OK, NGX_DECLINED (another option),
 * NGX_ERROR (out of range). */
static ngx_int_t
ngx_http_wsel_sync_num(ngx_str_t *arg, const char *name, ngx_int_t lo,
    ngx_int_t hi, ngx_uint_t *out)
{
    size_t     n;
    ngx_int_t  v;

    n = ngx_strlen(name);

    if (arg->len < n || ngx_strncmp(arg->data, name, n) != 0) {
        return NGX_DECLINED;
    }

    v = ngx_atoi(arg->data + n, arg->len - n);
    if (v < lo || v > hi) {
        return NGX_ERROR;
    }

    *out = (ngx_uint_t) v;

    return NGX_OK;
}


/* One option after the URL; NULL or what is wrong with it. */
static char *
ngx_http_wsel_sync_option(ngx_http_wsel_sync_conf_t *sc, ngx_str_t *arg)
{
    ngx_int_t   rc;
    ngx_uint_t  id;

    if (arg->len > 8 && ngx_strncmp(arg->data, "subject=", 8) == 0) {
        sc->subject.data = arg->data + 8;  /* nginx's tokens end with NUL */
        sc->subject.len = arg->len - 8;
        return ngx_http_wsel_sync_subject(&sc->subject);
    }

    rc = ngx_http_wsel_sync_num(arg, "replica=", 1, 0xffffffff, &id);
    if (rc == NGX_OK) {
        sc->instance = (uint32_t) id;
        return NULL;
    }
    if (rc == NGX_ERROR) {
        return "has a bad replica= (1..4294967295)";
    }

    rc = ngx_http_wsel_sync_num(arg, "period=", 10, 600000, &sc->period_ms);
    if (rc != NGX_DECLINED) {
        return rc == NGX_OK ? NULL : "has a bad period= (10..600000 ms)";
    }

    rc = ngx_http_wsel_sync_num(arg, "lease=", 2, 100, &sc->lease);
    if (rc != NGX_DECLINED) {
        return rc == NGX_OK ? NULL : "has a bad lease= (2..100 periods)";
    }

    rc = ngx_http_wsel_sync_num(arg, "batch=", 1, 1000000, &sc->batch_us);
    if (rc != NGX_DECLINED) {
        return rc == NGX_OK ? NULL : "has a bad batch= (1..1000000 us)";
    }

    rc = ngx_http_wsel_sync_num(arg, "echo=", 0, 1000000, &sc->echo_us);
    if (rc != NGX_DECLINED) {
        return rc == NGX_OK ? NULL : "has a bad echo= (0..1000000 us)";
    }

    return "takes nats://HOST:PORT, then subject=S, replica=ID, period=MS, "
           "lease=N, batch=US and echo=US";
}


char *
ngx_http_wsel_sync_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    char                       *rv;
    ngx_str_t                  *value;
    ngx_uint_t                  i;
    ngx_http_wsel_sync_conf_t  *sc = &up->sync;

    if (sc->url.len) {
        return "is duplicate";
    }

    value = cf->args->elts;

    rv = ngx_http_wsel_sync_url(&value[1]);
    if (rv != NULL) {
        return rv;
    }

    sc->period_ms = 1000;
    sc->lease = 3;
    sc->batch_us = 1000;
    sc->echo_us = NGX_CONF_UNSET_UINT;

    for (i = 2; i < cf->args->nelts; i++) {
        rv = ngx_http_wsel_sync_option(sc, &value[i]);
        if (rv != NULL) {
            return rv;
        }
    }

    if (sc->batch_us >= sc->period_ms * 1000) {
        return "has a batch= not shorter than its period=";
    }

    if (sc->instance == 0) {
        sc->instance = ngx_http_wsel_sync_random();
    }

    sc->generation = ngx_http_wsel_sync_random() & 0xffff;
    sc->generation = sc->generation ? sc->generation : 1;
    sc->url = value[1];
    sc->file = cf->conf_file->file.name;
    sc->line = cf->conf_file->line;

    (void) cmd;
    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_wsel_sync_start(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    char                        err[NGX_HTTP_WSEL_ERR];
    int32_t                     rc;
    wsel_router_sync_options    so;
    ngx_http_wsel_sync_conf_t  *sc = &up->sync;

    if (sc->url.len == 0) {
        return NGX_DECLINED;
    }

    sc->replica_id = (uint64_t) sc->instance << 32
                     | (uint64_t) sc->generation << 16
                     | (uint64_t) (ngx_worker & 0xffff);

    ngx_memzero(&so, sizeof(so));
    so.struct_size = sizeof(so);
    so.url = (const char *) sc->url.data;
    so.subject = sc->subject.len ? (const char *) sc->subject.data : NULL;
    so.replica_id = sc->replica_id;
    so.period_ms = (uint32_t) sc->period_ms;
    so.lease_periods = (uint32_t) sc->lease;
    so.batch_us = (uint32_t) sc->batch_us;
    if (sc->echo_us == 0) {
        so.flags |= WSEL_ROUTER_SYNC_NO_ECHO;
    } else if (sc->echo_us != NGX_CONF_UNSET_UINT) {
        so.echo_us = (uint32_t) sc->echo_us;
    }
    so.max_replicas = NGX_HTTP_WSEL_SYNC_REPLICAS;

    rc = wsel_router_sync_start(up->router, &so, err, sizeof(err));
    if (rc != 0) {
        sc->replica_id = 0;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "wsel: upstream \"%V\": this worker routes on its own "
                      "load only: %s", &up->name, err);
        return NGX_ERROR;
    }

    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "wsel: upstream \"%V\": replica %uL (%08xD.%04xD.%ui) "
                  "shares its load on %V", &up->name, sc->replica_id,
                  sc->instance, sc->generation, ngx_worker & 0xffff,
                  &sc->url);

    return NGX_OK;
}
