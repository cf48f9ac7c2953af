// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_mp_unpack.c -- rt_mp_unpack (mp_unpack.c compiled in), the
 * router's instance of msgpack-c's parser, answers as the library's
 * msgpack_unpack does: the same verdict on every message (one whole
 * object, or not) and, when it is one, the same object (packed again
 * by msgpack-c, the same bytes: every type and value). Seeded random
 * objects of every msgpack type and header size, nested, then each cut,
 * extended and with bytes changed; and the decoder's fuzz corpus.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "mp_unpack.h"
#include "test_rng.h"

#define ROUNDS 2000


/* An integer of 0 to 64 significant bits, either sign. */
static void pack_int(msgpack_packer *pk)
{
    uint64_t v = next() >> below(64);
    if (below(2))
        msgpack_pack_uint64(pk, v);
    else
        msgpack_pack_int64(pk, -(int64_t)(v >> 1));
}

/* Bytes of a length that takes each header size (fix, 8, 16, 32 bits). */
static uint32_t some_length(void)
{
    static const uint32_t len[] = {0, 3, 31, 32, 200, 255, 256, 1000, 65536};
    return len[below(sizeof(len) / sizeof(len[0]))];
}

static void pack_raw(msgpack_packer *pk)
{
    static char bytes[65536];
    uint32_t n = some_length();
    for (uint32_t i = 0; i < n && i < 64; i++)
        bytes[i] = (char)next();
    switch (below(3)) {
    case 0:
        msgpack_pack_str_with_body(pk, bytes, n);
        break;
    case 1:
        msgpack_pack_bin_with_body(pk, bytes, n);
        break;
    default: /* fixext 1..16 and ext 8/16/32 */
        msgpack_pack_ext_with_body(pk, bytes, below(2) ? 1u << below(5) : n,
                                   (int8_t)below(128));
        break;
    }
}

/* A random object, containers to `depth` levels (a container of more
 * than 20 holds no other); `big` allows array counts past 65,535 (32-bit
 * headers). */
static void pack_any(msgpack_packer *pk, int depth, int big)
{
    uint32_t kind = depth > 0 ? below(10) : below(7);
    uint32_t n = below(4) ? below(20) : below(big ? 70000 : 300);
    switch (kind) {
    case 0:
    case 1:
        pack_int(pk);
        break;
    case 2:
        if (below(2))
            msgpack_pack_float(pk, (float)(int64_t)next() / 3.0f);
        else
            msgpack_pack_double(pk, (double)(int64_t)next() / 7.0);
        break;
    case 3:
        below(3) == 0 ? msgpack_pack_nil(pk)
        : below(2)    ? msgpack_pack_true(pk)
                      : msgpack_pack_false(pk);
        break;
    case 4:
    case 5:
    case 6:
        pack_raw(pk);
        break;
    case 7:
    case 8:
        msgpack_pack_array(pk, n);
        for (uint32_t i = 0; i < n; i++)
            pack_any(pk, n > 20 ? 0 : depth - 1, 0);
        break;
    default:
        msgpack_pack_map(pk, n % 300);
        for (uint32_t i = 0; i < 2 * (n % 300); i++)
            pack_any(pk, n % 300 > 20 ? 0 : depth - 1, 0);
        break;
    }
}

/* a and b packed again give the same bytes (msgpack_object_equal would
 * call a NaN unequal to itself). */
static int same_object(msgpack_object a, msgpack_object b)
{
    msgpack_sbuffer sa, sb;
    msgpack_packer pa, pb;
    msgpack_sbuffer_init(&sa);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pa, &sa, msgpack_sbuffer_write);
    msgpack_packer_init(&pb, &sb, msgpack_sbuffer_write);
    msgpack_pack_object(&pa, a);
    msgpack_pack_object(&pb, b);
    int same = sa.size == sb.size && memcmp(sa.data, sb.data, sa.size) == 0;
    msgpack_sbuffer_destroy(&sa);
    msgpack_sbuffer_destroy(&sb);
    return same;
}

/* Both parsers on b[0..len): the same verdict, and equal objects. */
static void check_same(const unsigned char *b, size_t len)
{
    msgpack_zone lib_zone, our_zone;
    assert_true(msgpack_zone_init(&lib_zone, 4096));
    assert_true(msgpack_zone_init(&our_zone, 4096));
    msgpack_object lib, ours;
    size_t off = 0;
    int lib_ok = len > 0 && msgpack_unpack((const char *)b, len, &off, &lib_zone, &lib) ==
                                MSGPACK_UNPACK_SUCCESS && off == len;
    size_t objects;
    int our_ok = rt_mp_unpack(b, len, &our_zone, &ours, &objects) == 0;
    assert_int_equal(our_ok, lib_ok);
    if (lib_ok)
        assert_true(same_object(lib, ours));
    msgpack_zone_destroy(&lib_zone);
    msgpack_zone_destroy(&our_zone);
}

