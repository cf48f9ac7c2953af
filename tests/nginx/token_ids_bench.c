/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token_ids_bench.c -- how long the nginx module's token-id reader
 * (nginx/wsel_token_ids.c) takes per prompt, per reader this CPU runs: a
 * compact JSON array of N ids (default 8,300, the arxiv slice's mean
 * prompt) drawn from a 152,064-token vocabulary, best of R passes on the
 * calling thread's CPU clock. Run by hand (docs/bench.md), not by CTest:
 *
 *   bench/token_ids_bench [N [R [READER]]]     (READER 0 bytes, 1 SSE2, 2 AVX-512)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wsel_token_ids.h"

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 8300;
    int rounds = argc > 2 ? atoi(argv[2]) : 2000;
    int only = argc > 3 ? atoi(argv[3]) : -1;
    static const char *const names[] = {"bytes", "sse2", "avx512"};
    if (n == 0 || rounds <= 0) {
        fprintf(stderr, "usage: token_ids_bench [N [R [READER]]]\n");
        return 2;
    }
    char *text = malloc(12 * n + 2);
    if (!text)
        return 1;
    size_t len = 0;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    text[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        len += (size_t)sprintf(text + len, "%s%u", i ? "," : "", (unsigned)(s % 152064));
    }
    text[len++] = ']';
    int best = wsel_token_ids_best();
    printf("%zu ids, %zu bytes of JSON; this CPU's best reader: %s\n", n, len,
           names[best]);
    for (int reader = 0; reader <= best; reader++) {
        if (only >= 0 && reader != only)
            continue;
        wsel_token_buf buf = {0};
        double min = 1e300;
        for (int r = 0; r < rounds; r++) {
            int nomem;
            double t0 = cpu_ns();
            const unsigned char *end = wsel_token_ids_parse(
                (const unsigned char *)text, (const unsigned char *)text + len, &buf,
                reader, &nomem);
            double dt = cpu_ns() - t0;
            if (!end || buf.n != n) {
                fprintf(stderr, "token_ids_bench: %s read %zu of %zu ids\n",
                        names[reader], buf.n, n);
                return 1;
            }
            if (dt < min)
                min = dt;
        }
        printf("%-7s %8.1f us a prompt  %5.2f ns an id  %6.0f MB/s\n", names[reader],
               min / 1e3, min / (double)n, (double)len / min * 1e3);
        free(buf.ids);
    }
    free(text);
    return 0;
}
