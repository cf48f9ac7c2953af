// SPDX-License-Identifier: Apache-2.0
/*
 * step_model.h -- Dynamo mocker's polynomial engine model, the default of
 * `wsel sim` (docs/sim.md "Step time"): the time of one rank's step as a
 * prefill pass plus a decode pass. Header-only so that the simulator
 * (sim_step_ms) and the diagnostic router that predicts with the same
 * model (sim/model_greedy/) share one copy of the constants.
 * Pure functions; any thread.
 */
#ifndef WSEL_SIM_STEP_MODEL_H
#define WSEL_SIM_STEP_MODEL_H

/* The prefill pass of `tokens` new tokens, in ms; 0 for none. */
static inline double sim_poly_prefill_ms(double tokens)
{
    if (tokens <= 0)
        return 0;
    return 4.209989e-7 * tokens * tokens + 1.518344e-2 * tokens + 16.50142;
}

/* The decode pass at KV utilisation u in [0, 1] (the rank's running
 * sequences' KV tokens over its capacity), in ms; at least 1 ms. */
static inline double sim_poly_decode_ms(double u)
{
    double d = -25.74 * u * u + 54.01 * u + 5.74;
    return d > 1.0 ? d : 1.0;
}

#endif
