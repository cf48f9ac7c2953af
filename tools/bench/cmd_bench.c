// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_bench.c -- `wsel bench`: select and score latency, host overhead,
 * allocations per select and per score, the cost of building a table, per
 * plugin and table size, and a pipeline of three scorers against its most
 * expensive child. The method is in docs/bench.md; the loops are in
 * bench_run.c.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "commands.h"
#include "options.h"
#include "plugin_path.h"

#define MAX_PLUGINS 32
#define MAX_ROWS    16

/* Exit code CTest reads as "skipped" (SKIP_RETURN_CODE). */
#define EXIT_SKIPPED 77

typedef struct bench_args {
    const char *plugins[MAX_PLUGINS];
    uint32_t num_plugins;
    uint32_t rows[MAX_ROWS];
    uint32_t num_rows;
    uint32_t runs;
    uint32_t selects; /* 0 = by size */
    double temperature;
    int json, alloc_check, scale_check, via, callgrind_build, pipeline;
    const char *callgrind_one;
    const char *config; /* --config: for the --plugin and --callgrind-one given */
} bench_args;

#define BENCH_MAX_COUNT 1000000 /* --runs, --selects, --rows sizes */

static int add_plugin(void *target, const cli_value *v)
{
    bench_args *a = target;
    if (a->num_plugins == MAX_PLUGINS)
        return cli_fail(v, "at most %d --plugin", MAX_PLUGINS);
    a->plugins[a->num_plugins++] = v->text;
    return CLI_OK;
}

#define OFF(field) offsetof(bench_args, field)

static const cli_option bench_option_table[] = {
    {CLI_OPT("plugin", "P",
             "measure P (repeatable; default every bundled plugin\n"
             "and the pipeline below)",
             NULL),
     CLI_AS_CALL(add_plugin)},
    {CLI_OPT("pipeline", NULL,
             "also measure pipeline with scorers softmax, p2c and\n"
             "dpgroup, and its ratio to its most expensive child",
             NULL),
     CLI_AS_FLAG(OFF(pipeline))},
    {CLI_OPT("config", "JSON",
             "configuration of every --plugin given (and of\n"
             "--callgrind-one)",
             "each plugin's defaults"),
     CLI_AS_STR(OFF(config))},
    {CLI_OPT("rows", "LIST", "table sizes, comma-separated",
             "8,64,512,1024,4096,16384,65536"),
     CLI_AS_U32_LIST(OFF(rows), OFF(num_rows), MAX_ROWS, 1, BENCH_MAX_COUNT)},
    {CLI_OPT("runs", "N", "runs per measurement; medians are reported", "5"),
     CLI_AS_U32(OFF(runs), 1, BENCH_MAX_COUNT)},
    {CLI_OPT("selects", "N", "timed selects per run",
             "20000; 5000 past 1024 rows, 1000 past 16384"),
     CLI_AS_U32(OFF(selects), 1, BENCH_MAX_COUNT)},
    {CLI_OPT("temperature", "T",
             "the requests' temperature (Dynamo's default); the\n"
             "default run adds softmax at T=0.5, where it samples",
             "0"),
     CLI_AS_DOUBLE(OFF(temperature), 0, 100)},
    {CLI_OPT("json", NULL, "print JSON", NULL), CLI_AS_FLAG(OFF(json))},
    {CLI_OPT("alloc-check", NULL,
             "fail if any select or score allocates (quick; for CTest)", NULL),
     CLI_AS_FLAG(OFF(alloc_check))},
    {CLI_OPT("scale-check", NULL,
             "fail if any select or score errs or the host falls\n"
             "back, at each --rows (quick; for CTest)",
             NULL),
     CLI_AS_FLAG(OFF(scale_check))},
    {CLI_OPT("callgrind-one", "P",
             "run --selects selects of P for callgrind\n"
             "(bench/callgrind.sh)",
             NULL),
     CLI_AS_STR(OFF(callgrind_one))},
    {CLI_OPT("host", NULL, "with --callgrind-one: through wsel_host_select", NULL),
     CLI_AS_FLAG(OFF(via)), .value = 1},
    {CLI_OPT("score", NULL, "with --callgrind-one: the plugin's score instead", NULL),
     CLI_AS_FLAG(OFF(via)), .value = 2},
    {CLI_OPT("callgrind-build", NULL,
             "run --selects wsel_table_build calls for callgrind", NULL),
     CLI_AS_FLAG(OFF(callgrind_build))},
};
static const cli_group bench_options = {NULL, CLI_TABLE(bench_option_table), 0};
static const cli_group *const bench_groups[] = {&bench_options};

