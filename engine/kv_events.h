// SPDX-License-Identifier: Apache-2.0
/*
 * kv_events.h -- KV cache events on the wire as vLLM publishes them
 * (vllm/distributed/kv_events.py, ZmqEventPublisher): per DP rank a
 * ZeroMQ PUB socket, its port the base port + rank, sending three frames
 * per batch: the topic, an 8-byte big-endian sequence number (from 0, per
 * rank) and a msgpack KVEventBatch; optionally a ROUTER socket that
 * replays the last 10,000 batches from a requested sequence number and
 * ends with sequence -1 and an empty payload.
 *
 * Encoding (vLLM's msgspec structs, named-field maps, fields left at
 * their default omitted):
 *   KVEventBatch {"ts": float (unix s), "events": [...],
 *                 "data_parallel_rank": int}
 *   BlockStored  {"type": "BlockStored", "block_hashes": [uint...],
 *                 "parent_block_hash": uint | nil, "token_ids": [uint...],
 *                 "block_size": int, "lora_id": nil, "medium": "GPU",
 *                 "lora_name": nil}
 *   BlockRemoved {"type": "BlockRemoved", "block_hashes": [uint],
 *                 "medium": "GPU"}
 *
 * With ENG_KV_BATCH_ARRAY the batch is the array [ts, events, rank]
 * instead, the events still maps (the form vllm-router 0.1.17 decodes).
 *
 * Threads: stored/removed/flush from one thread (the model's); the
 * sockets belong to the publisher thread this module starts.
 */
#ifndef WSEL_ENGINE_KV_EVENTS_H
#define WSEL_ENGINE_KV_EVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct eng_kv eng_kv;

#define ENG_KV_BATCH_MAP   0
#define ENG_KV_BATCH_ARRAY 1
extern const char *const eng_kv_batch_names[]; /* "map", "array", NULL */

/* Bind rank r's PUB socket to `endpoint` with its port + r (port 0 or *:
 * any free port per rank) and, when replay_endpoint is not NULL, its
 * ROUTER likewise. Returns 0 or -1 with a message. */
int eng_kv_open(eng_kv **out, const char *endpoint, const char *replay_endpoint,
                const char *topic, uint32_t num_ranks, uint32_t block_size, char *err,
                size_t err_size);
/* Encode batches as ENG_KV_BATCH_*: before the first flush. */
void eng_kv_set_batch_form(eng_kv *kv, uint32_t form);
/* The endpoint rank `rank` is bound to ("" when there is none). */
const char *eng_kv_endpoint(const eng_kv *kv, uint32_t rank);
const char *eng_kv_replay_endpoint(const eng_kv *kv, uint32_t rank);

/* Queue an event for rank `rank`'s next batch. A stored block whose
 * parent is the previous stored block joins that BlockStored event.
 * tokens: block_size ids, or NULL when unknown (then none are sent). */
void eng_kv_stored(eng_kv *kv, uint32_t rank, uint64_t hash, int has_parent,
                   uint64_t parent, const uint32_t *tokens);
void eng_kv_removed(eng_kv *kv, uint32_t rank, uint64_t hash);
/* Send each rank's queued events as one batch. */
void eng_kv_flush(eng_kv *kv);
/* Stop the publisher (after sending what was flushed); NULL is a no-op. */
void eng_kv_close(eng_kv *kv);

#endif
