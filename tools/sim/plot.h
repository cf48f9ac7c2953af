// SPDX-License-Identifier: Apache-2.0
/*
 * plot.h -- `wsel sim --plot DIR`: PNG charts through gnuplot.
 *
 * Collects, per policy, the TTFT samples, the active tokens of each
 * worker's busiest rank sampled once per simulated second, and the flicker rate per
 * 10-second window; then writes DIR/NAME.dat data files and DIR/charts.gp, and runs
 * `gnuplot charts.gp` in DIR (fork/exec) to draw ttft_cdf.png,
 * load_<policy>.png and flicker.png. Not thread-safe. OWNERSHIP: the
 * sim_plot owns its samples; sim_plot_close frees them.
 */
#ifndef WSEL_SIM_PLOT_H
#define WSEL_SIM_PLOT_H

#include <stdint.h>

typedef struct sim_plot sim_plot;

/* Check that gnuplot can be run and DIR can be created; 0 or -1 after a
 * message on stderr naming what is missing. */
int sim_plot_open(sim_plot **out, const char *dir, uint32_t num_workers);
/* Start the series of policy `label` (kept by pointer). */
int sim_plot_begin(sim_plot *p, const char *label);
void sim_plot_ttft(sim_plot *p, double ttft_ms);
void sim_plot_route(sim_plot *p, int64_t now_ns, uint32_t worker, int flicker);
void sim_plot_load(sim_plot *p, int64_t now_ns, const uint64_t *worker_tokens,
                   uint32_t num_workers);
/* Write the data and script, run gnuplot; 0 or -1 after a message. */
int sim_plot_render(sim_plot *p);
/* NULL is a harmless no-op. */
void sim_plot_close(sim_plot *p);

#endif
