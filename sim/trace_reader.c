// SPDX-License-Identifier: Apache-2.0
/*
 * trace_reader.c -- stream a trace file line by line (only one line in
 * memory, at most SIM_TRACE_MAX_LINE bytes), with FILE:LINE errors and
 * optional skipping of bad lines.
 */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wsel.h"

int32_t sim_trace_open(sim_trace_reader *r, const char *path, uint32_t trace_block_size,
                       int skip_bad_lines, char *err, size_t err_size)
{
    memset(r, 0, sizeof(*r));
    r->file = fopen(path, "r");
    if (!r->file) {
        int e = errno;
        snprintf(err, err_size, "%s: %s", path, strerror(e));
        return e == ENOENT ? WSEL_ENOENT : WSEL_EIO;
    }
    r->path = path;
    r->skip_bad_lines = skip_bad_lines;
    sim_trace_parser_init(&r->parser, trace_block_size);
    return 0;
}

void sim_trace_close(sim_trace_reader *r)
{
    if (r->file)
        fclose(r->file);
    r->file = NULL;
    free(r->buf);
    r->buf = NULL;
    sim_trace_parser_free(&r->parser);
}

/* Read one line (without its '\n') into r->buf: its length, -1 at the
 * end of the file, -2 on a read error (errno set), -3 when it is longer
 * than SIM_TRACE_MAX_LINE (the rest of the file is not read). NUL bytes
 * are kept, for the JSON reader to refuse. */
static ssize_t read_line(sim_trace_reader *r)
{
    size_t n = 0;
    int c = EOF;
    while ((c = getc_unlocked(r->file)) != EOF && c != '\n') {
        if (n == SIM_TRACE_MAX_LINE)
            return -3;
        if (n + 1 >= r->buf_size) {
            size_t size = r->buf_size ? 2 * r->buf_size : 4096;
            if (size > (size_t)SIM_TRACE_MAX_LINE + 1)
                size = (size_t)SIM_TRACE_MAX_LINE + 1;
            char *grown = realloc(r->buf, size);
            if (grown == NULL) {
                errno = ENOMEM;
                return -2;
            }
            r->buf = grown;
            r->buf_size = size;
        }
        r->buf[n++] = (char)c;
    }
    if (c == EOF && ferror(r->file))
        return -2;
    if (c == EOF && n == 0)
        return -1;
    return (ssize_t)n;
}

static int32_t check_order(sim_trace_reader *r, const sim_trace_line *line, char *msg,
                           size_t msg_size)
{
    if (r->requests > 0 && line->timestamp_ms < r->last_timestamp_ms) {
        snprintf(msg, msg_size,
                 "\"timestamp\" %.17g is before the previous request's %.17g "
                 "(the trace must be sorted by time)",
                 line->timestamp_ms, r->last_timestamp_ms);
        return WSEL_EINVAL;
    }
    return 0;
}

int32_t sim_trace_next(sim_trace_reader *r, sim_trace_line *out, char *err,
                       size_t err_size)
{
    char msg[256];
    for (;;) {
        errno = 0;
        ssize_t n = read_line(r);
        if (n == -3) {
            snprintf(err, err_size,
                     "%s:%llu: line longer than %u bytes (limit SIM_TRACE_MAX_LINE); "
                     "is this a JSONL trace?",
                     r->path, (unsigned long long)r->line_no + 1, SIM_TRACE_MAX_LINE);
            return WSEL_EINVAL;
        }
        if (n < 0) {
            if (n == -2) {
                snprintf(err, err_size, "%s:%llu: %s", r->path,
                         (unsigned long long)r->line_no + 1, strerror(errno));
                return WSEL_EIO;
            }
            if (r->requests == 0) {
                snprintf(err, err_size, "%s: empty trace (no request in %llu lines%s)",
                         r->path, (unsigned long long)r->line_no,
                         r->bad_lines ? ", all bad" : "");
                return WSEL_EINVAL;
            }
            return 0;
        }
        r->line_no++;
        size_t len = (size_t)n;
        while (len > 0 && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r'))
            len--;
        sim_trace_line line;
        int32_t rc =
            sim_trace_parse_line(&r->parser, r->buf, len, &line, msg, sizeof(msg));
        if (rc == 0)
            rc = check_order(r, &line, msg, sizeof(msg));
        if (rc == WSEL_ENOMEM || (rc != 0 && !r->skip_bad_lines)) {
            snprintf(err, err_size, "%s:%llu: %s", r->path,
                     (unsigned long long)r->line_no, msg);
            return rc;
        }
        if (rc != 0) {
            r->bad_lines++;
            continue;
        }
        r->requests++;
        r->last_timestamp_ms = line.timestamp_ms;
        *out = line;
        return 1;
    }
}
