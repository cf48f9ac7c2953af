// SPDX-License-Identifier: Apache-2.0
/*
 * rng.c -- the seeded random streams behind every reproducible decision.
 *
 * xoshiro256** (Blackman and Vigna) seeded by splitmix64: fast, 256 bits of
 * state that fit in wsel_rng, and good enough statistically for sampling.
 */
#include "wsel_host.h"

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void wsel_rng_seed(wsel_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64(&x);
    /* splitmix64 cannot produce four zero words in a row, but be explicit. */
    if ((rng->state[0] | rng->state[1] | rng->state[2] | rng->state[3]) == 0)
        rng->state[0] = 1;
}

uint64_t wsel_rng_u64(wsel_rng *rng)
{
    uint64_t *s = rng->state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double wsel_rng_uniform(wsel_rng *rng)
{
    return (double)(wsel_rng_u64(rng) >> 11) * 0x1.0p-53;
}

uint32_t wsel_rng_below(wsel_rng *rng, uint32_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased, usually one draw.
     * The arithmetic is wsel.h's wsel_inline_rng_below, draw for draw. */
    if (n == 0)
        return 0;
    uint64_t m = (uint64_t)(uint32_t)(wsel_rng_u64(rng) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(wsel_rng_u64(rng) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}