static const cli_command bench_command = {
    .name = "wsel bench",
    .usage = "[--plugin NAME|PATH]... [--pipeline] [--rows LIST]\n"
             "                  [--json] [--runs N] [--selects N] [--temperature T]\n"
             "       wsel bench --alloc-check [--plugin NAME|PATH]... [--pipeline]\n"
             "       wsel bench --scale-check [--plugin NAME|PATH]... [--rows LIST]\n"
             "       wsel bench --callgrind-one PLUGIN [--config JSON] [--rows N]\n"
             "                  [--selects N] [--host|--score]\n"
             "       wsel bench --callgrind-build [--rows N] [--selects N]",
    .about = "Measure select latency per plugin, directly and through the host, and\n"
             "score latency (directly) for plugins with a score function.",
    CLI_GROUPS(bench_groups),
};

/* 0 with *a filled, or CLI_HELP / CLI_USAGE with a message in err. */
static int parse_args(int argc, char **argv, bench_args *a, char *err, size_t err_size)
{
    static const uint32_t default_rows[] = {8, 64, 512, 1024, 4096, 16384, 65536};
    memset(a, 0, sizeof(*a));
    memcpy(a->rows, default_rows, sizeof(default_rows));
    a->num_rows = sizeof(default_rows) / sizeof(default_rows[0]);
    a->runs = 5;
    return cli_parse(&bench_command, a, argc, argv, err, err_size);
}

/* Timed selects per run when --selects is not given. */
static uint32_t default_selects(uint32_t rows)
{
    return rows > 16384 ? 1000 : rows > 1024 ? 5000 : 20000;
}

/* One line of the benchmark: a plugin at a request temperature, with a
 * configuration (NULL = defaults). */
typedef struct bench_entry {
    const char *name;
    const char *label; /* printed name; NULL = name (with @T=) */
    char path[PATH_MAX];
    double temperature;
    const char *config;
} bench_entry;

/* The pipeline `wsel bench` measures: three scorers, the argmin picker. */
#define PIPELINE_LABEL "pipeline3"
#define PIPELINE_CONFIG                                                                  \
    "{\"scorers\": [{\"path\": \"softmax\"}, {\"path\": \"p2c\"}, "                      \
    "{\"path\": \"dpgroup\"}]}"
static const char *const pipeline_children[] = {"softmax", "p2c", "dpgroup"};
#define PIPELINE_CHILDREN 3u

