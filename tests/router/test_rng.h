// SPDX-License-Identifier: Apache-2.0
/*
 * test_rng.h -- the router tests' seeded stream: splitmix64 (its
 * finaliser is plugins/common/mix64.h) over a state the test seeds.
 * Single-threaded: one state per test program.
 */
#ifndef WSEL_TESTS_ROUTER_RNG_H
#define WSEL_TESTS_ROUTER_RNG_H

#include <stdint.h>

#include "../../plugins/common/mix64.h"

static uint64_t rng_state;

static inline uint64_t next(void)
{
    return mix64(rng_state += 0x9e3779b97f4a7c15ull);
}

static inline uint32_t below(uint32_t n)
{
    return (uint32_t)(next() % n);
}

#endif
