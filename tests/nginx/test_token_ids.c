/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_token_ids.c -- nginx/wsel_token_ids.c: exact answers on hand-made
 * arrays, then every reader against a reference on seeded random arrays
 * (id lengths 1 to 10 digits, compact and spaced, windows cut anywhere),
 * each input in a buffer of exactly its size so that a sanitizer build
 * sees any read past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_token_ids.h"

static const int readers[] = {WSEL_TOKEN_IDS_BYTES, WSEL_TOKEN_IDS_SSE2,
                              WSEL_TOKEN_IDS_AVX512};

/* Parse text (copied into a buffer of exactly its length) with reader;
 * returns the offset of the end pointer, or -1 for NULL. */
static long parse(const char *text, size_t len, int reader, wsel_token_buf *buf)
{
    unsigned char *b = malloc(len ? len : 1);
    assert_non_null(b);
    memcpy(b, text, len);
    int nomem = 1;
    const unsigned char *end = wsel_token_ids_parse(b, b + len, buf, reader, &nomem);
    assert_int_equal(nomem, 0);
    long off = end ? (long)(end - b) : -1;
    free(b);
    return off;
}

static void expect_ids(const char *text, const uint32_t *ids, size_t n)
{
    for (size_t r = 0; r < sizeof(readers) / sizeof(readers[0]); r++) {
        wsel_token_buf buf = {0};
        long off = parse(text, strlen(text), readers[r], &buf);
        const char *close = strrchr(text, ']');
        assert_non_null(close);
        assert_int_equal(off, (long)(close - text) + 1);
        assert_int_equal(buf.n, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(buf.ids[i], ids[i]);
        free(buf.ids);
    }
}

static void expect_null(const char *text)
{
    for (size_t r = 0; r < sizeof(readers) / sizeof(readers[0]); r++) {
        wsel_token_buf buf = {0};
        assert_int_equal(parse(text, strlen(text), readers[r], &buf), -1);
        free(buf.ids);
    }
}

static void test_exact(void **state)
{
    (void)state;
    static const uint32_t a[] = {1, 2, 3};
    expect_ids("[1,2,3]", a, 3);
    expect_ids("[ 1 , 2,\n3 ]", a, 3);
    expect_ids("[1,2,3],\"max_tokens\":1}", a, 3);
    static const uint32_t z[] = {0};
    expect_ids("[0]", z, 1);
    static const uint32_t m[] = {4294967295u, 12345678u, 99999999u, 100000000u};
    expect_ids("[4294967295,12345678,99999999,100000000]", m, 4);
    expect_null("[4294967296]");
    expect_null("[]");
    expect_null("[1,,2]");
    expect_null("[1,2,]");
    expect_null("[-1]");
    expect_null("[1.5]");
    expect_null("[1e3]");
    expect_null("[1,2");
    expect_null("[\"a\"]");
    expect_null("");
    expect_null("1,2]");
}

/* Window-sized inputs: the same faults placed at every offset of a long
 * compact array, where a window reader sees them. */
static void test_faults_in_windows(void **state)
{
    (void)state;
    static const char *const faults[] = {",,", ".5", "e3", "-1", ",]", " ,,"};
    char text[512];
    for (size_t f = 0; f < sizeof(faults) / sizeof(faults[0]); f++) {
        for (size_t at = 1; at < 200; at++) {
            size_t n = 0;
            text[n++] = '[';
            while (n < at)
                n += (size_t)snprintf(text + n, sizeof(text) - n, "%u,",
                                      (unsigned)(n % 97));
            n += (size_t)snprintf(text + n, sizeof(text) - n, "7%s", faults[f]);
            while (n < 400)
                n += (size_t)snprintf(text + n, sizeof(text) - n, ",%u",
                                      (unsigned)(n % 89));
            text[n++] = ']';
            text[n] = '\0';
            for (size_t r = 0; r < sizeof(readers) / sizeof(readers[0]); r++) {
                wsel_token_buf buf = {0};
                assert_int_equal(parse(text, n, readers[r], &buf), -1);
                free(buf.ids);
            }
        }
    }
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random id of 1..10 digits below 2^32. */
static uint32_t random_id(uint64_t *s)
{
    static const uint64_t top[] = {10,      100,      1000,      10000,      100000,
                                   1000000, 10000000, 100000000, 1000000000, 4294967296};
    return (uint32_t)(rng_next(s) % top[rng_next(s) % 10]);
}

static void test_random_against_reference(void **state)
{
    (void)state;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t cap = 1 << 20;
    char *text = malloc(cap);
    uint32_t *want = malloc(sizeof(*want) * 20000);
    assert_non_null(text);
    assert_non_null(want);
    for (int round = 0; round < 400; round++) {
        size_t n = 1 + rng_next(&s) % (round < 200 ? 300 : 20000);
        int spaced = rng_next(&s) % 4 == 0;
        size_t len = 0;
        text[len++] = '[';
        for (size_t i = 0; i < n; i++) {
            want[i] =
                rng_next(&s) % 3 ? (uint32_t)(rng_next(&s) % 152064) : random_id(&s);
            const char *sep = i == 0 ? "" : spaced && rng_next(&s) % 8 == 0 ? " , " : ",";
            len += (size_t)snprintf(text + len, cap - len, "%s%u", sep, want[i]);
        }
        text[len++] = ']';
        for (size_t r = 0; r < sizeof(readers) / sizeof(readers[0]); r++) {
            wsel_token_buf buf = {0};
            assert_int_equal(parse(text, len, readers[r], &buf), (long)len);
            assert_int_equal(buf.n, n);
            assert_memory_equal(buf.ids, want, n * sizeof(*want));
            free(buf.ids);
        }
    }
    free(want);
    free(text);
}

/* The buffer is kept between calls and only grows. */
static void test_buffer_reused(void **state)
{
    (void)state;
    wsel_token_buf buf = {0};
    assert_int_equal(parse("[5,6]", 5, WSEL_TOKEN_IDS_AVX512, &buf), 5);
    uint32_t *ids = buf.ids;
    size_t cap = buf.cap;
    assert_true(cap >= 2);
    assert_int_equal(parse("[7]", 3, WSEL_TOKEN_IDS_AVX512, &buf), 3);
    assert_ptr_equal(buf.ids, ids);
    assert_int_equal(buf.cap, cap);
    assert_int_equal(buf.n, 1);
    assert_int_equal(buf.ids[0], 7);
    free(buf.ids);
}

int main(void)
{
    printf("# best reader on this machine: %d (0 bytes, 1 SSE2, 2 AVX-512)\n",
           wsel_token_ids_best());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_faults_in_windows),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_buffer_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
