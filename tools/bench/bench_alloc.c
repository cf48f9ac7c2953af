// SPDX-License-Identifier: Apache-2.0
/*
 * bench_alloc.c -- count heap allocations in the wsel process.
 *
 * Defining malloc and friends in the executable interposes them for every
 * shared object (libwsel-host, plugins, libc itself), so an allocation on
 * any select path is seen. Each forwards to glibc's allocator through its
 * exported __libc_* entry points; the counter is an atomic incremented only
 * while counting is on, so the cost outside measurements is one relaxed
 * load. Sanitizer runtimes own malloc, so the whole file compiles to the
 * "unavailable" stubs there (WSEL_BENCH_COUNT_ALLOCS is 0).
 */
#include "bench.h"

#include <stdatomic.h>

#if WSEL_BENCH_COUNT_ALLOCS

#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *p);

static atomic_int counting;
static atomic_uint_fast64_t allocations;

static void note_allocation(void)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

__attribute__((visibility("default"))) void *malloc(size_t size)
{
    note_allocation();
    return __libc_malloc(size);
}

__attribute__((visibility("default"))) void *calloc(size_t n, size_t size)
{
    note_allocation();
    return __libc_calloc(n, size);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t size)
{
    note_allocation();
    return __libc_realloc(p, size);
}

__attribute__((visibility("default"))) void free(void *p)
{
    __libc_free(p);
}

__attribute__((visibility("default"))) void *aligned_alloc(size_t alignment, size_t size)
{
    note_allocation();
    return __libc_memalign(alignment, size);
}

__attribute__((visibility("default"))) void *memalign(size_t alignment, size_t size)
{
    note_allocation();
    return __libc_memalign(alignment, size);
}

__attribute__((visibility("default"))) int posix_memalign(void **out, size_t alignment,
                                                          size_t size)
{
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    note_allocation();
    void *p = __libc_memalign(alignment, size);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

int bench_alloc_available(void)
{
    return 1;
}

void bench_alloc_begin(void)
{
    atomic_store(&allocations, 0);
    atomic_store(&counting, 1);
}

uint64_t bench_alloc_end(void)
{
    atomic_store(&counting, 0);
    return atomic_load(&allocations);
}

#else /* sanitizer build: no interposition */

int bench_alloc_available(void)
{
    return 0;
}

void bench_alloc_begin(void) {}

uint64_t bench_alloc_end(void)
{
    return 0;
}

#endif