/* The pipeline's line, when pipeline.so is found (a note otherwise). */
static uint32_t add_pipeline(bench_entry *out, uint32_t n)
{
    char err[2400];
    if (n == MAX_PLUGINS ||
        wsel_plugin_resolve("pipeline", out[n].path, PATH_MAX, err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel bench: pipeline not measured: %s\n", err);
        return n;
    }
    out[n].name = "pipeline";
    out[n].label = PIPELINE_LABEL;
    out[n].temperature = 0;
    out[n].config = PIPELINE_CONFIG;
    return n + 1;
}

/*
 * The plugins to measure: the ones given, else the default bundled set
 * (plus softmax at T=0.5, where it samples rather than taking the argmin,
 * and the three-scorer pipeline). Sets *bad when a plugin given by the
 * user cannot be found.
 */
static uint32_t plugin_list(const bench_args *a, bench_entry *out, int *bad)
{
    char err[2400];
    uint32_t n = 0;
    *bad = 0;
    memset(out, 0, MAX_PLUGINS * sizeof(*out));
    const char *bundled[MAX_PLUGINS];
    uint32_t count = a->num_plugins ? a->num_plugins
                                    : wsel_bundled_set(SIM_PLUGINS_DEFAULT, bundled,
                                                       MAX_PLUGINS);
    for (uint32_t i = 0; i < count && n + 1 < MAX_PLUGINS; i++) {
        const char *spec = a->num_plugins ? a->plugins[i] : bundled[i];
        if (wsel_plugin_resolve(spec, out[n].path, PATH_MAX, err, sizeof(err)) < 0) {
            fprintf(stderr, "wsel bench: %s%s\n", err,
                    a->num_plugins ? "" : " (skipped)");
            *bad |= a->num_plugins != 0;
            continue;
        }
        out[n].name = spec;
        out[n].temperature = a->temperature;
        out[n].config = a->num_plugins ? a->config : NULL;
        n++;
        if (!a->num_plugins && strcmp(spec, "softmax") == 0 && a->temperature == 0) {
            out[n] = out[n - 1];
            out[n].temperature = 0.5;
            n++;
        }
    }
    if (!a->num_plugins || a->pipeline)
        n = add_pipeline(out, n);
    return n;
}

static void machine_description(char *out, size_t size, int json)
{
    char cpu[160] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *colon = strchr(line, ':');
                if (colon) {
                    snprintf(cpu, sizeof(cpu), "%s", colon + 2);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    struct utsname u;
    if (uname(&u) != 0)
        snprintf(u.release, sizeof(u.release), "unknown");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (json)
        snprintf(out, size,
                 "{\"cpu\":\"%s\",\"cores\":%ld,\"kernel\":\"%s\",\"compiler\":\"%s\","
                 "\"timer_overhead_ns\":%.1f}",
                 cpu, cores, u.release, __VERSION__, bench_timer_overhead_ns());
    else
        snprintf(out, size, "%s, %ld cores, Linux %s, compiler %s, clock %.0f ns", cpu,
                 cores, u.release, __VERSION__, bench_timer_overhead_ns());
}

/* The host's overhead budget (host p50 less direct p50): 50 ns, and at
 * 1,024 rows the table guard's 0.3 ns a row on top, a copy and a compare
 * of the flags and costs, 9 bytes a row (host/table_guard.c); a select
 * under ~5 ns a row cannot keep that within 5 % of its own time
 * (docs/bench.md, "Host overhead at 1,024 rows"). */
#define OVERHEAD_FIXED_NS     50.0
#define OVERHEAD_GUARD_NS_ROW 0.3

/* The budget a result is held to (docs/bench.md), or NULL for none. */
static const char *budget_verdict(const char *name, const bench_result *r)
{
    double overhead = r->host_ns_p50 - r->direct_ns_p50;
    if (r->rows == 8)
        return overhead <= OVERHEAD_FIXED_NS ? "ok (overhead <= 50 ns)"
                                             : "OVER (overhead > 50 ns)";
    if (r->rows != 1024)
        return NULL;
    int overhead_ok = overhead <= OVERHEAD_FIXED_NS + OVERHEAD_GUARD_NS_ROW * r->rows;
    const char *over = "OVER (overhead > 50 ns + 0.3 ns/row)";
    double limit = strcmp(name, "softmax") == 0 ? 5000 : 1000;
    int argmin_class = strcmp(name, "p2c") == 0 || strcmp(name, "hysteresis") == 0 ||
                       strcmp(name, "chash") == 0 || strcmp(name, "roundrobin") == 0;
    if (!argmin_class && strcmp(name, "softmax") != 0)
        return overhead_ok ? "ok (overhead <= 50 ns + 0.3 ns/row)" : over;
    if (r->host_ns_p50 > limit)
        return limit > 1000 ? "OVER (> 5 us)" : "OVER (> 1 us)";
    return overhead_ok ? "ok" : over;
}

/* " and 2000 scores" when the plugin at `path` has a score function. */
static const char *score_note(const char *path)
{
    wsel_library *lib = NULL;
    char err[256];
    if (wsel_library_open(path, NULL, &lib, err, sizeof(err)) < 0)
        return "";
    int has = wsel_library_plugin(lib)->score != NULL;
    wsel_library_close(lib);
    return has ? " and 2000 scores" : " (no score function)";
}

static int run_alloc_check(const bench_args *a)
{
    if (!bench_alloc_available()) {
        printf("SKIP allocation counting is unavailable in this build (sanitizers)\n");
        return EXIT_SKIPPED;
    }
    static bench_entry entries[MAX_PLUGINS];
    int bad = 0;
    uint32_t n = plugin_list(a, entries, &bad);
    int failed = bad;
    static const uint32_t sizes[] = {8, 1024};
    for (uint32_t p = 0; p < n; p++) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            char err[1024] = "";
            uint64_t direct = 0, host = 0, score = 0;
            if (entries[p].temperature != a->temperature)
                continue; /* the extra softmax line: same code path */
            const char *name = entries[p].label ? entries[p].label : entries[p].name;
            if (bench_count_allocs(entries[p].path, entries[p].config, sizes[k], 2000,
                                   &direct, &host, &score, err, sizeof(err)) < 0) {
                printf("FAIL %s at %u rows: %s\n", name, sizes[k], err);
                failed = 1;
            } else if (direct || host || score) {
                printf("FAIL %s at %u rows: %llu allocations in 2000 direct selects, "
                       "%llu through the host, %llu in 2000 scores\n",
                       name, sizes[k], (unsigned long long)direct,
                       (unsigned long long)host, (unsigned long long)score);
                failed = 1;
            } else {
                printf("PASS %s at %u rows: 0 allocations in 2x2000 selects%s\n", name,
                       sizes[k], score_note(entries[p].path));
            }
        }
    }
    if (n == 0) {
        fprintf(stderr, "wsel bench: no plugin to check\n");
        return WSEL_EXIT_FAILURE;
    }
    return failed ? WSEL_EXIT_FAILURE : WSEL_EXIT_OK;
}

