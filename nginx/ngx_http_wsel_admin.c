/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_admin.c -- the admin location: a POSTed JSON body names a
 * policy path (and its config), which the host switches to.
 */

#include "ngx_http_wsel_module.h"
#include "wsel_json.h"


/*
 * String token v of text decoded (JSON's escapes, \uXXXX to UTF-8) into the
 * pool, NUL-terminated; NULL with the reason in err when an escape is no
 * character (U+0000 or a lone surrogate: the value must stay one C string)
 * or memory ran out. Decoding never lengthens a string, so the raw length
 * is room enough.
 */
static char *
ngx_http_wsel_admin_string(ngx_pool_t *pool, const char *text,
    const wsel_json_token *v, const char *name, char *err, size_t err_size)
{
    char    *s;
    size_t   size;

    size = (size_t) (v->end - v->start) + 1;

    s = ngx_pnalloc(pool, size);
    if (s == NULL) {
        *ngx_snprintf((u_char *) err, err_size - 1, "no memory for %s",
                      name) = '\0';
        return NULL;
    }

    if (wsel_json_string(text, v, s, size) < 0) {
        *ngx_snprintf((u_char *) err, err_size - 1, "%s has an escape that "
                      "is not a character (U+0000 or a lone surrogate)",
                      name) = '\0';
        return NULL;
    }

    return s;
}


/*
 * The admin request's body, {"path": "...", "config": <object, or a string
 * holding one>}, read by wsel's JSON reader (host/json/wsel_json.c, the
 * one libwsel-host reads configs with, compiled into the module): strict
 * RFC 8259, nothing after the object, within the module's body limit, the
 * prompt scanner's depth below the object and NGX_HTTP_WSEL_ADMIN_VALUES
 * values. path and config (NULL when absent) NUL-terminated in the pool,
 * or NGX_ERROR with the reason in err. Other members are ignored, and so
 * is a "path" that is no string; of a member given twice, the last counts.
 */
static ngx_int_t
ngx_http_wsel_admin_read(ngx_pool_t *pool, u_char *body, size_t len,
    char **path, char **config, char *err, size_t err_size)
{
    char                           why[256];
    int32_t                        rc;
    uint32_t                       i;
    ngx_int_t                      ret;
    const char                    *text;
    wsel_json_doc                  doc;
    wsel_json_token               *t, *pv, *cv;
    static const wsel_json_limits  limits = {
        NGX_HTTP_WSEL_MAX_BODY, 1 + NGX_HTTP_WSEL_JSON_DEPTH,
        NGX_HTTP_WSEL_ADMIN_VALUES
    };

    text = (const char *) body;
    ret = NGX_ERROR;
    ngx_memzero(&doc, sizeof(doc));

    rc = wsel_json_parse(&doc, text, len, &limits, why, sizeof(why));
    if (rc != 0) {
        *ngx_snprintf((u_char *) err, err_size - 1, "%s: %s",
                      rc == WSEL_ERANGE ? "the body is over a limit"
                      : rc == WSEL_ENOMEM ? "no memory to read the body"
                      : "the body is not JSON", why) = '\0';
        goto out_free_doc;
    }

    t = doc.tokens;
    if (t[0].type != WSEL_JSON_OBJECT) {
        ngx_cpystrn((u_char *) err, (u_char *) "the body is not a JSON object",
                    err_size);
        goto out_free_doc;
    }

    /* the object's members: a key at i, its value at i + 1 */
    pv = NULL;
    cv = NULL;
    for (i = 1; i < doc.count; i = t[i + 1].next) {
        if (wsel_json_string_is(text, &t[i], "path")) {
            if (t[i + 1].type == WSEL_JSON_STRING) {
                pv = &t[i + 1];
            }

        } else if (wsel_json_string_is(text, &t[i], "config")) {
            cv = &t[i + 1];
        }
    }

    if (pv == NULL) {
        ngx_cpystrn((u_char *) err, (u_char *) "\"path\" (a string) is "
                    "missing", err_size);
        goto out_free_doc;
    }

    *path = ngx_http_wsel_admin_string(pool, text, pv, "\"path\"", err,
                                       err_size);
    if (*path == NULL) {
        goto out_free_doc;
    }

    if ((*path)[0] == '\0') {
        ngx_cpystrn((u_char *) err, (u_char *) "\"path\" is empty", err_size);
        goto out_free_doc;
    }

    if (cv == NULL) {
        *config = NULL;

    } else if (cv->type == WSEL_JSON_STRING) {
        /* never "{}" in its place: the policy would run on its defaults,
         * not on the config sent */
        *config = ngx_http_wsel_admin_string(pool, text, cv,
                                             "\"config\" (a string)", err,
                                             err_size);
        if (*config == NULL) {
            goto out_free_doc;
        }

    } else {
        /* an object (or what the host refuses as a config) as sent */
        *config = ngx_pnalloc(pool, (size_t) (cv->end - cv->start) + 1);
        if (*config == NULL) {
            ngx_cpystrn((u_char *) err, (u_char *) "no memory for \"config\"",
                        err_size);
            goto out_free_doc;
        }
        ngx_memcpy(*config, text + cv->start, cv->end - cv->start);
        (*config)[cv->end - cv->start] = '\0';
    }

    ret = NGX_OK;

out_free_doc:

    wsel_json_doc_free(&doc);
    return ret;
}


