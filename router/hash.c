// SPDX-License-Identifier: Apache-2.0
/*
 * hash.c -- chained XXH3 block hashes (wsel_router.h, "hashing"): a local
 * hash per block over its bytes, chained with its parent's hash, both with
 * Dynamo's seed, so equal hashes mean equal prefixes.
 */
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t, for big-endian hosts */
#include <xxhash.h>

#include "router_internal.h"

static uint64_t chain(uint64_t parent, uint64_t local, uint32_t index)
{
    if (index == 0)
        return local;
    unsigned char buf[16];
    for (int i = 0; i < 8; i++) {
        buf[i] = (unsigned char)(parent >> (8 * i));
        buf[8 + i] = (unsigned char)(local >> (8 * i));
    }
    return XXH3_64bits_withSeed(buf, sizeof(buf), WSEL_ROUTER_HASH_SEED);
}

/* Whole blocks of `size` in `len`, at most max: the blocks a prompt
 * hashes (a partial last block is never hashed). */
static uint32_t whole_blocks(size_t len, uint32_t size, uint32_t max)
{
    size_t blocks = len / size;
    return blocks > max ? max : (uint32_t)blocks;
}

uint32_t wsel_router_hash_tokens(const uint32_t *tokens, uint32_t n, uint32_t block_size,
                                 uint64_t *out, uint32_t max)
{
    if (!tokens || !out || block_size == 0)
        return 0;
    uint32_t blocks = whole_blocks(n, block_size, max);
    uint64_t h = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* XXH3_64bits_withSeed derives a secret from the seed on every call
     * for inputs above 240 bytes; derive it once per prompt instead (the
     * same hash: xxhash.h, XXH3_64bits_withSecretandSeed). */
    unsigned char secret[XXH3_SECRET_DEFAULT_SIZE];
    if ((size_t)block_size * 4 > 240 && blocks > 1)
        XXH3_generateSecret_fromSeed(secret, WSEL_ROUTER_HASH_SEED);
    else
        memset(secret, 0, sizeof(secret));
#endif
    for (uint32_t b = 0; b < blocks; b++) {
        const uint32_t *t = tokens + (size_t)b * block_size;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* The ids in memory are already their little-endian bytes. */
        size_t len = (size_t)block_size * 4;
        uint64_t local = len > 240 && blocks > 1
                             ? XXH3_64bits_withSecretandSeed(
                                   t, len, secret, sizeof(secret), WSEL_ROUTER_HASH_SEED)
                             : XXH3_64bits_withSeed(t, len, WSEL_ROUTER_HASH_SEED);
        h = chain(h, local, b);
        out[b] = h;
#else
        unsigned char buf[4 * 1024];
        XXH3_state_t st;
        XXH3_64bits_reset_withSeed(&st, WSEL_ROUTER_HASH_SEED);
        /* Little-endian bytes of each id, in chunks of 1,024 ids. */
        for (uint32_t done = 0; done < block_size;) {
            uint32_t k = block_size - done < 1024 ? block_size - done : 1024;
            for (uint32_t i = 0; i < k; i++) {
                uint32_t v = t[done + i];
                buf[4 * i] = (unsigned char)v;
                buf[4 * i + 1] = (unsigned char)(v >> 8);
                buf[4 * i + 2] = (unsigned char)(v >> 16);
                buf[4 * i + 3] = (unsigned char)(v >> 24);
            }
            XXH3_64bits_update(&st, buf, (size_t)k * 4);
            done += k;
        }
        h = chain(h, XXH3_64bits_digest(&st), b);
        out[b] = h;
#endif
    }
    return blocks;
}

uint32_t wsel_router_hash_text(const char *text, size_t len, uint32_t chunk,
                               uint64_t *out, uint32_t max)
{
    if (!text || !out || chunk == 0)
        return 0;
    uint32_t blocks = whole_blocks(len, chunk, max);
    uint64_t h = 0;
    for (uint32_t b = 0; b < blocks; b++) {
        uint64_t local =
            XXH3_64bits_withSeed(text + (size_t)b * chunk, chunk, WSEL_ROUTER_HASH_SEED);
        h = chain(h, local, b);
        out[b] = h;
    }
    return blocks;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The secret XXH3_64bits_withSeed derives from Dynamo's seed, derived once
 * (immutable afterwards). */
static unsigned char seed_secret[XXH3_SECRET_DEFAULT_SIZE];
static pthread_once_t seed_secret_once = PTHREAD_ONCE_INIT;

static void derive_seed_secret(void)
{
    XXH3_generateSecret_fromSeed(seed_secret, WSEL_ROUTER_HASH_SEED);
}
#endif

uint64_t rt_hash_local_tokens(const uint32_t *tokens, uint32_t block_size)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    size_t len = (size_t)block_size * 4;
    if (len > 240) {
        pthread_once(&seed_secret_once, derive_seed_secret);
        return XXH3_64bits_withSecretandSeed(tokens, len, seed_secret,
                                             sizeof(seed_secret), WSEL_ROUTER_HASH_SEED);
    }
#endif
    uint64_t h = 0; /* block_size 0 would hash nothing (the router's is at least 1) */
    wsel_router_hash_tokens(tokens, block_size, block_size, &h, 1);
    return h;
}

uint64_t rt_hash_chain(uint64_t parent, uint64_t local, int has_parent)
{
    return chain(parent, local, has_parent ? 1 : 0);
}