/* --scale-check: a few selects and scores per plugin and size, after the
 * topology is reported; any error or host fallback fails. */
static int run_scale_check(const bench_args *a)
{
    static bench_entry entries[MAX_PLUGINS];
    int bad = 0;
    uint32_t n = plugin_list(a, entries, &bad);
    int failed = bad;
    uint32_t selects = a->selects ? a->selects : 16;
    for (uint32_t p = 0; p < n; p++) {
        if (entries[p].temperature != a->temperature)
            continue; /* the extra softmax line: same code path */
        const char *name = entries[p].label ? entries[p].label : entries[p].name;
        for (uint32_t k = 0; k < a->num_rows; k++) {
            char err[1024] = "";
            uint64_t fallbacks = 0;
            if (bench_scale_check(entries[p].path, entries[p].config, a->rows[k], selects,
                                  &fallbacks, err, sizeof(err)) < 0) {
                printf("FAIL %s at %u rows: %s\n", name, a->rows[k], err);
                failed = 1;
            } else if (fallbacks) {
                printf("FAIL %s at %u rows: the host fell back %llu times in %u "
                       "selects\n",
                       name, a->rows[k], (unsigned long long)fallbacks, selects);
                failed = 1;
            } else {
                printf("PASS %s at %u rows: %u selects, no error, no fallback\n", name,
                       a->rows[k], selects);
            }
        }
    }
    if (n == 0) {
        fprintf(stderr, "wsel bench: no plugin to check\n");
        return WSEL_EXIT_FAILURE;
    }
    return failed ? WSEL_EXIT_FAILURE : WSEL_EXIT_OK;
}

