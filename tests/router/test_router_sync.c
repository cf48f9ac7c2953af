// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_sync.c -- replica sync: two routers in this process share
 * their load over a real nats-server this suite starts on a free loopback
 * port (every test skipped, with a message, when the binary is missing):
 * a peer sees the load routed elsewhere and its drop (in its costs and
 * busy flags), a late joiner learns it, a goodbye drops it at once, a
 * replica gone without one is expired within two leases, malformed
 * messages are counted and ignored, and through a NATS kill and restart
 * both keep routing (no failure, counted as local) and converge again.
 * Every wait is for a condition, with a deadline.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#ifdef WSEL_TEST_HAVE_NATS
#include <nats/nats.h>
#endif

#include "wsel_router.h"

extern char **environ;

#define BS        4u
#define PERIOD_MS 100u
#define DEADLINE  10000u /* ms: any wait that is not a measured bound */

static const char *nats_bin;
static char port[16];
static pid_t server = -1;
static uint32_t busy_requests; /* replica_start's busy_active_requests */
static uint32_t echo_us;       /* replica_start's echo_us (0: the default) */

typedef struct replica {
    wsel_host *host;
    wsel_router *router;
} replica;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Poll until cond(a, b) holds or ms pass; 1 if it held. */
static int wait_for(int (*cond)(replica *, replica *), replica *a, replica *b, uint64_t ms)
{
    uint64_t end = now_ms() + ms;
    for (;;) {
        if (cond(a, b))
            return 1;
        if (now_ms() > end)
            return 0;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

/* --- the server ---------------------------------------------------------- */

static const char *find_nats_server(void)
{
    static const char *const paths[] = {"/usr/sbin/nats-server", "/usr/bin/nats-server",
                                        "/usr/local/bin/nats-server"};
    const char *env = getenv("WSEL_NATS_SERVER");
    if (env && access(env, X_OK) == 0)
        return env;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

static int connect_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static int server_up(replica *a, replica *b)
{
    (void)a;
    (void)b;
    return connect_port();
}

static void server_start(void)
{
    char *argv[] = {(char *)nats_bin, "-a", "127.0.0.1", "-p", port, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
    assert_int_equal(posix_spawn(&server, nats_bin, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    assert_true(wait_for(server_up, NULL, NULL, DEADLINE));
}

static void server_kill(void)
{
    if (server <= 0)
        return;
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    server = -1;
}

/* 1 if this libwsel-router was built with replica sync. */
static int library_syncs(void)
{
    wsel_host *host;
    wsel_router *r;
    char err[256];
    int ok = 0;
    if (wsel_host_create(NULL, &host) != 0)
        return 0;
    wsel_router_options o = {.struct_size = sizeof(o), .host = host};
    if (wsel_router_create(&o, &r, err, sizeof(err)) == 0) {
        wsel_router_sync_options so = {
            .struct_size = sizeof(so), .url = "nats://127.0.0.1:1", .replica_id = 1};
        ok = wsel_router_sync_start(r, &so, err, sizeof(err)) != WSEL_ESTATE;
        /* what the nginx module asks at configuration time says the same */
        if (ok != wsel_router_sync_available()) {
            printf("test_router_sync: wsel_router_sync_available says %d\n",
                   wsel_router_sync_available());
            abort();
        }
        if (!ok)
            printf("test_router_sync: %s: every server test skipped\n", err);
        wsel_router_destroy(r);
    }
    wsel_host_destroy(host);
    return ok;
}

static int group_setup(void **state)
{
    (void)state;
    if (!library_syncs())
        return 0;
    nats_bin = find_nats_server();
    if (!nats_bin) {
        printf("test_router_sync: nats-server not found (Debian package nats-server, "
               "or WSEL_NATS_SERVER): every test skipped\n");
        return 0;
    }
    /* A free loopback port: bind to 0, read it back, let it go. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));
    server_start();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    server_kill();
    return 0;
}

/* --- replicas ------------------------------------------------------------ */

#define NEED_SERVER()                                                                   \
    do {                                                                                \
        if (!nats_bin)                                                                  \
            skip();                                                                     \
    } while (0)

/* A router with workers 1 and 2 (one rank each), synced as replica id on
 * subject, or not synced with id 0. */
static void replica_start(replica *p, uint64_t id, const char *subject, uint32_t flags)
{
    char err[256];
    assert_int_equal(wsel_host_create(NULL, &p->host), 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = BS,
                             .busy_active_requests = busy_requests,
                             .host = p->host};
    assert_int_equal(wsel_router_create(&o, &p->router, err, sizeof(err)), 0);
    for (uint64_t w = 1; w <= 2; w++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%llu", (unsigned long long)(8000 + w));
        wsel_router_worker wk = {.worker_id = w, .address = addr, .dp_size = 1};
        assert_int_equal(wsel_router_add_worker(p->router, &wk, err, sizeof(err)), 0);
    }
    if (id == 0)
        return;
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%s", port);
    wsel_router_sync_options so = {.struct_size = sizeof(so),
                                   .flags = flags,
                                   .url = url,
                                   .subject = subject,
                                   .replica_id = id,
                                   .period_ms = PERIOD_MS,
                                   .reconnect_ms = 20,
                                   .echo_us = echo_us};
    assert_int_equal(wsel_router_sync_start(p->router, &so, err, sizeof(err)), 0);
}

static void replica_stop(replica *p)
{
    wsel_router_destroy(p->router);
    wsel_host_destroy(p->host);
    p->router = NULL;
}

/* Route a 16-token prompt unique to seed; 0 or the router's error. */
static int32_t route(replica *p, uint32_t seed, wsel_route_result *res)
{
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = seed * 1000u + i;
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 16};
    return wsel_router_route(p->router, &q, res);
}

static wsel_router_sync_counters counters(replica *p)
{
    wsel_router_sync_counters c = {.struct_size = sizeof(c)};
    assert_int_equal(wsel_router_sync_read_counters(p->router, &c), 0);
    return c;
}

/* b's view of the others equals a's own load, row by row. */
static int sees(replica *b, replica *a)
{
    wsel_router_rank_info own[2], seen[2];
    assert_int_equal(wsel_router_read_ranks(a->router, own, 2), 2);
    assert_int_equal(wsel_router_sync_read_ranks(b->router, seen, 2), 2);
    for (int i = 0; i < 2; i++)
        if (own[i].active_requests != seen[i].active_requests ||
            own[i].active_prefill_tokens != seen[i].active_prefill_tokens ||
            own[i].active_blocks != seen[i].active_blocks)
            return 0;
    return 1;
}

static int agree(replica *a, replica *b)
{
    return sees(b, a) && sees(a, b);
}

/* The requests in flight b sees from the others. */
static uint32_t seen_requests(replica *b)
{
    wsel_router_rank_info seen[2];
    assert_int_equal(wsel_router_sync_read_ranks(b->router, seen, 2), 2);
    return seen[0].active_requests + seen[1].active_requests;
}

static int sees_none(replica *b, replica *unused)
{
    (void)unused;
    return seen_requests(b) == 0;
}

static int both_connected(replica *a, replica *b)
{
    return counters(a).connected && counters(b).connected;
}

static int both_disconnected(replica *a, replica *b)
{
    return !counters(a).connected && !counters(b).connected;
}

/* --- tests --------------------------------------------------------------- */

static void test_peer_sees_routed_load_and_its_drop(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    replica_start(&a, 1, "t.see", 0);
    replica_start(&b, 2, "t.see", 0);
    assert_true(wait_for(both_connected, &a, &b, DEADLINE));
    wsel_route_result res[4];
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(route(&a, i + 1, &res[i]), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    assert_int_equal(seen_requests(&b), 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(wsel_router_first_token(a.router, res[i].request_id), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(wsel_router_finished(a.router, res[i].request_id), 0);
    assert_true(wait_for(sees_none, &b, NULL, DEADLINE));
    wsel_router_sync_counters cb = counters(&b);
    assert_true(cb.messages_applied > 0);
    assert_int_equal(cb.messages_bad, 0);
    assert_int_equal(cb.replicas_live, 1);
    replica_stop(&a);
    replica_stop(&b);
}

static void test_route_avoids_the_rank_a_peer_loaded(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    replica_start(&a, 1, "t.avoid", 0);
    /* b's own routes each count once: the echo would make a tie. */
    replica_start(&b, 2, "t.avoid", WSEL_ROUTER_SYNC_NO_ECHO);
    assert_true(wait_for(both_connected, &a, &b, DEADLINE));
    wsel_route_result ra, rb;
    assert_int_equal(route(&a, 7, &ra), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    /* The same cost on both ranks but for a's request: b takes the other. */
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(route(&b, 100 + i, &rb), 0);
        assert_int_not_equal(rb.worker_id, ra.worker_id);
        assert_int_equal(wsel_router_finished(b.router, rb.request_id), 0);
    }
    replica_stop(&a);
    replica_stop(&b);
}

static int b_sees_a_live(replica *b, replica *unused)
{
    (void)unused;
    return counters(b).replicas_live == 1;
}

static void test_echo_counts_own_routes_once_per_live_peer(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    echo_us = 60u * 1000u * 1000u; /* the whole test: no clock in the way */
    replica_start(&a, 1, "t.echo", 0);
    replica_start(&b, 2, "t.echo", 0);
    echo_us = 0;
    assert_true(wait_for(both_connected, &a, &b, DEADLINE));
    wsel_route_result ra, rb1, rb2;
    assert_int_equal(route(&a, 7, &ra), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    assert_true(wait_for(b_sees_a_live, &b, NULL, DEADLINE));
    /* b's first route takes the rank a left empty; its second sees there
     * b's own request and its echo (one live peer), 2 against a's 1. */
    assert_int_equal(route(&b, 100, &rb1), 0);
    assert_int_not_equal(rb1.worker_id, ra.worker_id);
    assert_int_equal(route(&b, 101, &rb2), 0);
    assert_int_equal(rb2.worker_id, ra.worker_id);
    assert_int_equal(counters(&b).echo_routes, 2);
    /* The echo is in no published or read load: a sees b's 2 requests. */
    assert_int_equal(seen_requests(&b), 1);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    assert_int_equal(seen_requests(&a), 2);
    replica_stop(&a);
    replica_stop(&b);
}

static void test_busy_flag_counts_the_peers_requests(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    busy_requests = 1;
    replica_start(&a, 1, "t.busy", 0);
    replica_start(&b, 2, "t.busy", 0);
    busy_requests = 0;
    wsel_route_result ra;
    assert_int_equal(route(&a, 1, &ra), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    wsel_router_rank_info rows[2];
    assert_int_equal(wsel_router_read_ranks(b.router, rows, 2), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rows[i].active_requests, 0); /* b's own: none */
        assert_int_equal(rows[i].flags & WSEL_ROW_BUSY,
                         rows[i].worker_id == ra.worker_id ? WSEL_ROW_BUSY : 0);
    }
    replica_stop(&a);
    replica_stop(&b);
}

static void test_late_joiner_learns_the_current_load(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    replica_start(&a, 1, "t.late", 0);
    wsel_route_result res;
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(route(&a, i + 1, &res), 0);
    replica_start(&b, 2, "t.late", 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    assert_int_equal(seen_requests(&b), 3);
    replica_stop(&a);
    replica_stop(&b);
}

static void test_goodbye_drops_the_load_at_once(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    replica_start(&a, 1, "t.bye", 0);
    replica_start(&b, 2, "t.bye", 0);
    wsel_route_result res;
    assert_int_equal(route(&a, 1, &res), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    replica_stop(&a);
    assert_true(wait_for(sees_none, &b, NULL, DEADLINE));
    wsel_router_sync_counters cb = counters(&b);
    assert_int_equal(cb.goodbyes, 1);
    assert_int_equal(cb.replicas_live, 0);
    replica_stop(&b);
}

static void test_dead_replica_load_expires_within_two_leases(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    replica_start(&a, 1, "t.dead", WSEL_ROUTER_SYNC_NO_GOODBYE);
    replica_start(&b, 2, "t.dead", 0);
    wsel_route_result res;
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(route(&a, i + 1, &res), 0);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    uint64_t t0 = now_ms();
    replica_stop(&a);
    /* The bound is the product's: lease = 3 periods (the default). */
    assert_true(wait_for(sees_none, &b, NULL, 2 * 3 * PERIOD_MS));
    printf("dead replica's load gone after %llu ms (lease %u ms)\n",
           (unsigned long long)(now_ms() - t0), 3 * PERIOD_MS);
    wsel_router_sync_counters cb = counters(&b);
    assert_int_equal(cb.goodbyes, 0);
    assert_int_equal(cb.replicas_expired, 1);
    replica_stop(&b);
}

/* Route n requests on p from seed; every one answered. */
static void route_all(replica *p, uint32_t seed, uint32_t n)
{
    wsel_route_result res;
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(route(p, seed + i, &res), 0);
}

static void test_nats_restart_keeps_routing_and_converges(void **state)
{
    (void)state;
    NEED_SERVER();
    replica a, b;
    replica_start(&a, 1, "t.restart", 0);
    replica_start(&b, 2, "t.restart", 0);
    route_all(&a, 1, 3);
    route_all(&b, 100, 2);
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    server_kill();
    assert_true(wait_for(both_disconnected, &a, &b, DEADLINE));
    route_all(&a, 200, 10);
    route_all(&b, 300, 10);
    assert_true(counters(&a).local_only_routes >= 10);
    assert_true(counters(&b).local_only_routes >= 10);
    server_start();
    assert_true(wait_for(both_connected, &a, &b, DEADLINE));
    assert_true(wait_for(agree, &a, &b, DEADLINE));
    assert_int_equal(seen_requests(&b), 13);
    assert_int_equal(seen_requests(&a), 12);
    wsel_router_sync_counters ca = counters(&a);
    assert_true(ca.disconnects >= 1 && ca.reconnects >= 1);
    replica_stop(&a);
    replica_stop(&b);
}

static int got_bad(replica *b, replica *unused)
{
    (void)unused;
    return counters(b).messages_bad >= 2;
}

/* Garbage and a header whose count disagrees with its length, published
 * on the fleet's subject by a plain NATS client: counted, nothing applied. */
static void test_malformed_messages_are_counted_and_ignored(void **state)
{
    (void)state;
    NEED_SERVER();
#ifdef WSEL_TEST_HAVE_NATS
    replica b;
    replica_start(&b, 2, "t.bad", 0);
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%s", port);
    natsConnection *nc = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, url), NATS_OK);
    uint8_t msg[40] = {'W', 'S', 'Y', '1', 1, 0, 0, 0, 7};
    msg[24] = 5; /* five records claimed, none sent */
    assert_int_equal(natsConnection_Publish(nc, "t.bad", "garbage", 7), NATS_OK);
    assert_int_equal(natsConnection_Publish(nc, "t.bad", msg, 32), NATS_OK);
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    assert_true(wait_for(got_bad, &b, NULL, DEADLINE));
    wsel_router_sync_counters c = counters(&b);
    assert_int_equal(c.messages_applied, 0);
    assert_int_equal(c.replicas_live, 0);
    assert_int_equal(seen_requests(&b), 0);
    natsConnection_Destroy(nc);
    replica_stop(&b);
#else
    skip();
#endif
}

static void test_unreachable_server_routes_locally(void **state)
{
    (void)state;
    replica a;
    replica_start(&a, 0, NULL, 0);
    char err[256];
    wsel_router_sync_options so = {.struct_size = sizeof(so),
                                   .url = "nats://127.0.0.1:1",
                                   .replica_id = 9,
                                   .period_ms = PERIOD_MS,
                                   .reconnect_ms = 20};
    int32_t rc = wsel_router_sync_start(a.router, &so, err, sizeof(err));
    if (rc == WSEL_ESTATE) { /* built without libnats */
        printf("test_router_sync: %s\n", err);
        replica_stop(&a);
        skip();
    }
    assert_int_equal(rc, 0);
    route_all(&a, 1, 5);
    wsel_router_sync_counters c = counters(&a);
    assert_int_equal(c.connected, 0);
    assert_int_equal(c.local_only_routes, 5);
    replica_stop(&a);
}

static void test_refuses_bad_options(void **state)
{
    (void)state;
    replica a;
    replica_start(&a, 0, NULL, 0);
    char err[256];
    wsel_router_sync_options so = {.struct_size = sizeof(so), .replica_id = 1};
    assert_int_equal(wsel_router_sync_start(a.router, &so, err, sizeof(err)), WSEL_EINVAL);
    so.url = "nats://127.0.0.1:1";
    so.replica_id = 0;
    assert_int_equal(wsel_router_sync_start(a.router, &so, err, sizeof(err)), WSEL_EINVAL);
    assert_int_equal(wsel_router_sync_start(NULL, &so, err, sizeof(err)), WSEL_EINVAL);
    wsel_router_sync_counters c = {.struct_size = sizeof(c)};
    assert_int_equal(wsel_router_sync_read_counters(a.router, &c), 0);
    assert_int_equal(c.connected + c.updates_sent, 0);
    wsel_router_sync_stop(a.router); /* not started: a no-op */
    wsel_router_sync_stop(NULL);
    replica_stop(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_bad_options),
        cmocka_unit_test(test_unreachable_server_routes_locally),
        cmocka_unit_test(test_peer_sees_routed_load_and_its_drop),
        cmocka_unit_test(test_route_avoids_the_rank_a_peer_loaded),
        cmocka_unit_test(test_echo_counts_own_routes_once_per_live_peer),
        cmocka_unit_test(test_busy_flag_counts_the_peers_requests),
        cmocka_unit_test(test_late_joiner_learns_the_current_load),
        cmocka_unit_test(test_goodbye_drops_the_load_at_once),
        cmocka_unit_test(test_dead_replica_load_expires_within_two_leases),
        cmocka_unit_test(test_malformed_messages_are_counted_and_ignored),
        cmocka_unit_test(test_nats_restart_keeps_routing_and_converges),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
