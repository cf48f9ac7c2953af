// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_trace_line.c -- libFuzzer harness for the Mooncake trace line
 * parser. Any input must either parse into a line that keeps the format's
 * invariants or be refused with a message; never crash, leak or read out
 * of bounds (built with -fsanitize=fuzzer,address).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the trace block size, the rest is the line. */
    uint32_t block = size > 0 ? 1u + data[0] % 64u : 512u;
    const char *line = size > 0 ? (const char *)data + 1 : "";
    size_t len = size > 0 ? size - 1 : 0;
    sim_trace_parser p;
    sim_trace_parser_init(&p, block);
    sim_trace_line out;
    char err[256];
    err[0] = '\0';
    int32_t rc = sim_trace_parse_line(&p, line, len, &out, err, sizeof(err));
    if (rc == 0) {
        uint64_t expected = (out.input_length + block - 1) / block;
        if (out.num_hash_ids != expected || out.timestamp_ms < 0 ||
            (out.num_hash_ids > 0 && out.hash_ids == NULL))
            abort();
    } else if (err[0] == '\0') {
        abort(); /* every refusal says why */
    }
    sim_trace_parser_free(&p);
    return 0;
}
