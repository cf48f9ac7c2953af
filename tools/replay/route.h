// SPDX-License-Identifier: Apache-2.0
/*
 * route.h -- `wsel replay --plugin`: the replay routes each request itself
 * through libwsel-router (a wsel_host with the policy loaded, one router
 * worker per --url with its --dp ranks, a KV index fed by routing history
 * or by the engines' KV events), sends it to the chosen engine with an
 * X-data-parallel-rank header, and tells the router the first token and
 * the end, so the policy receives each request's outcome.
 *
 * One replay at a time; every call from the replay's one thread.
 * OWNERSHIP: replay_route_open allocates, replay_route_close frees.
 */
#ifndef WSEL_TOOLS_REPLAY_ROUTE_H
#define WSEL_TOOLS_REPLAY_ROUTE_H

#include <stdio.h>

#include "replay.h"

typedef struct replay_route replay_route;

/* Create the host (seeded with --seed), load the policy, create the router
 * and add one worker per URL (worker id = the URL's index). Returns 0 or -1
 * with a message in err. */
int replay_route_open(replay_route **out, const replay_options *o, char *err,
                      size_t err_size);
/* NULL is a harmless no-op. */
void replay_route_close(replay_route *r);

/* Route request `q` (router request id = q->index + 1): 0 with the URL
 * index and rank, or a negative WSEL_E* (no eligible row). */
int replay_route_pick(replay_route *r, const replay_request *q, uint32_t *url,
                      uint32_t *rank);
/* The request's first token arrived. */
void replay_route_first_token(replay_route *r, uint64_t index);
/* The request ended (any status): its load leaves the rank and the policy
 * gets its outcome, with the engine's usage figures and the replay's
 * times (model time, as reported). */
void replay_route_finished(replay_route *r, const replay_result *res);

/* The routing: policy, answers, and requests per (URL, rank). */
void replay_route_report(FILE *out, const replay_route *r);
/* The same as a JSON object value (no key). */
void replay_route_json(FILE *out, const replay_route *r);

#endif
