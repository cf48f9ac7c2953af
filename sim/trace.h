// SPDX-License-Identifier: Apache-2.0
/*
 * trace.h -- Mooncake-format JSONL traces, read one line at a time.
 *
 * Each line is one strict JSON object (RFC 8259, read by the same reader as
 * plugin configurations: host/json/wsel_json.h) with `timestamp` (ms, >= 0),
 * `input_length` and `output_length` (token counts, integers >= 0) and `hash_ids` (one
 * non-negative integer per trace block of the input: exactly
 * ceil(input_length / trace_block_size) of them). Other keys are ignored;
 * a key given twice is an error. Timestamps must not decrease: a trace out
 * of order is rejected, not sorted, because sorting would need the whole
 * file in memory. Not thread-safe; one reader per thread.
 */
#ifndef WSEL_SIM_TRACE_H
#define WSEL_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sim_trace_line {
    double timestamp_ms;
    uint64_t input_length;
    uint64_t output_length;
    uint32_t num_hash_ids;
    const uint64_t *hash_ids; /* parser-owned, valid until its next parse */
} sim_trace_line;

/* Input limits of one trace line; a refusal names the limit. A line
 * longer than SIM_TRACE_MAX_LINE ends the read even with skip_bad_lines
 * (a file with no newline, like /dev/zero, would never end). */
#define SIM_TRACE_MAX_LINE   (1u << 20) /* bytes, newline excluded */
#define SIM_TRACE_MAX_DEPTH  32u        /* nested objects and arrays */
#define SIM_TRACE_MAX_TOKENS (1u << 18) /* JSON values, keys included */
/* Field ranges: timestamp 0..1e9 ms (11.6 days: divided by the smallest
 * --speedup, 1e-3, it stays inside the int64 nanosecond clock);
 * input_length 1..2^32-1 tokens; output_length 0..2^32-1. */
#define SIM_TRACE_MAX_TIMESTAMP_MS 1e9

/* Reusable parse buffers (tokens, hash ids); grow as lines demand. */
typedef struct sim_trace_parser {
    void *json; /* wsel_json_doc, owned */
    uint64_t *ids;
    uint32_t id_capacity;
    uint32_t trace_block_size;
} sim_trace_parser;

/* A zeroed parser with the given trace block size (> 0). */
void sim_trace_parser_init(sim_trace_parser *p, uint32_t trace_block_size);
void sim_trace_parser_free(sim_trace_parser *p);

/*
 * Parse one line (`len` bytes, no NUL needed, a trailing newline allowed).
 * Returns 0 with *out filled, or WSEL_EINVAL with a message in err saying
 * what is wrong (naming the key), or WSEL_ENOMEM.
 */
int32_t sim_trace_parse_line(sim_trace_parser *p, const char *line, size_t len,
                             sim_trace_line *out, char *err, size_t err_size);

typedef struct sim_trace_reader {
    FILE *file;
    const char *path;
    char *buf;
    size_t buf_size;
    uint64_t line_no;
    uint64_t requests;
    uint64_t bad_lines;
    double last_timestamp_ms;
    int skip_bad_lines;
    sim_trace_parser parser;
} sim_trace_reader;

/* Open `path` (kept by pointer: the caller keeps it alive). Returns 0 or
 * WSEL_ENOENT/WSEL_EIO with "PATH: reason" in err. */
int32_t sim_trace_open(sim_trace_reader *r, const char *path, uint32_t trace_block_size,
                       int skip_bad_lines, char *err, size_t err_size);
void sim_trace_close(sim_trace_reader *r);

/*
 * Next request: 1 with *out filled, 0 at the end, or a negative code with
 * "PATH:LINE: what is wrong" in err. A bad line is an error unless
 * skip_bad_lines, then it is counted in bad_lines and skipped. An empty
 * trace (no request at all) is an error.
 */
int32_t sim_trace_next(sim_trace_reader *r, sim_trace_line *out, char *err,
                       size_t err_size);

#endif
