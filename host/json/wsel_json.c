// SPDX-License-Identifier: Apache-2.0
/*
 * wsel_json.c -- the strict, linear JSON reader (wsel_json.h).
 *
 * One pass over the bytes with an explicit stack of open containers (at
 * most max_depth deep), so every byte is looked at a bounded number of
 * times and no subtree is ever rescanned: the cost is linear in the input
 * whatever its nesting or key count. (jsmn, used before, rescanned the
 * token list at every ',' ':' and closing bracket: quadratic in key count
 * and nesting, and lenient about commas, colons and primitives.)
 */
#include "wsel_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsel.h"

#define WSEL_JSON_DEPTH_CEILING 1024u

void wsel_json_doc_free(wsel_json_doc *doc)
{
    free(doc->tokens);
    doc->tokens = NULL;
    doc->count = doc->capacity = 0;
}

typedef struct reader {
    const char *s;
    size_t len;
    size_t pos;
    wsel_json_doc *doc;
    const wsel_json_limits *lim;
    char *err;
    size_t err_size;
} reader;

static int32_t fail(reader *r, const char *what)
{
    if (r->pos >= r->len)
        snprintf(r->err, r->err_size, "%s at the end of the text", what);
    else
        snprintf(r->err, r->err_size, "%s at byte %zu", what, r->pos);
    return WSEL_EINVAL;
}

static void skip_space(reader *r)
{
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        r->pos++;
    }
}

/* Append a token; returns its index or a negative code. */
static int64_t push(reader *r, uint32_t type, int32_t parent)
{
    wsel_json_doc *d = r->doc;
    if (d->count >= r->lim->max_tokens) {
        snprintf(r->err, r->err_size, "more than %u JSON values (limit %u) at byte %zu",
                 r->lim->max_tokens, r->lim->max_tokens, r->pos);
        return WSEL_ERANGE;
    }
    if (d->count == d->capacity) {
        uint32_t cap = d->capacity ? d->capacity * 2u : 16u;
        if (cap > r->lim->max_tokens)
            cap = r->lim->max_tokens;
        wsel_json_token *grown = realloc(d->tokens, (size_t)cap * sizeof(*grown));
        if (grown == NULL) {
            snprintf(r->err, r->err_size, "out of memory for %u JSON values", cap);
            return WSEL_ENOMEM;
        }
        d->tokens = grown;
        d->capacity = cap;
    }
    wsel_json_token *t = &d->tokens[d->count];
    t->type = type;
    t->start = (uint32_t)r->pos;
    t->end = (uint32_t)r->pos;
    t->size = 0;
    t->parent = parent;
    t->next = d->count + 1;
    return d->count++;
}

