// SPDX-License-Identifier: Apache-2.0
/*
 * wsel-tokenize -- libwsel-tokenizer from the command line.
 *
 *   wsel-tokenize DIR TEXT      the ids of TEXT (with the special tokens)
 *   wsel-tokenize DIR --chat JSON   the rendering of a chat request, then its ids
 *   wsel-tokenize DIR --batch   records on stdin, answers on stdout (the
 *                               differential test's driver, below)
 *   wsel-tokenize DIR --bench [REPS]   p50/p99 and tokens/s at 2k, 8k, 32k
 *
 * --batch record: kind byte ('t' text + specials, 'r' text without, 'c'
 * chat), uint32 LE length, payload. Answer: int32 status; for 'c' uint32
 * length + the rendering; then uint32 count + count uint32 ids (status 0).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wsel_tokenizer.h"

typedef struct buf {
    char *text;
    size_t text_cap;
    uint32_t *ids;
    size_t ids_cap;
} buf;

static int grow(void **p, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap)
        return 0;
    void *q = realloc(*p, need * unit);
    if (!q)
        return -1;
    *p = q;
    *cap = need;
    return 0;
}

/* Encode text or chat into b->ids (and the rendering into b->text for chat),
 * growing the buffers on ERANGE. */
static int32_t run(const wsel_tokenizer *tok, char kind, const char *in, size_t len, buf *b,
                   size_t *n_text, size_t *n_ids)
{
    int32_t rc;
    if (kind == 'c') {
        while ((rc = wsel_tokenizer_render_chat(tok, in, len, b->text, b->text_cap, n_text,
                                                NULL, 0)) == WSEL_TOKENIZER_ERANGE)
            if (grow((void **)&b->text, &b->text_cap, *n_text + 1, 1))
                return WSEL_TOKENIZER_EINTERNAL;
        if (rc)
            return rc;
        in = b->text;
        len = *n_text;
    }
    uint32_t flags = kind == 't' ? WSEL_TOKENIZER_ADD_SPECIAL : 0;
    while ((rc = wsel_tokenizer_encode(tok, in, len, flags, b->ids, b->ids_cap, n_ids)) ==
           WSEL_TOKENIZER_ERANGE)
        if (grow((void **)&b->ids, &b->ids_cap, *n_ids, sizeof(uint32_t)))
            return WSEL_TOKENIZER_EINTERNAL;
    return rc;
}

static void put_u32(uint32_t v)
{
    fwrite(&v, sizeof v, 1, stdout);
}

/* A count, then `n` elements of `size` bytes (none, and p may be NULL,
 * when n is 0: an empty prompt has no ids). */
static void put_bytes(const void *p, size_t size, size_t n)
{
    put_u32((uint32_t)n);
    if (n != 0)
        fwrite(p, size, n, stdout);
}

static int batch(const wsel_tokenizer *tok)
{
    buf b = {0};
    char *in = NULL;
    size_t in_cap = 0;
    int kind;
    uint32_t len;
    while ((kind = getchar()) != EOF) {
        if (fread(&len, sizeof len, 1, stdin) != 1 || grow((void **)&in, &in_cap, len + 1, 1) ||
            fread(in, 1, len, stdin) != len)
            break;
        size_t n_text = 0, n_ids = 0;
        int32_t rc = run(tok, (char)kind, in, len, &b, &n_text, &n_ids);
        put_u32((uint32_t)rc);
        if (rc)
            continue;
        if (kind == 'c')
            put_bytes(b.text, 1, n_text);
        put_bytes(b.ids, sizeof(uint32_t), n_ids);
    }
    free(in);
    free(b.text);
    free(b.ids);
    return fflush(stdout) ? 1 : 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A deterministic prose-and-code text of `chars` bytes: words drawn by an
 * LCG from `seed`, so that no two requests share more than chance. */
static char *bench_text(size_t chars, uint64_t seed)
{
    static const char *const words[] = {
        "the", "router", "selects", "a", "worker", "whose", "cache", "holds", "prefix",
        "int", "main(void)", "{", "return", "0;", "}", "tokens", "per", "second,", "KV",
        "blocks", "and", "latency.", "Über", "naïve", "数据", "模型", "🙂", "for", "i", "in",
        "range(10):", "\n", "    ", "print(x)", "(1)", "is", "not", "None"};
    size_t len = 0;
    char *s = malloc(chars + 64);
    while (s && len < chars) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        len += (size_t)sprintf(s + len, "%s ", words[(seed >> 33) % (sizeof words / sizeof *words)]);
    }
    return s;
}

