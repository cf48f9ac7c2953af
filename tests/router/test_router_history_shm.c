// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_history_shm.c -- routing history shared through a ring in
 * shared memory: a router applies the others' routes (not its own) to its
 * index, a prompt longer than an entry arrives whole, a router that starts
 * late applies the whole ring, a reader lapped by the writers counts what
 * it lost, an entry left half-written (its writer died) is skipped after
 * the stall bound, and the wrong mode or region is refused. The routers
 * share one process (the ring does not care whose address space).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "wsel_router.h"

#define BS    4u
#define STALL 20u /* ms */

typedef struct proc {
    wsel_host *host;
    wsel_router *router;
} proc;

static void *region;
static size_t region_size;
static uint32_t ring_entries = 64;

static int setup_ring(uint32_t entries)
{
    ring_entries = entries;
    region_size = wsel_router_history_size(entries);
    region = mmap(NULL, region_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        return -1;
    return wsel_router_history_format(region, region_size, entries);
}

static int setup(void **state)
{
    (void)state;
    return setup_ring(64);
}

static int setup_small(void **state)
{
    (void)state;
    return setup_ring(4);
}

static int teardown(void **state)
{
    (void)state;
    munmap(region, region_size);
    return 0;
}

/* A history-mode router with workers 1 and 2 (two ranks each). */
static void proc_open(proc *p, uint32_t kv_source)
{
    char err[256];
    assert_int_equal(wsel_host_create(NULL, &p->host), 0);
    wsel_router_options o = {.struct_size = sizeof(o), .block_size = BS,
                             .kv_source = kv_source, .host = p->host};
    assert_int_equal(wsel_router_create(&o, &p->router, err, sizeof(err)), 0);
    for (uint64_t w = 1; w <= 2; w++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%llu", (unsigned long long)(8000 + w));
        wsel_router_worker wk = {.worker_id = w, .address = addr, .dp_size = 2};
        assert_int_equal(wsel_router_add_worker(p->router, &wk, err, sizeof(err)), 0);
    }
}

static void proc_start(proc *p)
{
    char err[256];
    proc_open(p, WSEL_ROUTER_KV_HISTORY);
    assert_int_equal(wsel_router_history_start(p->router, region, STALL, err, sizeof(err)),
                     0);
}

static void proc_stop(proc *p)
{
    wsel_router_destroy(p->router);
    wsel_host_destroy(p->host);
}

/* Route a prompt of `blocks` full blocks from seed; the result in *res. */
static void route(proc *p, uint32_t seed, uint32_t blocks, wsel_route_result *res)
{
    uint32_t t[1024];
    assert_true(blocks * BS <= 1024);
    for (uint32_t i = 0; i < blocks * BS; i++)
        t[i] = seed * 10000u + i;
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = blocks * BS};
    assert_int_equal(wsel_router_route(p->router, &q, res), 0);
    assert_int_equal(wsel_router_finished(p->router, res->request_id), 0);
}

/* Blocks p's index holds on (worker, rank). */
static uint64_t cached(proc *p, uint64_t worker, uint32_t rank)
{
    wsel_router_rank_info ri[4];
    assert_int_equal(wsel_router_read_ranks(p->router, ri, 4), 4);
    for (uint32_t i = 0; i < 4; i++)
        if (ri[i].worker_id == worker && ri[i].dp_rank == rank)
            return ri[i].cached_blocks;
    fail();
    return 0;
}

static wsel_router_history_counters counters(proc *p)
{
    wsel_router_history_counters c = {.struct_size = sizeof(c)};
    assert_int_equal(wsel_router_history_read_counters(p->router, &c), 0);
    return c;
}

static void test_router_applies_the_others_routes_not_its_own(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    wsel_route_result r;
    route(&a, 1, 8, &r);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), 0);
    wsel_router_history_poll(b.router);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), 8);
    wsel_router_history_poll(a.router);
    assert_int_equal(cached(&a, r.worker_id, r.dp_rank), 8); /* once, not twice */
    assert_int_equal(counters(&a).published, 1);
    assert_int_equal(counters(&a).applied, 0);
    assert_int_equal(counters(&b).applied, 1);
    proc_stop(&a);
    proc_stop(&b);
}

