// SPDX-License-Identifier: Apache-2.0
/*
 * http.h -- the HTTP API (libmicrohttpd): POST /v1/completions and
 * /v1/chat/completions (stream or not; header X-data-parallel-rank picks
 * the rank), GET /v1/models, /health, /metrics (Prometheus text) and
 * /wsel/kv_blocks?rank=R (the hashes cached on a rank, for tests), and
 * what routers probe besides (compat.h).
 * A streamed request's connection is suspended while it waits for the
 * model and resumed by the model thread (eng_http_resume).
 */
#ifndef WSEL_ENGINE_HTTP_H
#define WSEL_ENGINE_HTTP_H

#include "engine.h"

typedef struct eng_http eng_http;

/* Listen on opt.host:opt.port (0 = any free port); *port gets the port.
 * Returns 0 or -1 with a message. */
int eng_http_start(eng_http **out, eng *e, uint32_t *port, char *err, size_t err_size);
/* Resume every waiting connection, then stop. */
void eng_http_stop(eng_http *h);

/* metrics.c: the Prometheus page, malloc'd; NULL when out of memory. */
char *eng_metrics_text(eng *e, size_t *len);

#endif