/* A type byte whose count or length could claim gigabytes of objects
 * from msgpack_unpack (array 32, map 32): the router checks sizes first,
 * the comparison does not need them. */
static int claims_much(unsigned char c)
{
    return c == 0xdd || c == 0xdf;
}

/* msg changed in one of several ways, into out; its length. */
static size_t mutate(const unsigned char *msg, size_t len, unsigned char *out)
{
    memcpy(out, msg, len);
    switch (below(4)) {
    case 0: /* cut */
        return len ? below((uint32_t)len) : 0;
    case 1: /* a byte more */
        out[len] = (unsigned char)next();
        return len + !claims_much(out[len]);
    default: { /* bytes changed */
        for (uint32_t k = 0, n = 1 + below(3); k < n && len; k++) {
            unsigned char c = (unsigned char)next();
            size_t at = below((uint32_t)len);
            if (!claims_much(c))
                out[at] = c;
        }
        return len;
    }
    }
}

static void test_random_objects_unpack_as_msgpack_c_does(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    unsigned char *bad = NULL;
    size_t bad_cap = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int big = round % 200 == 0;
        msgpack_sbuffer_clear(&sb);
        pack_any(&pk, 1 + below(4), big);
        check_same((const unsigned char *)sb.data, sb.size);
        if (big || memchr(sb.data, 0xdd, sb.size) || memchr(sb.data, 0xdf, sb.size))
            continue; /* the mutations below keep counts small */
        if (bad_cap < sb.size + 1) {
            bad_cap = 2 * (sb.size + 1);
            bad = realloc(bad, bad_cap);
            assert_non_null(bad);
        }
        for (int m = 0; m < 4; m++)
            check_same(bad, mutate((const unsigned char *)sb.data, sb.size, bad));
    }
    free(bad);
    msgpack_sbuffer_destroy(&sb);
}

/* The decoder's fuzz corpus (KV event messages, valid and not). */
static void test_fuzz_corpus_unpacks_as_msgpack_c_does(void **state)
{
    (void)state;
    DIR *dir = opendir(WSEL_TEST_CORPUS);
    assert_non_null(dir);
    int files = 0;
    for (struct dirent *de; (de = readdir(dir));) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", WSEL_TEST_CORPUS, de->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static unsigned char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        if (n > 1) /* its first byte picks the frames and the rank */
            check_same(buf + 1, n - 1);
        files++;
    }
    closedir(dir);
    assert_true(files > 0);
}

/* Counts past what the bytes can hold are refused, before the zone is
 * asked for them; a message's objects are counted. */
static void test_counts_are_bounded_by_the_bytes(void **state)
{
    (void)state;
    msgpack_zone z;
    assert_true(msgpack_zone_init(&z, 4096));
    msgpack_object o;
    size_t objects = 0;
    /* An array32 claiming 2^32 - 1 elements: 96 GiB of objects. */
    assert_int_equal(rt_mp_unpack((const unsigned char *)"\xdd\xff\xff\xff\xff", 5, &z,
                                  &o, &objects),
                     RT_MP_MALFORMED);
    /* Two elements declared, one byte left for them. */
    assert_int_equal(rt_mp_unpack((const unsigned char *)"\x92\x01", 2, &z, &o, &objects),
                     RT_MP_MALFORMED);
    assert_int_equal(z.chunk_list.free, 4096); /* nothing allocated */
    /* {"a": [1, 2]}: the pair's two objects, then the array's two. */
    assert_int_equal(rt_mp_unpack((const unsigned char *)"\x81\xa1\x61\x92\x01\x02", 6,
                                  &z, &o, &objects),
                     0);
    assert_int_equal(objects, 4);
    msgpack_zone_destroy(&z);
}

int main(void)
{
    rng_state = 0x5851f42d4c957f2dull;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_are_bounded_by_the_bytes),
        cmocka_unit_test(test_random_objects_unpack_as_msgpack_c_does),
        cmocka_unit_test(test_fuzz_corpus_unpacks_as_msgpack_c_does),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