/* Length of the UTF-8 sequence at s[i] (1..4), or 0 if malformed. */
static size_t utf8_length(const unsigned char *s, size_t i, size_t len)
{
    unsigned c = s[i];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    if (len - i < n)
        return 0;
    unsigned cp = c & (0x7fu >> n);
    for (size_t k = 1; k < n; k++) {
        if ((s[i + k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i + k] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string starting at the '"' under pos. */
static int32_t read_string(reader *r, int32_t parent)
{
    r->pos++;
    int64_t i = push(r, WSEL_JSON_STRING, parent);
    if (i < 0)
        return (int32_t)i;
    const unsigned char *s = (const unsigned char *)r->s;
    while (r->pos < r->len) {
        unsigned char c = s[r->pos];
        if (c == '"') {
            r->doc->tokens[i].end = (uint32_t)r->pos;
            r->pos++;
            return 0;
        }
        if (c < 0x20)
            return fail(r, c == 0 ? "a NUL byte in a string"
                                  : "an unescaped control character in a string");
        if (c == '\\') {
            if (r->pos + 1 >= r->len)
                return fail(r, "an unfinished escape");
            char e = r->s[r->pos + 1];
            if (e == 'u') {
                if (r->len - r->pos < 6 || !is_hex(r->s[r->pos + 2]) ||
                    !is_hex(r->s[r->pos + 3]) || !is_hex(r->s[r->pos + 4]) ||
                    !is_hex(r->s[r->pos + 5]))
                    return fail(r, "a \\u escape without four hex digits");
                r->pos += 6;
            } else if (strchr("\"\\/bfnrt", e) != NULL && e != '\0') {
                r->pos += 2;
            } else {
                return fail(r, "an invalid escape");
            }
            continue;
        }
        size_t n = utf8_length(s, r->pos, r->len);
        if (n == 0)
            return fail(r, "invalid UTF-8 in a string");
        r->pos += n;
    }
    return fail(r, "an unterminated string");
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? then a delimiter. */
static int32_t read_number(reader *r, int32_t parent)
{
    int64_t i = push(r, WSEL_JSON_NUMBER, parent);
    if (i < 0)
        return (int32_t)i;
    const char *s = r->s;
    size_t p = r->pos, n = r->len;
    if (p < n && s[p] == '-')
        p++;
    if (p < n && s[p] == '0') {
        p++;
        if (p < n && is_digit(s[p])) {
            r->pos = p;
            return fail(r, "a number with a leading zero");
        }
    } else if (p < n && is_digit(s[p])) {
        while (p < n && is_digit(s[p]))
            p++;
    } else {
        r->pos = p;
        return fail(r, "a '-' without digits");
    }
    if (p < n && s[p] == '.') {
        p++;
        if (p >= n || !is_digit(s[p])) {
            r->pos = p;
            return fail(r, "a '.' without digits after it");
        }
        while (p < n && is_digit(s[p]))
            p++;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < n && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= n || !is_digit(s[p])) {
            r->pos = p;
            return fail(r, "an exponent without digits");
        }
        while (p < n && is_digit(s[p]))
            p++;
    }
    if (p < n && strchr(" \t\r\n,]}", s[p]) == NULL) {
        r->pos = p;
        return fail(r, s[p] == 'x' || s[p] == 'X'
                           ? "a hex number (JSON numbers are decimal)"
                           : "an unexpected character after a number");
    }
    r->doc->tokens[i].end = (uint32_t)p;
    r->pos = p;
    return 0;
}

static int32_t read_literal(reader *r, int32_t parent, const char *word, uint32_t type)
{
    size_t k = strlen(word);
    if (r->len - r->pos < k || memcmp(r->s + r->pos, word, k) != 0 ||
        (r->len - r->pos > k && strchr(" \t\r\n,]}", r->s[r->pos + k]) == NULL))
        return fail(r, "an unknown word (only true, false and null are JSON)");
    int64_t i = push(r, type, parent);
    if (i < 0)
        return (int32_t)i;
    r->pos += k;
    r->doc->tokens[i].end = (uint32_t)r->pos;
    return 0;
}

/* What comes next: a value, a key (objects), or, after a value, a ','
 * or the container's closing bracket. */
enum want { WANT_VALUE, WANT_KEY, WANT_AFTER };

typedef struct parser {
    reader r;
    uint32_t max_depth;
    uint32_t depth;
    enum want want;
    int first; /* a container just opened: it may close at once */
    int32_t stack[WSEL_JSON_DEPTH_CEILING]; /* open containers */
} parser;

/* After a value in container `top`: a ',' or its closing bracket. */
static int32_t read_after(parser *p, char c, wsel_json_token *top)
{
    reader *r = &p->r;
    int object = top->type == WSEL_JSON_OBJECT;
    p->first = 0;
    if (c == ',' && p->want == WANT_AFTER) {
        r->pos++;
        p->want = object ? WANT_KEY : WANT_VALUE;
        return 0;
    }
    if (c != (object ? '}' : ']'))
        return fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
    r->pos++;
    top->end = (uint32_t)r->pos;
    top->next = r->doc->count;
    p->depth--;
    p->want = WANT_AFTER;
    return 0;
}

/* A key of object `parent` and its ':'. */
static int32_t read_key(parser *p, char c, int32_t parent)
{
    reader *r = &p->r;
    if (c != '"')
        return fail(r, p->first ? "expected a key string or '}'"
                                : "expected a key string (no trailing comma)");
    int32_t rc = read_string(r, parent);
    if (rc < 0)
        return rc;
    r->doc->tokens[parent].size++; /* read_string may have moved it */
    skip_space(r);
    if (r->pos >= r->len || r->s[r->pos] != ':')
        return fail(r, "expected ':' after a key");
    r->pos++;
    p->want = WANT_VALUE;
    p->first = 0;
    return 0;
}

/* '{' or '[': push the container and open it, within max_depth. */
static int32_t open_container(parser *p, char c, int32_t parent)
{
    reader *r = &p->r;
    if (p->depth >= p->max_depth) {
        snprintf(r->err, r->err_size,
                 "JSON nested deeper than %u levels (limit %u) at byte %zu", p->max_depth,
                 p->max_depth, r->pos);
        return WSEL_ERANGE;
    }
    int64_t i = push(r, c == '{' ? WSEL_JSON_OBJECT : WSEL_JSON_ARRAY, parent);
    if (i < 0)
        return (int32_t)i;
    r->pos++;
    p->stack[p->depth++] = (int32_t)i;
    p->want = c == '{' ? WANT_KEY : WANT_VALUE;
    p->first = 1;
    return 0;
}

/* A value starting with c, in container `top` (NULL at the top level). */
static int32_t read_value(parser *p, char c, int32_t parent, wsel_json_token *top)
{
    reader *r = &p->r;
    if (top != NULL && top->type == WSEL_JSON_ARRAY)
        top->size++;
    p->first = 0;
    int32_t rc;
    switch (c) {
    case '{':
    case '[':
        return open_container(p, c, parent);
    case '"':
        rc = read_string(r, parent);
        break;
    case 't':
        rc = read_literal(r, parent, "true", WSEL_JSON_TRUE);
        break;
    case 'f':
        rc = read_literal(r, parent, "false", WSEL_JSON_FALSE);
        break;
    case 'n':
        rc = read_literal(r, parent, "null", WSEL_JSON_NULL);
        break;
    default:
        if (c == '-' || is_digit(c))
            rc = read_number(r, parent);
        else if (c == ',' || c == ':' || c == '}' || c == ']')
            rc = fail(r, c == ':' ? "an extra ':'" : "a missing value");
        else
            rc = fail(r, c == '\0' ? "a NUL byte" : "an unexpected character");
    }
    if (rc < 0)
        return rc;
    p->want = WANT_AFTER;
    return 0;
}

/* Read tokens until the top-level value is complete and only white space
 * follows it. */
static int32_t read_document(parser *p)
{
    reader *r = &p->r;
    for (;;) {
        skip_space(r);
        if (p->depth == 0 && p->want == WANT_AFTER) {
            if (r->pos < r->len)
                return fail(r, r->s[r->pos] == '\0' ? "a NUL byte after the value"
                                                    : "text after the value");
            return 0;
        }
        if (r->pos >= r->len)
            return fail(r, "truncated text");
        char c = r->s[r->pos];
        int32_t parent = p->depth ? p->stack[p->depth - 1] : -1;
        wsel_json_token *top = p->depth ? &r->doc->tokens[parent] : NULL;
        int32_t rc;
        if (p->want == WANT_AFTER || (p->first && (c == '}' || c == ']')))
            rc = read_after(p, c, top);
        else if (p->want == WANT_KEY)
            rc = read_key(p, c, parent);
        else
            rc = read_value(p, c, parent, top);
        if (rc < 0)
            return rc;
    }
}

int32_t wsel_json_parse(wsel_json_doc *doc, const char *text, size_t len,
                        const wsel_json_limits *limits, char *err, size_t err_size)
{
    doc->count = 0;
    if (len > limits->max_bytes) {
        snprintf(err, err_size, "text is %zu bytes, over the limit of %zu", len,
                 limits->max_bytes);
        return WSEL_ERANGE;
    }
    if (len > UINT32_MAX - 1) {
        snprintf(err, err_size, "text is %zu bytes, over the limit of %u", len,
                 UINT32_MAX - 1);
        return WSEL_ERANGE;
    }
    parser p;
    p.r = (reader){text, len, 0, doc, limits, err, err_size};
    p.max_depth = limits->max_depth < WSEL_JSON_DEPTH_CEILING ? limits->max_depth
                                                              : WSEL_JSON_DEPTH_CEILING;
    p.depth = 0;
    p.want = WANT_VALUE;
    p.first = 0;
    int32_t rc = read_document(&p);
    if (rc < 0)
        return rc;
    if (doc->count == 0)
        return fail(&p.r, "no value");
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c - 'A' + 10;
}

static unsigned read_hex4(const char *s)
{
    return (unsigned)(hex_value(s[0]) << 12 | hex_value(s[1]) << 8 |
                      hex_value(s[2]) << 4 | hex_value(s[3]));
}

/* UTF-8 of code point cp into buf; returns its length (1 to 4). */
static size_t put_utf8(unsigned cp, unsigned char *buf)
{
    if (cp < 0x80) {
        buf[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        buf[0] = (unsigned char)(0xc0 | cp >> 6);
        buf[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (unsigned char)(0xe0 | cp >> 12);
        buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        buf[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    buf[0] = (unsigned char)(0xf0 | cp >> 18);
    buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    buf[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The \uXXXX escape at text[*i] (past the "\u"), a surrogate pair taken
 * whole, as UTF-8 into buf; advances *i. Returns its length, or 0 for a
 * lone surrogate or U+0000. */
static size_t read_u_escape(const char *text, uint32_t *i, uint32_t end,
                            unsigned char *buf)
{
    unsigned cp = read_hex4(text + *i);
    *i += 4;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return 0; /* a lone low surrogate */
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (*i + 6 > end || text[*i] != '\\' || text[*i + 1] != 'u')
            return 0;
        unsigned lo = read_hex4(text + *i + 2);
        if (lo < 0xdc00 || lo > 0xdfff)
            return 0;
        *i += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    return cp == 0 ? 0 : put_utf8(cp, buf);
}

/* The escape at text[*i] (past the '\\') into buf; advances *i. Returns
 * its length, or 0 when it cannot be decoded. */
static size_t read_escape(const char *text, uint32_t *i, uint32_t end, unsigned char *buf)
{
    char e = text[(*i)++];
    switch (e) {
    case 'b':
        buf[0] = '\b';
        return 1;
    case 'f':
        buf[0] = '\f';
        return 1;
    case 'n':
        buf[0] = '\n';
        return 1;
    case 'r':
        buf[0] = '\r';
        return 1;
    case 't':
        buf[0] = '\t';
        return 1;
    case 'u':
        return read_u_escape(text, i, end, buf);
    default: /* '"', '\\', '/' */
        buf[0] = (unsigned char)e;
        return 1;
    }
}

long wsel_json_string(const char *text, const wsel_json_token *t, char *out,
                      size_t out_size)
{
    size_t k = 0;
    for (uint32_t i = t->start; i < t->end;) {
        unsigned char buf[4];
        size_t n;
        if (text[i] != '\\') {
            buf[0] = (unsigned char)text[i++];
            n = 1;
        } else {
            i++;
            n = read_escape(text, &i, t->end, buf);
            if (n == 0)
                return -1;
        }
        if (k + n + 1 > out_size)
            return -1;
        memcpy(out + k, buf, n);
        k += n;
    }
    if (out_size == 0)
        return -1;
    out[k] = '\0';
    return (long)k;
}

int wsel_json_string_is(const char *text, const wsel_json_token *t, const char *s)
{
    size_t want = strlen(s);
    /* Fast path: no escape in the raw text. */
    if (memchr(text + t->start, '\\', t->end - t->start) == NULL)
        return t->end - t->start == want && memcmp(text + t->start, s, want) == 0;
    char buf[512];
    long n = wsel_json_string(text, t, buf, sizeof(buf));
    return n >= 0 && (size_t)n == want && memcmp(buf, s, want) == 0;
}
