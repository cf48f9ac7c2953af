// SPDX-License-Identifier: Apache-2.0
/*
 * wsel_json.h -- the one strict JSON reader of libwsel-host and the
 * simulator (library wsel_json; not installed, not part of the host API).
 *
 * wsel_json_parse reads exactly one JSON text (RFC 8259) into a flat array
 * of tokens in document order, in one pass whose cost is linear in the
 * input: no trailing commas, exactly one ':' per member, numbers by the
 * JSON grammar only (no hex, no leading zeros, no '+', no NaN), literals
 * spelled out, strings with valid escapes, well-formed UTF-8 and no
 * control characters, and nothing but whitespace after the value (a NUL
 * byte included). Every input limit (bytes, nesting depth, tokens) is the
 * caller's, and a refusal names the limit and the offset.
 *
 * libwsel-host (config.c), wsel_sim (trace.c) and the nginx module's admin
 * location use it: the host compiles it in, hidden (none of its symbols is
 * exported); wsel_sim links the static archive wsel_json; the nginx module
 * compiles it in and exports only nginx's three symbols (its version
 * script). Not installed and not part of the host
 * API (that is wsel_host.h alone); it sits beside wsel_host.h because sim
 * may include host headers from here only.
 */
#ifndef WSEL_JSON_H
#define WSEL_JSON_H

#include <stddef.h>
#include <stdint.h>

#define WSEL_JSON_OBJECT 1u
#define WSEL_JSON_ARRAY  2u
#define WSEL_JSON_STRING 3u
#define WSEL_JSON_NUMBER 4u
#define WSEL_JSON_TRUE   5u
#define WSEL_JSON_FALSE  6u
#define WSEL_JSON_NULL   7u

typedef struct wsel_json_token {
    uint32_t type;  /* WSEL_JSON_* */
    uint32_t start; /* first byte; for a string, the byte after its '"' */
    uint32_t end;   /* one past the last byte; for a string, its closing '"' */
    uint32_t size;  /* members of an object, elements of an array, else 0 */
    int32_t parent; /* index of the enclosing object or array, -1 at the top */
    uint32_t next;  /* index of the first token after this one's subtree */
} wsel_json_token;

typedef struct wsel_json_limits {
    size_t max_bytes;    /* longest text accepted */
    uint32_t max_depth;  /* deepest nesting of objects and arrays (<= 1024) */
    uint32_t max_tokens; /* most values (keys included) */
} wsel_json_limits;

/* Reusable token storage: grows as texts demand, up to max_tokens. */
typedef struct wsel_json_doc {
    wsel_json_token *tokens;
    uint32_t count;
    uint32_t capacity;
} wsel_json_doc;

void wsel_json_doc_free(wsel_json_doc *doc);

/*
 * Parse `len` bytes of `text` into doc (tokens[0] is the top value).
 * Returns 0; WSEL_EINVAL (not JSON) or WSEL_ERANGE (over a limit, named)
 * with "what is wrong at byte N" in err, for the caller to prefix; or
 * WSEL_ENOMEM.
 */
int32_t wsel_json_parse(wsel_json_doc *doc, const char *text, size_t len,
                        const wsel_json_limits *limits, char *err, size_t err_size);

/*
 * Decode string token t (escapes, \uXXXX and surrogate pairs to UTF-8)
 * into out (NUL-terminated). Returns the decoded length, or -1 when it
 * needs out_size bytes or more, or when it holds a lone surrogate or an
 * escaped NUL (never a valid name or value here).
 */
long wsel_json_string(const char *text, const wsel_json_token *t, char *out,
                      size_t out_size);

/* Does string token t decode to exactly `s`? */
int wsel_json_string_is(const char *text, const wsel_json_token *t, const char *s);

#endif