/* Bytes per token of bench_text, from a 256 KiB sample. */
static double bytes_per_token(const wsel_tokenizer *tok, buf *b)
{
    char *s = bench_text(256 * 1024, 99);
    size_t n_text = 0, n_ids = 0;
    if (!s || run(tok, 'r', s, strlen(s), b, &n_text, &n_ids) || !n_ids)
        return free(s), 4.0;
    double r = (double)strlen(s) / (double)n_ids;
    free(s);
    return r;
}

static int bench(const wsel_tokenizer *tok, int reps)
{
    static const size_t sizes[] = {2048, 8192, 32768};
    buf b = {0};
    double *us = calloc((size_t)reps, sizeof *us);
    if (!us)
        return 1;
    double bpt = bytes_per_token(tok, &b);
    printf("%-8s %8s %10s %10s %12s\n", "tokens", "reqs", "p50_ms", "p99_ms", "tokens/s");
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double total_tokens = 0, total_us = 0;
        for (int r = 0; r < reps; r++) {
            char *s = bench_text((size_t)((double)sizes[i] * bpt), (uint64_t)r + 1);
            size_t n_text = 0, n_ids = 0;
            double t0 = now_us();
            int32_t rc = s ? run(tok, 't', s, strlen(s), &b, &n_text, &n_ids) : -1;
            us[r] = now_us() - t0;
            free(s);
            if (rc)
                return fprintf(stderr, "encode: %s\n", wsel_tokenizer_strerror(rc)), 1;
            total_tokens += (double)n_ids;
            total_us += us[r];
        }
        qsort(us, (size_t)reps, sizeof *us, cmp_double);
        printf("%-8.0f %8d %10.3f %10.3f %12.0f\n", total_tokens / reps, reps, us[reps / 2] / 1e3,
               us[(size_t)((reps - 1) * 0.99)] / 1e3, total_tokens / (total_us / 1e6));
    }
    free(us);
    free(b.text);
    free(b.ids);
    return 0;
}

static int once(const wsel_tokenizer *tok, char kind, const char *in)
{
    buf b = {0};
    size_t n_text = 0, n_ids = 0;
    int32_t rc = run(tok, kind, in, strlen(in), &b, &n_text, &n_ids);
    if (rc)
        fprintf(stderr, "wsel-tokenize: %s\n", wsel_tokenizer_strerror(rc));
    else if (kind == 'c')
        printf("%s\n", b.text);
    for (size_t i = 0; !rc && i < n_ids; i++)
        printf("%u%c", b.ids[i], i + 1 == n_ids ? '\n' : ' ');
    free(b.text);
    free(b.ids);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: wsel-tokenize DIR (TEXT | --chat JSON | --batch | "
                        "--bench [REPS])\n");
        return 2;
    }
    char err[512] = "";
    wsel_tokenizer *tok = NULL;
    int32_t rc = wsel_tokenizer_open(argv[1], &tok, err, sizeof err);
    if (rc) {
        fprintf(stderr, "wsel-tokenize: %s: %s\n", wsel_tokenizer_strerror(rc), err);
        return 1;
    }
    int status;
    if (!strcmp(argv[2], "--batch"))
        status = batch(tok);
    else if (!strcmp(argv[2], "--bench"))
        status = bench(tok, argc > 3 ? atoi(argv[3]) > 0 ? atoi(argv[3]) : 100 : 100);
    else if (!strcmp(argv[2], "--chat") && argc > 3)
        status = once(tok, 'c', argv[3]);
    else
        status = once(tok, 't', argv[2]);
    wsel_tokenizer_close(tok);
    return status;
}
