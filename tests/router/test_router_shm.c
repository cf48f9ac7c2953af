// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_shm.c -- replica sync through shared memory: routers on one
 * region (in this process, and in a child) see each other's load and its
 * drop, a stopped process's load leaves at once, a killed one's within the
 * liveness check, so does a slot whose pid another process took over (the
 * process tag's start time tells them apart), a full region refuses one
 * more, and a second start on one router is refused. Every wait is for a condition, with a deadline.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "wsel_router.h"

#define BS       4u
#define PROCS    4u
#define ROWS     8u
#define CHECK_MS 20u
#define DEADLINE 10000u /* ms */

typedef struct proc {
    wsel_host *host;
    wsel_router *router;
} proc;

static void *region;
static size_t region_size;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int setup(void **state)
{
    (void)state;
    region_size = wsel_router_shm_size(PROCS, ROWS);
    region = mmap(NULL, region_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        return -1;
    return wsel_router_shm_format(region, region_size, PROCS, ROWS);
}

static int teardown(void **state)
{
    (void)state;
    munmap(region, region_size);
    return 0;
}

/* A router with workers 1 and 2 (one rank each) on the region. */
static void proc_start(proc *p)
{
    char err[256];
    assert_int_equal(wsel_host_create(NULL, &p->host), 0);
    wsel_router_options o = {.struct_size = sizeof(o), .block_size = BS, .host = p->host};
    assert_int_equal(wsel_router_create(&o, &p->router, err, sizeof(err)), 0);
    for (uint64_t w = 1; w <= 2; w++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%llu", (unsigned long long)(8000 + w));
        wsel_router_worker wk = {.worker_id = w, .address = addr, .dp_size = 1};
        assert_int_equal(wsel_router_add_worker(p->router, &wk, err, sizeof(err)), 0);
    }
    assert_int_equal(wsel_router_shm_start(p->router, region, CHECK_MS, err, sizeof(err)), 0);
}

static void proc_stop(proc *p)
{
    wsel_router_destroy(p->router);
    wsel_host_destroy(p->host);
}

static int32_t route(proc *p, uint32_t seed, wsel_route_result *res)
{
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = seed * 1000u + i;
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 16};
    return wsel_router_route(p->router, &q, res);
}

/* The requests in flight p sees from the others, after a poll. */
static uint32_t seen_requests(proc *p)
{
    wsel_router_rank_info seen[2];
    wsel_router_shm_poll(p->router);
    assert_int_equal(wsel_router_sync_read_ranks(p->router, seen, 2), 2);
    return seen[0].active_requests + seen[1].active_requests;
}

/* Poll until p sees n requests from the others; 1 if it did in time. */
static int wait_seen(proc *p, uint32_t n)
{
    uint64_t end = now_ms() + DEADLINE;
    while (seen_requests(p) != n) {
        if (now_ms() > end)
            return 0;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return 1;
}

static void test_process_sees_the_others_load_and_its_drop(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    wsel_route_result r[3];
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(route(&a, i, &r[i]), 0);
    assert_int_equal(seen_requests(&b), 3);
    assert_int_equal(seen_requests(&a), 0);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(wsel_router_finished(a.router, r[i].request_id), 0);
    assert_int_equal(seen_requests(&b), 0);
    wsel_router_sync_counters c = {.struct_size = sizeof(c)};
    assert_int_equal(wsel_router_sync_read_counters(b.router, &c), 0);
    assert_int_equal(c.replicas_live, 1);
    assert_int_equal(c.connected, 1);
    proc_stop(&a);
    proc_stop(&b);
}

static void test_stopped_process_leaves_no_load(void **state)
{
    (void)state;
    proc a, b;
    proc_start(&a);
    proc_start(&b);
    wsel_route_result r;
    assert_int_equal(route(&a, 7, &r), 0);
    assert_int_equal(seen_requests(&b), 1);
    proc_stop(&a); /* a request still in flight */
    assert_int_equal(seen_requests(&b), 0);
    wsel_router_sync_counters c = {.struct_size = sizeof(c)};
    assert_int_equal(wsel_router_sync_read_counters(b.router, &c), 0);
    assert_int_equal(c.replicas_live, 0);
    proc_stop(&b);
}

/* In the child: route two requests, say so, die without stopping. */
static void child_routes_and_dies(int fd)
{
    proc a;
    proc_start(&a);
    wsel_route_result r;
    int ok = route(&a, 1, &r) == 0 && route(&a, 2, &r) == 0;
    if (write(fd, &ok, sizeof(ok)) != (ssize_t)sizeof(ok))
        _exit(2);
    pause();
    _exit(0);
}

static void test_killed_process_load_is_dropped_within_the_check(void **state)
{
    (void)state;
    proc b;
    proc_start(&b);
    int fds[2], ok = 0;
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child_routes_and_dies(fds[1]);
    assert_int_equal(read(fds[0], &ok, sizeof(ok)), (ssize_t)sizeof(ok));
    assert_true(ok);
    assert_true(wait_seen(&b, 2));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uint64_t t0 = now_ms();
    assert_true(wait_seen(&b, 0));
    printf("a killed process's load left the view %llu ms after it was reaped "
           "(check every %u ms)\n", (unsigned long long)(now_ms() - t0), CHECK_MS);
    /* its slot is free again: a new process takes it */
    proc c;
    proc_start(&c);
    proc_stop(&c);
    close(fds[0]);
    close(fds[1]);
    proc_stop(&b);
}

static void test_process_tag_tells_a_reused_pid_apart(void **state)
{
    (void)state;
    uint64_t me = wsel_router_shm_process_tag((int)getpid());
    assert_int_not_equal(me, 0);
    assert_false(wsel_router_shm_process_gone(me));
    assert_false(wsel_router_shm_process_gone(0));
    if (me >> 22 == 0)
        skip(); /* no /proc: the pid alone */
    /* the same pid, started at another time: another process */
    assert_true(wsel_router_shm_process_gone(me + (1ull << 22)));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    uint64_t child = 0;
    while ((child = wsel_router_shm_process_tag(pid)) != 0 && waitpid(pid, NULL, WNOHANG) == 0)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL); /* a zombie is tagged 0 */
    waitpid(pid, NULL, 0);
    assert_int_equal(wsel_router_shm_process_tag(pid), 0);
}

/* Replace the owner tag `from` in the region with `to`; 1 if found. */
static int forge_owner(uint64_t from, uint64_t to)
{
    uint64_t *w = region;
    for (size_t i = 0; i < region_size / sizeof(*w); i++)
        if (w[i] == from) {
            __atomic_store_n(&w[i], to, __ATOMIC_RELEASE);
            return 1;
        }
    return 0;
}

static void test_slot_of_a_reused_pid_is_dropped_within_the_check(void **state)
{
    (void)state;
    proc b;
    proc_start(&b);
    int fds[2], ok = 0;
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child_routes_and_dies(fds[1]);
    assert_int_equal(read(fds[0], &ok, sizeof(ok)), (ssize_t)sizeof(ok));
    assert_true(ok);
    assert_true(wait_seen(&b, 2));
    /* The slot's owner becomes a process that had the child's pid before
     * it (same pid, an earlier start): the live child must not keep it. */
    uint64_t tag = wsel_router_shm_process_tag(pid);
    if (tag >> 22 == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        skip();
    }
    assert_true(forge_owner(tag, tag - (1ull << 22)));
    uint64_t t0 = now_ms();
    assert_true(wait_seen(&b, 0));
    printf("a slot whose pid was reused left the view after %llu ms (check every %u ms)\n",
           (unsigned long long)(now_ms() - t0), CHECK_MS);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
    proc_stop(&b);
}

static void test_full_region_refuses_one_more(void **state)
{
    (void)state;
    proc p[PROCS];
    for (uint32_t i = 0; i < PROCS; i++)
        proc_start(&p[i]);
    char err[256];
    wsel_host *h;
    wsel_router *r;
    assert_int_equal(wsel_host_create(NULL, &h), 0);
    wsel_router_options o = {.struct_size = sizeof(o), .block_size = BS, .host = h};
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    assert_int_equal(wsel_router_shm_start(r, region, 0, err, sizeof(err)), WSEL_EBUSY);
    assert_non_null(strstr(err, "slot"));
    wsel_router_destroy(r);
    wsel_host_destroy(h);
    for (uint32_t i = 0; i < PROCS; i++)
        proc_stop(&p[i]);
}

static void test_second_start_and_unformatted_region_are_refused(void **state)
{
    (void)state;
    proc a;
    proc_start(&a);
    char err[256];
    assert_int_equal(wsel_router_shm_start(a.router, region, 0, err, sizeof(err)),
                     WSEL_ESTATE);
    static uint64_t blank[64];
    wsel_router_sync_stop(a.router);
    assert_int_equal(wsel_router_shm_start(a.router, blank, 0, err, sizeof(err)),
                     WSEL_EINVAL);
    wsel_router_shm_poll(a.router); /* a no-op without the sync */
    proc_stop(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_process_sees_the_others_load_and_its_drop,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_process_leaves_no_load, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_killed_process_load_is_dropped_within_the_check,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_process_tag_tells_a_reused_pid_apart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_slot_of_a_reused_pid_is_dropped_within_the_check,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_region_refuses_one_more, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_start_and_unformatted_region_are_refused,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
