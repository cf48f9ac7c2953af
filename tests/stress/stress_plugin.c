// SPDX-License-Identifier: Apache-2.0
/*
 * stress_plugin.c -- an instrumented policy for the switching stress tests.
 *
 * Built three times (tests/stress/CMakeLists.txt) with different names and
 * capabilities:
 *   stress_a       WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS
 *   stress_b       WSEL_CAP_CONCURRENT_SELECT
 *   stress_serial  no capability: the host must serialise its selects
 *
 * The plugin is its own referee. Each instance keeps an atomic count of the
 * selects inside it and a "destroyed" flag, and aborts the process (a crash
 * fails the test) when
 *   - a select enters an instance whose destroy has begun,
 *   - destroy runs while a select is inside the instance,
 *   - destroy runs twice on one instance,
 *   - two selects are inside a non-concurrent instance at once.
 * It keeps no global mutable state (wsel.h forbids it): the test counts
 * creates and destroys from the lifecycle lines each instance logs through
 * the host ("<name>: created instance", "<name>: destroyed instance").
 *
 * Parameters (one of every type, so tests/fuzz/fuzz_config.c can use it):
 *   pick             enum   argmin | first | last | cycle | faulty (argmin)
 *   spin             int    busy iterations inside select     (0)
 *   create_delay_ms  double time create() sleeps, in ms       (0)
 *   log_lifecycle    bool   log create and destroy            (true)
 *   gate_fd          int    a file descriptor create() reads one byte
 *                           from before it returns, after logging
 *                           "<name>: waiting at the gate"; -1: none  (-1)
 *
 * The gate lets a test hold create() for as long as it likes and know that
 * it is being held: what happens meanwhile is then proved by order, not by
 * how long a sleep lasted.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "wsel.h"

#ifndef STRESS_NAME
#error "STRESS_NAME must be defined by the build"
#endif
#ifndef STRESS_CAPS
#error "STRESS_CAPS must be defined by the build"
#endif

#define STRESS_MAGIC_LIVE 0x5354524553534c56ull /* "STRESSLV" */
#define STRESS_MAGIC_DEAD 0x5354524553534444ull /* "STRESSDD" */

enum { PICK_ARGMIN, PICK_FIRST, PICK_LAST, PICK_CYCLE, PICK_FAULTY };

typedef struct stress_instance {
    const wsel_host_api *host;
    /* Written only on the control thread: create, destroy. */
    uint64_t magic;
    uint32_t pick;
    uint32_t spin;
    int log_lifecycle;
    /* Selects currently inside this instance. */
    atomic_uint inside;
    /* Set when destroy begins; a select that sees it aborts. */
    atomic_uint destroyed;
    /* Next start row for PICK_CYCLE. */
    atomic_uint cursor;
} stress_instance;

static const char *const pick_choices[] = {"argmin", "first",  "last",
                                           "cycle",  "faulty", NULL};

static const wsel_param_def stress_params[] = {
    {
        .name = "pick",
        .doc = "how a row is chosen: argmin of cost, first, last or cycling eligible "
               "row, or "
               "faulty (cycles through an error, an out-of-range row, an excluded row, a "
               "good row)",
        .type = WSEL_PARAM_ENUM,
        .default_value = PICK_ARGMIN,
        .min_value = PICK_ARGMIN,
        .max_value = PICK_FAULTY,
        .choices = pick_choices,
    },
    {
        .name = "spin",
        .doc = "busy-loop iterations inside select, to widen race windows",
        .type = WSEL_PARAM_INT,
        .max_value = 1000000,
    },
    {
        .name = "create_delay_ms",
        .doc = "milliseconds create() sleeps before returning",
        .type = WSEL_PARAM_DOUBLE,
        .max_value = 10000,
    },
    {
        .name = "log_lifecycle",
        .doc = "log a line through the host on create and destroy",
        .type = WSEL_PARAM_BOOL,
        .default_value = 1,
        .max_value = 1,
    },
    {
        .name = "gate_fd",
        .doc = "file descriptor create() reads one byte from before returning (-1: none)",
        .type = WSEL_PARAM_INT,
        .default_value = -1,
        .min_value = -1,
        .max_value = 1048576,
    },
};

/* Report a broken guarantee and crash: the test process dies, the test fails. */
static void stress_violation(const char *what)
{
    fprintf(stderr, "%s: VIOLATION: %s\n", STRESS_NAME, what);
    abort();
}

static void stress_log(const stress_instance *s, const char *event)
{
    char line[96];

    if (!s->log_lifecycle)
        return;
    snprintf(line, sizeof line, "%s: %s instance", STRESS_NAME, event);
    s->host->log(s->host, WSEL_LOG_INFO, line);
}

