// SPDX-License-Identifier: Apache-2.0
/*
 * mix64.h -- splitmix64's finaliser: a bijective, well-mixed 64-bit hash,
 * so keys that step by a power of two still spread over a table's slots.
 * One definition for every plugin that hashes (hysteresis, adaptive,
 * chash): the owner fingerprints and the ring's points depend on it bit
 * for bit. Pure, any thread.
 */
#ifndef WSEL_PLUGINS_MIX64_H
#define WSEL_PLUGINS_MIX64_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#endif