static void test_prompt_longer_than_an_entry_arrives_whole(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    uint32_t blocks = 2 * WSEL_ROUTER_HISTORY_ENTRY_BLOCKS + 30; /* 3 entries */
    wsel_route_result r;
    route(&a, 2, blocks, &r);
    wsel_router_history_poll(b.router);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), blocks);
    assert_int_equal(counters(&a).published, 3);
    assert_int_equal(counters(&b).applied, 3);
    proc_stop(&a);
    proc_stop(&b);
}

static void test_deferred_record_is_shared_at_its_flush(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    uint32_t t[8 * BS];
    for (uint32_t i = 0; i < 8 * BS; i++)
        t[i] = 777u + i;
    wsel_route_request q = {.struct_size = sizeof(q), .overrides = WSEL_ROUTE_DEFER_HISTORY,
                            .tokens = t, .num_tokens = 8 * BS};
    wsel_route_result r;
    assert_int_equal(wsel_router_route(a.router, &q, &r), 0);
    wsel_router_history_poll(b.router);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), 0);
    wsel_router_flush(a.router);
    wsel_router_history_poll(b.router);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), 8);
    proc_stop(&a);
    proc_stop(&b);
}

static void test_late_router_applies_the_whole_ring(void **state)
{
    (void)state;
    proc a, c;
    proc_start(&a);
    wsel_route_result r[5];
    for (uint32_t i = 0; i < 5; i++)
        route(&a, 10 + i, 4, &r[i]);
    proc_stop(&a); /* gone: its history stays in the ring */
    proc_start(&c);
    uint64_t total = 0;
    for (uint64_t w = 1; w <= 2; w++)
        for (uint32_t k = 0; k < 2; k++)
            total += cached(&c, w, k);
    assert_int_equal(total, 20);
    assert_int_equal(counters(&c).applied, 5);
    proc_stop(&c);
}

static void test_lapped_reader_counts_what_it_lost(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    wsel_route_result r;
    for (uint32_t i = 0; i < 10; i++)
        route(&a, 20 + i, 2, &r);
    wsel_router_history_poll(b.router);
    wsel_router_history_counters c = counters(&b);
    assert_int_equal(c.applied, ring_entries);
    assert_int_equal(c.lost, 10 - ring_entries);
    proc_stop(&a);
    proc_stop(&b);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_half_written_entry_is_skipped_after_the_stall(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    /* A writer that reserved an entry and died: the head moves, the entry
     * is never stamped (the head is the region's second cache line). */
    atomic_ullong *head = (atomic_ullong *)((char *)region + 64);
    atomic_fetch_add(head, 1);
    wsel_route_result r;
    route(&a, 30, 4, &r);
    uint64_t t0 = now_ms();
    wsel_router_history_poll(b.router);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), 0); /* held up behind it */
    while (counters(&b).applied == 0) {
        assert_true(now_ms() - t0 < 10000);
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        wsel_router_history_poll(b.router);
    }
    assert_true(now_ms() - t0 >= STALL);
    assert_int_equal(counters(&b).lost, 1);
    assert_int_equal(cached(&b, r.worker_id, r.dp_rank), 4);
    proc_stop(&a);
    proc_stop(&b);
}

static void test_event_mode_second_start_and_blank_region_are_refused(void **state)
{
    (void)state;
    char err[256];
    proc e;
    proc_open(&e, WSEL_ROUTER_KV_EVENTS);
    assert_int_equal(wsel_router_history_start(e.router, region, 0, err, sizeof(err)),
                     WSEL_ESTATE);
    assert_non_null(strstr(err, "events"));
    proc_stop(&e);
    proc a;
    proc_start(&a);
    assert_int_equal(wsel_router_history_start(a.router, region, 0, err, sizeof(err)),
                     WSEL_ESTATE);
    wsel_router_history_stop(a.router);
    wsel_router_history_stop(a.router); /* a no-op */
    static uint64_t blank[128];
    assert_int_equal(wsel_router_history_start(a.router, blank, 0, err, sizeof(err)),
                     WSEL_EINVAL);
    wsel_router_history_poll(a.router); /* a no-op when not started */
    assert_int_equal(wsel_router_history_format(blank, sizeof(blank), 64), WSEL_EINVAL);
    proc_stop(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_router_applies_the_others_routes_not_its_own,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompt_longer_than_an_entry_arrives_whole,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_record_is_shared_at_its_flush, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_late_router_applies_the_whole_ring, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lapped_reader_counts_what_it_lost,
                                        setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_half_written_entry_is_skipped_after_the_stall,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_event_mode_second_start_and_blank_region_are_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
