// SPDX-License-Identifier: Apache-2.0
/*
 * format.h -- the JSON the engine answers, shaped as vLLM's OpenAI server
 * shapes it: one server-sent event per generated token, the usage in the
 * last event, "data: [DONE]"; whole answers for stream = false; errors.
 * Each function writes into out (NUL-terminated, truncated at size) and
 * returns the length it needed, as snprintf does.
 */
#ifndef WSEL_ENGINE_FORMAT_H
#define WSEL_ENGINE_FORMAT_H

#include <stddef.h>

#include "engine.h"

/* Chat streams open with the assistant's role. */
size_t eng_fmt_role_event(char *out, size_t size, const eng_options *o, const eng_req *r);
/* Token k (from 0); the last one (k + 1 == generated, done) carries the
 * finish reason, and the usage when the client did not ask for a
 * separate usage event. */
size_t eng_fmt_token_event(char *out, size_t size, const eng_options *o, const eng_req *r,
                           uint32_t k);
/* The closing events: the usage event (stream_options.include_usage),
 * then "data: [DONE]". */
size_t eng_fmt_tail(char *out, size_t size, const eng_options *o, const eng_req *r);
/* A whole stream = false answer, malloc'd; NULL when out of memory. */
char *eng_fmt_whole(const eng_options *o, const eng_req *r, size_t *len);
/* {"error": {...}} for `status`. */
size_t eng_fmt_error(char *out, size_t size, int status, const char *message);

#endif
