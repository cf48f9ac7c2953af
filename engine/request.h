// SPDX-License-Identifier: Apache-2.0
/*
 * request.h -- an OpenAI completions or chat body to an eng_req, with the
 * checks vLLM makes and the status it answers (docs/real-time.md):
 * malformed JSON, a wrong type, an empty prompt, max_tokens < 1, a token
 * outside the vocabulary, prompt + max_tokens beyond --max-model-len: 400;
 * another model's name: 404. Unknown fields are ignored, as vLLM does
 * (it logs them); their names are reported through `unknown`.
 */
#ifndef WSEL_ENGINE_REQUEST_H
#define WSEL_ENGINE_REQUEST_H

#include "engine.h"

typedef struct eng_parse_result {
    int status; /* HTTP status on failure */
    char message[256];
    char unknown[64]; /* the first unknown field's name, "" if none */
} eng_parse_result;

/* Returns 0 with *out a new request (one reference, no id yet) or -1 with
 * res->status and res->message. */
int eng_request_parse(const eng_options *o, uint32_t api, const char *body, size_t len,
                      eng_req **out, eng_parse_result *res);

#endif
