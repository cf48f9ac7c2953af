/* SPDX-License-Identifier: Apache-2.0 */

/*
 * wsel_token_ids.h -- a JSON array of token ids ("[1,2,3]", each an integer
 * in [0, 2^32)) read into uint32_t: the one part of the nginx module whose
 * cost grows with the prompt (8,300 ids in a mean arxiv prompt, on every
 * request's path). Plain C, no nginx type, so that its unit test drives
 * every code path on the same bytes.
 *
 * Three readers give the same answers: a byte loop, 64-byte windows with
 * SSE2 masks and a SWAR conversion per id, and 64-byte windows converting
 * eight ids at once with AVX-512 (VBMI2: compress, VBMI: byte permute),
 * chosen at run time. A window reader handles only "d,d,d" with ids of at
 * most 8 digits; anything else (spaces, longer ids, the closing bracket) is
 * read by the byte loop from where the window stopped.
 *
 * Threads: no state of its own; a call uses only the buffer it is given.
 */

#ifndef WSEL_TOKEN_IDS_H
#define WSEL_TOKEN_IDS_H

#include <stddef.h>
#include <stdint.h>

/* The readers (wsel_token_ids_parse's `reader`). */
#define WSEL_TOKEN_IDS_BYTES  0 /* the byte loop alone */
#define WSEL_TOKEN_IDS_SSE2   1 /* SSE2 windows (x86-64 baseline) */
#define WSEL_TOKEN_IDS_AVX512 2 /* AVX-512 F/BW/VBMI/VBMI2 windows */

/* Where the ids go: grown with realloc as needed and kept by the caller
 * between calls (nothing is allocated once it is large enough).
 * OWNERSHIP: the caller's; free(ids) when done. */
typedef struct wsel_token_buf {
    uint32_t *ids;
    size_t n;   /* ids read by the last call */
    size_t cap; /* ids room */
} wsel_token_buf;

/* The best reader this CPU (and OS) runs. */
int wsel_token_ids_best(void);

/*
 * Read the array at p ('['; the bytes up to e are readable) into buf with
 * `reader` (a reader the CPU lacks is stepped down to one it has). Returns
 * the byte after the closing ']', or NULL when the value is not a non-empty
 * array of such integers (buf->n is then unspecified); *nomem is set when
 * the buffer could not grow.
 */
const unsigned char *wsel_token_ids_parse(const unsigned char *p, const unsigned char *e,
                                          wsel_token_buf *buf, int reader, int *nomem);

#endif /* WSEL_TOKEN_IDS_H */