/*
 * Switch up's policy to the one the request's body names, publish the
 * switch to the other workers; err is empty on success, else the reason.
 */
static void
ngx_http_wsel_admin_switch(ngx_http_request_t *r,
    ngx_http_wsel_upstream_t *up, char *err, size_t err_size)
{
    u_char      *body;
    char        *path, *config;
    size_t       len;
    int32_t      rc;
    ngx_uint_t   copied;

    path = NULL;
    config = NULL;
    err[0] = '\0';

    body = ngx_http_wsel_body(r, NULL, &len, &copied);
    if (body == NULL) {
        ngx_cpystrn((u_char *) err, (u_char *)
                    (r->headers_in.content_length_n > NGX_HTTP_WSEL_MAX_BODY
                     ? "the body is over the module's 64 MiB limit"
                     : "no body; expected "
                       "{\"path\": \"/x.so\", \"config\": {...}}"),
                    err_size);
        return;
    }

    if (ngx_http_wsel_admin_read(r->pool, body, len, &path, &config, err,
                                 err_size)
        != NGX_OK)
    {
        return;
    }

    path = (char *) ngx_http_wsel_plugin_path(r->pool, path, err, err_size);
    if (path == NULL) {
        return;
    }

    if (config && ngx_strlen(config) >= NGX_HTTP_WSEL_SHARED_CONFIG) {
        ngx_cpystrn((u_char *) err, (u_char *) "\"config\" is over the 1 MiB "
                    "the workers share", err_size);
        return;
    }

    rc = wsel_host_switch(up->host, path, config ? config : "{}", err,
                          err_size);
    if (rc != 0) {
        if (err[0] == '\0') {
            ngx_cpystrn((u_char *) err, (u_char *) wsel_strerror(rc), err_size);
        }
        return;
    }

    if (ngx_http_wsel_shared_publish(up, path, config ? config : "{}", err,
                                     err_size)
        != NGX_OK)
    {
        /* this worker switched; the others keep theirs, said in the log */
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "wsel: upstream \"%V\": %s", &up->name, err);
    }

    err[0] = '\0';
    up->admin_switches++;
    ngx_cpystrn(up->live_path, (u_char *) path, sizeof(up->live_path));
    up->last_error[0] = '\0';
    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "wsel: upstream \"%V\" switched to \"%s\"", &up->name,
                  path);
}


/* The admin answer: the live policy, its path, this worker, the error. */
static void
ngx_http_wsel_admin_answer(ngx_http_request_t *r,
    ngx_http_wsel_upstream_t *up, const char *err)
{
    u_char       *d;
    ngx_buf_t    *b;
    ngx_uint_t    status;
    const char   *pol;

    if (err[0]) {
        up->admin_refused++;
        ngx_cpystrn(up->last_error, (u_char *) err, sizeof(up->last_error));
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "wsel: upstream \"%V\": switch refused, the old policy "
                      "serves: %s", &up->name, err);
    }

    status = err[0] ? NGX_HTTP_CONFLICT : NGX_HTTP_OK;
    pol = wsel_host_policy_name(up->host);

    b = ngx_create_temp_buf(r->pool, 256 + 6 * (ngx_strlen(pol)
                                                + ngx_strlen(up->live_path)
                                                + ngx_strlen(err)));
    if (b == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    d = ngx_slprintf(b->pos, b->end, "{\"ok\":%s,\"policy\":\"",
                     err[0] ? "false" : "true");
    d = ngx_http_wsel_escape(d, b->end, (u_char *) pol, ngx_strlen(pol));
    d = ngx_slprintf(d, b->end, "\",\"path\":\"");
    d = ngx_http_wsel_escape(d, b->end, up->live_path,
                             ngx_strlen(up->live_path));
    d = ngx_slprintf(d, b->end, "\",\"worker_pid\":%P,\"error\":\"", ngx_pid);
    d = ngx_http_wsel_escape(d, b->end, (u_char *) err, ngx_strlen(err));
    d = ngx_slprintf(d, b->end, "\"}\n");
    b->last = d;

    ngx_http_finalize_request(r, ngx_http_wsel_send(r, status,
                                                    "application/json", b));
}


static void
ngx_http_wsel_admin_body(ngx_http_request_t *r)
{
    char                        err[NGX_HTTP_WSEL_ERR];
    ngx_http_wsel_loc_conf_t   *wlcf;
    ngx_http_wsel_upstream_t   *up;

    wlcf = ngx_http_get_module_loc_conf(r, ngx_http_upstream_wsel_module);
    up = ngx_http_wsel_find(
        ngx_http_get_module_main_conf(r, ngx_http_upstream_wsel_module),
        &wlcf->admin);

    if (up == NULL || up->host == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_NOT_FOUND);
        return;
    }

    ngx_http_wsel_admin_switch(r, up, err, sizeof(err));
    ngx_http_wsel_admin_answer(r, up, err);
}


ngx_int_t
ngx_http_wsel_admin_handler(ngx_http_request_t *r)
{
    ngx_int_t  rc;

    if (!(r->method & NGX_HTTP_POST)) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_read_client_request_body(r, ngx_http_wsel_admin_body);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}
