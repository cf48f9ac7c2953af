// SPDX-License-Identifier: Apache-2.0
/*
 * compat.h -- the endpoints routers probe before they accept a worker,
 * answered as vLLM and SGLang answer them (docs/peers.md): GET /version,
 * /get_model_info, /get_server_info, /health_generate and POST /tokenize.
 * Called from the HTTP threads; reads only the options and rank count.
 */
#ifndef WSEL_ENGINE_COMPAT_H
#define WSEL_ENGINE_COMPAT_H

#include "engine.h"

typedef struct eng_compat_reply {
    unsigned status;
    char *body; /* malloc'd, the caller frees it */
    size_t len;
} eng_compat_reply;

/* 1 with *out filled when URL is one of these paths (a wrong method
 * answers 405), 0 when it is not; -1 when out of memory. BODY is the
 * request body (NULL when none). */
int eng_compat_answer(eng *e, const char *url, const char *method, const char *body,
                      size_t len, eng_compat_reply *out);

#endif