static void stress_sleep_ms(double ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Announce that create() waits at the gate, then wait for one byte (or the
 * end of the pipe) on `fd`. */
static void stress_wait_at_gate(const wsel_host_api *host, int fd)
{
    char byte;

    if (fd < 0)
        return;
    host->log(host, WSEL_LOG_INFO, STRESS_NAME ": waiting at the gate");
    while (read(fd, &byte, 1) < 0 && errno == EINTR)
        ;
}

static int32_t stress_create(const wsel_host_api *host, const double *params,
                             uint32_t num_params, void **out_instance)
{
    stress_instance *s;

    if (!host || !params || !out_instance || num_params != 5)
        return WSEL_EINVAL;
    s = calloc(1, sizeof *s);
    if (!s)
        return WSEL_ENOMEM;
    s->host = host;
    s->magic = STRESS_MAGIC_LIVE;
    s->pick = (uint32_t)params[0];
    s->spin = (uint32_t)params[1];
    s->log_lifecycle = params[3] != 0;
    atomic_init(&s->inside, 0);
    atomic_init(&s->destroyed, 0);
    atomic_init(&s->cursor, 0);
    stress_sleep_ms(params[2]);
    stress_wait_at_gate(host, (int)params[4]);
    stress_log(s, "created");
    *out_instance = s;
    return 0;
}

static void stress_destroy(void *instance)
{
    stress_instance *s = instance;

    if (s->magic != STRESS_MAGIC_LIVE)
        stress_violation("destroy called on an instance that is not live");
    atomic_store(&s->destroyed, 1);
    /* A select already inside, or one entering now, is a broken grace
     * period. Look a few times to widen the window a little. */
    for (int i = 0; i < 64; i++) {
        if (atomic_load(&s->inside) != 0)
            stress_violation("destroy ran while a select was inside the instance");
    }
    stress_log(s, "destroyed");
    s->magic = STRESS_MAGIC_DEAD;
    free(s);
}

/* Eligible row at or after `start` (wrapping), or num_rows if none. */
static uint32_t stress_next_eligible(const wsel_table *t, uint32_t start)
{
    for (uint32_t k = 0; k < t->num_rows; k++) {
        uint32_t row = (start + k) % t->num_rows;
        if (!(t->flags[row] & WSEL_ROW_EXCLUDED))
            return row;
    }
    return t->num_rows;
}

/* The misbehaving policy: the host must replace three answers in four. */
static int32_t stress_pick_faulty(stress_instance *s, const wsel_table *t, uint32_t *row)
{
    switch (atomic_fetch_add(&s->cursor, 1) % 4) {
    case 0:
        return WSEL_EPLUGIN;
    case 1:
        *row = t->num_rows; /* out of range */
        return 0;
    case 2:
        for (uint32_t r = 0; r < t->num_rows; r++) {
            if (t->flags[r] & WSEL_ROW_EXCLUDED) {
                *row = r;
                return 0;
            }
        }
        /* No excluded row: fall through to a good answer. */
        /* fallthrough */
    default:
        *row = stress_next_eligible(t, 0);
        return *row < t->num_rows ? 0 : WSEL_ENOCANDIDATE;
    }
}

static int32_t stress_pick(stress_instance *s, const wsel_request *request,
                           const wsel_table *t, uint32_t *row)
{
    switch (s->pick) {
    case PICK_ARGMIN:
        return s->host->argmin(t->cost, t->flags, t->num_rows, WSEL_ROW_EXCLUDED,
                               request->rng, row);
    case PICK_FIRST:
        *row = stress_next_eligible(t, 0);
        break;
    case PICK_LAST:
        *row = t->num_rows;
        for (uint32_t r = t->num_rows; r-- > 0;) {
            if (!(t->flags[r] & WSEL_ROW_EXCLUDED)) {
                *row = r;
                break;
            }
        }
        break;
    case PICK_CYCLE:
        *row = stress_next_eligible(t, atomic_fetch_add(&s->cursor, 1) % t->num_rows);
        break;
    default:
        return stress_pick_faulty(s, t, row);
    }
    return *row < t->num_rows ? 0 : WSEL_ENOCANDIDATE;
}

static int32_t stress_select(void *instance, const wsel_request *request,
                             const wsel_table *table, wsel_choice *choice)
{
    stress_instance *s = instance;
    uint32_t row = 0;
    unsigned before;
    int32_t rc;

    if (atomic_load(&s->destroyed))
        stress_violation("select entered an instance whose destroy had begun");
    before = atomic_fetch_add(&s->inside, 1);
    if (!(STRESS_CAPS & WSEL_CAP_CONCURRENT_SELECT) && before != 0)
        stress_violation("two selects inside a non-concurrent instance");
    for (volatile uint32_t i = 0; i < s->spin; i++)
        ;
    rc = stress_pick(s, request, table, &row);
    if (atomic_load(&s->destroyed))
        stress_violation("destroy began while a select was inside the instance");
    atomic_fetch_sub(&s->inside, 1);
    if (rc == 0)
        choice->row = row;
    return rc;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = STRESS_CAPS,
    .name = STRESS_NAME,
    .version = "1.0.0",
    .description = "instrumented policy for the switching stress tests",
    .params = stress_params,
    .num_params = sizeof stress_params / sizeof stress_params[0],
    .param_def_size = sizeof(wsel_param_def),
    .create = stress_create,
    .destroy = stress_destroy,
    .select = stress_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
};
