// SPDX-License-Identifier: Apache-2.0
/*
 * depth_grid.h -- which prefix depths the prefix-keyed policies (hysteresis,
 * adaptive, chash) record and probe.
 *
 * Depths are 1-based: depth d is request->block_hashes[d - 1]. The grid is
 * every depth up to 64, then 32 evenly spaced depths per doubling (every
 * 2nd up to 128, every 4th up to 256, ...), so a request of n blocks
 * touches at most 64 + 32 log2(n / 64) depths and the deepest shared block
 * is found to within 1/32 of its depth. The grid does not depend on the
 * request, so two requests sharing a prefix probe the same blocks.
 *
 * One definition for every plugin that uses it: a policy that records on
 * one grid and searches on another never finds a long prompt's owner
 * (that bug once lived in two copies of this code).
 *
 * Pure functions, any thread.
 */
#ifndef WSEL_PLUGINS_DEPTH_GRID_H
#define WSEL_PLUGINS_DEPTH_GRID_H

#include <stdint.h>

/* The distance between grid depths around d (a power of two). */
static inline uint32_t depth_grid_step(uint32_t d)
{
    if (d <= 64)
        return 1;
    uint32_t log2 = 31u - (uint32_t)__builtin_clz(d);
    return 1u << (log2 - 5);
}

/* The deepest grid depth <= d. */
static inline uint32_t depth_grid_floor(uint32_t d)
{
    return d - d % depth_grid_step(d);
}

/* The grid depth after d: d + 1 rounded up to its own step (steps are
 * powers of two that change only at powers of two, so this never skips a
 * grid depth): 1 -> 2 ... 63 -> 64 -> 66 ... 126 -> 128 -> 132 ...
 * UINT32_MAX past the last step, which ends a walk. */
static inline uint32_t depth_grid_next(uint32_t d)
{
    if (d >= UINT32_MAX - (1u << 26))
        return UINT32_MAX;
    uint32_t s = depth_grid_step(d + 1);
    return (d + s) & ~(s - 1);
}

#endif