static int run_callgrind_one(const bench_args *a)
{
    char path[PATH_MAX], err[2400];
    if (wsel_plugin_resolve(a->callgrind_one, path, sizeof(path), err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    uint32_t rows = a->rows[0];
    if (a->num_rows == 5 && rows == 8) /* --rows not given */
        rows = 1024;
    uint32_t selects = a->selects ? a->selects : 1000;
    if (bench_callgrind(path, a->config, rows, selects, a->via, a->temperature, err,
                        sizeof(err)) < 0) {
        fprintf(stderr, "wsel: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    return WSEL_EXIT_OK;
}

static int run_callgrind_build(const bench_args *a)
{
    char err[1024] = "";
    uint32_t rows = a->num_rows == 5 && a->rows[0] == 8 ? 1024 : a->rows[0];
    if (bench_callgrind_build(rows, a->selects ? a->selects : 1000, err, sizeof(err)) <
        0) {
        fprintf(stderr, "wsel bench: wsel_table_build: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    return WSEL_EXIT_OK;
}

static void entry_label(const bench_entry *e, char *label, size_t size)
{
    if (e->label != NULL)
        snprintf(label, size, "%s", e->label);
    else if (e->temperature > 0)
        snprintf(label, size, "%s@T=%g", e->name, e->temperature);
    else
        snprintf(label, size, "%s", e->name);
}

static void print_result_text(const bench_entry *e, const bench_result *r)
{
    char label[64], score[48];
    entry_label(e, label, sizeof(label));
    const char *verdict = e->label ? NULL : budget_verdict(e->name, r);
    if (r->has_score)
        snprintf(score, sizeof(score), "%9.1f %9.1f", r->score_ns_p50, r->score_ns_p99);
    else
        snprintf(score, sizeof(score), "%9s %9s", "-", "-");
    printf("%-14s %6u %9.1f %9.1f %9.1f %7.3f %7.2f %s %7.2g  %s%s\n", label, r->rows,
           r->direct_ns_p50, r->host_ns_p50, r->host_ns_p99,
           r->direct_ns_p50 > 0 ? r->host_ns_p50 / r->direct_ns_p50 : 0.0,
           r->host_ns_p50 / r->rows, score,
           r->has_score ? r->allocs_per_select + r->allocs_per_score
                        : r->allocs_per_select,
           verdict ? verdict : "", r->fallbacks ? " (host fell back!)" : "");
}

/* Every result of the run, to set the pipeline beside its children. */
typedef struct bench_store {
    const bench_entry *entry[MAX_PLUGINS * MAX_ROWS];
    bench_result result[MAX_PLUGINS * MAX_ROWS];
    uint32_t count;
} bench_store;

static const bench_result *stored(const bench_store *st, const char *name, uint32_t rows)
{
    for (uint32_t i = 0; i < st->count; i++)
        if (st->entry[i]->label == NULL && st->entry[i]->temperature == 0 &&
            strcmp(st->entry[i]->name, name) == 0 && st->result[i].rows == rows)
            return &st->result[i];
    return NULL;
}

/*
 * The pipeline's ratio to its most expensive child, at each size both
 * were measured: the pipeline's direct select against each child's own
 * select and score (direct p50s; a child not measured in the run is
 * measured here). The floor (issue 17): at most 3x at 1,024 rows.
 */
static int print_pipeline_ratio(const bench_store *st, const bench_args *a,
                                const bench_config *base)
{
    int failed = 0, printed = 0;
    for (uint32_t i = 0; i < st->count; i++) {
        if (st->entry[i]->label == NULL || strcmp(st->entry[i]->label, PIPELINE_LABEL))
            continue;
        const bench_result *pipe = &st->result[i];
        double worst_select = 0, worst_score = 0;
        const char *worst_select_name = "?", *worst_score_name = "?";
        for (uint32_t c = 0; c < PIPELINE_CHILDREN; c++) {
            const char *name = pipeline_children[c];
            bench_result own;
            const bench_result *r = stored(st, name, pipe->rows);
            if (r == NULL) {
                char path[PATH_MAX], err[2400];
                bench_config cfg = *base;
                cfg.temperature = 0;
                cfg.config = NULL;
                cfg.selects_per_run =
                    a->selects ? a->selects : default_selects(pipe->rows);
                if (wsel_plugin_resolve(name, path, sizeof(path), err, sizeof(err)) < 0 ||
                    bench_plugin(path, pipe->rows, &cfg, &own, err, sizeof(err)) < 0) {
                    fprintf(stderr, "wsel bench: pipeline child %s: %s\n", name, err);
                    failed = 1;
                    continue;
                }
                r = &own;
            }
            if (r->direct_ns_p50 > worst_select) {
                worst_select = r->direct_ns_p50;
                worst_select_name = name;
            }
            if (r->has_score && r->score_ns_p50 > worst_score) {
                worst_score = r->score_ns_p50;
                worst_score_name = name;
            }
        }
        if (worst_select <= 0 || worst_score <= 0)
            continue;
        double ratio_select = pipe->direct_ns_p50 / worst_select;
        double ratio_score = pipe->direct_ns_p50 / worst_score;
        double worst = ratio_select > ratio_score ? ratio_select : ratio_score;
        if (a->json) {
            printf("%s{\"rows\":%u,\"scorers\":\"softmax,p2c,dpgroup\","
                   "\"select_ns_p50\":%.1f,\"child_select_ns_p50\":%.1f,"
                   "\"child_select\":\"%s\",\"child_score_ns_p50\":%.1f,"
                   "\"child_score\":\"%s\",\"ratio_to_select\":%.3f,"
                   "\"ratio_to_score\":%.3f}",
                   printed++ ? "," : ",\"pipeline\":[", pipe->rows, pipe->direct_ns_p50,
                   worst_select, worst_select_name, worst_score, worst_score_name,
                   ratio_select, ratio_score);
            continue;
        }
        printf("%s at %u rows (scorers softmax, p2c, dpgroup; argmin): select %.0f ns = "
               "%.2fx the most expensive child's select (%s %.0f ns), %.2fx its score "
               "(%s %.0f ns)%s\n",
               PIPELINE_LABEL, pipe->rows, pipe->direct_ns_p50, ratio_select,
               worst_select_name, worst_select, ratio_score, worst_score_name,
               worst_score,
               pipe->rows != 1024 ? ""
               : worst <= 3.0     ? "  ok (<= 3x)"
                                  : "  OVER (> 3x)");
    }
    if (a->json && printed)
        printf("]");
    return failed;
}

int wsel_cmd_bench(int argc, char **argv)
{
    bench_args a;
    char err[1024], machine[512];
    int rc = parse_args(argc, argv, &a, err, sizeof(err));
    if (rc != CLI_OK)
        return cli_report(&bench_command, rc, err);
    if (a.alloc_check)
        return run_alloc_check(&a);
    if (a.scale_check)
        return run_scale_check(&a);
    if (a.callgrind_one)
        return run_callgrind_one(&a);
    if (a.callgrind_build)
        return run_callgrind_build(&a);

    static bench_entry entries[MAX_PLUGINS];
    int bad = 0;
    uint32_t n = plugin_list(&a, entries, &bad);
    if (n == 0 || bad)
        return WSEL_EXIT_FAILURE;

    bench_config cfg = {.runs = a.runs, .warmup = 1000};
    double cost_ns = 0;
    if (bench_table_build(4096, &cfg, &cost_ns, err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel bench: wsel_table_build: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    machine_description(machine, sizeof(machine), a.json);
    if (a.json) {
        printf("{\"machine\":%s,\"cost_column_ns_per_row\":%.3f,\"results\":[", machine,
               cost_ns);
    } else {
        printf("machine: %s\n", machine);
        printf("cost column (wsel_table_build, 4096 rows): %.2f ns/row\n\n", cost_ns);
        printf("%-14s %6s %9s %9s %9s %7s %7s %9s %9s %7s  %s\n", "plugin", "rows",
               "direct50", "host50", "host99", "ratio", "ns/row", "score50", "score99",
               "allocs", "budget");
    }
    static bench_store store;
    store.count = 0;
    int failed = 0, first = 1;
    for (uint32_t p = 0; p < n; p++) {
        for (uint32_t k = 0; k < a.num_rows; k++) {
            cfg.selects_per_run =
                a.selects ? a.selects : default_selects(a.rows[k]);
            cfg.temperature = entries[p].temperature;
            cfg.config = entries[p].config;
            bench_result r;
            if (bench_plugin(entries[p].path, a.rows[k], &cfg, &r, err, sizeof(err)) <
                0) {
                fprintf(stderr, "wsel bench: %s\n", err);
                failed = 1;
                continue;
            }
            store.entry[store.count] = &entries[p];
            store.result[store.count++] = r;
            if (a.json) {
                char label[64], score[160] = "";
                entry_label(&entries[p], label, sizeof(label));
                if (r.has_score)
                    snprintf(score, sizeof(score),
                             ",\"score_ns_p50\":%.1f,\"score_ns_p99\":%.1f,"
                             "\"allocs_per_score\":%.4g",
                             r.score_ns_p50, r.score_ns_p99, r.allocs_per_score);
                printf("%s{\"plugin\":\"%s\",\"label\":\"%s\",\"temperature\":%g,"
                       "\"rows\":%u,\"batch\":%u,\"direct_ns_p50\":%.1f,"
                       "\"direct_ns_p99\":%.1f,\"host_ns_p50\":%.1f,\"host_ns_p99\":%.1f,"
                       "\"overhead_ratio\":%.4f,\"ns_per_row\":%.3f,"
                       "\"allocs_per_select\":%.4g,\"fallbacks\":%llu%s}",
                       first ? "" : ",", entries[p].name, label, entries[p].temperature,
                       r.rows, r.batch, r.direct_ns_p50, r.direct_ns_p99, r.host_ns_p50,
                       r.host_ns_p99,
                       r.direct_ns_p50 > 0 ? r.host_ns_p50 / r.direct_ns_p50 : 0.0,
                       r.host_ns_p50 / r.rows, r.allocs_per_select,
                       (unsigned long long)r.fallbacks, score);
                first = 0;
            } else {
                print_result_text(&entries[p], &r);
            }
            fflush(stdout);
        }
    }
    if (a.json)
        printf("]");
    else
        printf("\n");
    failed |= print_pipeline_ratio(&store, &a, &cfg);
    if (a.json)
        printf("}\n");
    return failed ? WSEL_EXIT_FAILURE : WSEL_EXIT_OK;
}
