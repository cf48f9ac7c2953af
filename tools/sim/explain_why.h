// SPDX-License-Identifier: Apache-2.0
/*
 * explain_why.h -- fill one sim_explain_record from the request, the table
 * the host built, the host's answer and (when the plugin has a score
 * function) the scores: the rows that mattered, their order, the chosen
 * row's probability when it was sampled, and the one-line "why".
 * Not thread-safe. OWNERSHIP: every pointer the caller's, read during the
 * call; `order` is scratch of table->num_rows entries.
 */
#ifndef WSEL_SIM_EXPLAIN_WHY_H
#define WSEL_SIM_EXPLAIN_WHY_H

#include "explain.h"

/* Fills everything of *r but index, answer, fallback and policy, which the
 * caller sets first (the "why" reads answer and fallback). `scores` NULL:
 * the keys are the default costs. `has_temperature` / `temperature`: the
 * plugin's "temperature" parameter as configured, when it has one. */
void sim_explain_fill(sim_explain_record *r, const wsel_request *request,
                      const wsel_table *table, const wsel_choice *choice,
                      const double *scores, uint32_t *order, int has_temperature,
                      double temperature);

#endif
