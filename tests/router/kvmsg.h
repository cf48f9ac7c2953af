// SPDX-License-Identifier: Apache-2.0
/*
 * kvmsg.h -- build vLLM KV event payloads the way wsel-engine encodes them
 * (engine/kv_events.c: named-field maps), for the router's tests.
 */
#ifndef WSEL_TEST_KVMSG_H
#define WSEL_TEST_KVMSG_H

#include <msgpack.h>
#include <stdint.h>
#include <string.h>

typedef struct kvmsg {
    msgpack_sbuffer buf;
    msgpack_packer pk;
} kvmsg;

static inline void kv_str(kvmsg *m, const char *s)
{
    msgpack_pack_str(&m->pk, strlen(s));
    msgpack_pack_str_body(&m->pk, s, strlen(s));
}

/* Open a batch of n events for rank `rank` (rank < 0: no rank field). */
static inline void kv_begin(kvmsg *m, uint32_t n, int rank)
{
    msgpack_sbuffer_init(&m->buf);
    msgpack_packer_init(&m->pk, &m->buf, msgpack_sbuffer_write);
    msgpack_pack_map(&m->pk, rank >= 0 ? 3 : 2);
    kv_str(m, "ts");
    msgpack_pack_double(&m->pk, 1764524591.25);
    kv_str(m, "events");
    msgpack_pack_array(&m->pk, n);
}

static inline void kv_end(kvmsg *m, int rank)
{
    if (rank >= 0) {
        kv_str(m, "data_parallel_rank");
        msgpack_pack_uint32(&m->pk, (uint32_t)rank);
    }
}

/* BlockStored of n blocks (engine hashes `hashes`), parent or none, with
 * n * block_size token ids. */
static inline void kv_stored(kvmsg *m, const uint64_t *hashes, uint32_t n, int has_parent,
                             uint64_t parent, const uint32_t *tokens, uint32_t block_size)
{
    msgpack_pack_map(&m->pk, 8);
    kv_str(m, "type");
    kv_str(m, "BlockStored");
    kv_str(m, "block_hashes");
    msgpack_pack_array(&m->pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint64(&m->pk, hashes[i]);
    kv_str(m, "parent_block_hash");
    if (has_parent)
        msgpack_pack_uint64(&m->pk, parent);
    else
        msgpack_pack_nil(&m->pk);
    kv_str(m, "token_ids");
    msgpack_pack_array(&m->pk, tokens ? n * block_size : 0);
    for (uint32_t i = 0; tokens && i < n * block_size; i++)
        msgpack_pack_uint32(&m->pk, tokens[i]);
    kv_str(m, "block_size");
    msgpack_pack_uint32(&m->pk, block_size);
    kv_str(m, "lora_id");
    msgpack_pack_nil(&m->pk);
    kv_str(m, "medium");
    kv_str(m, "GPU");
    kv_str(m, "lora_name");
    msgpack_pack_nil(&m->pk);
}

static inline void kv_removed(kvmsg *m, uint64_t hash)
{
    msgpack_pack_map(&m->pk, 3);
    kv_str(m, "type");
    kv_str(m, "BlockRemoved");
    kv_str(m, "block_hashes");
    msgpack_pack_array(&m->pk, 1);
    msgpack_pack_uint64(&m->pk, hash);
    kv_str(m, "medium");
    kv_str(m, "GPU");
}

static inline void kv_typed(kvmsg *m, const char *type)
{
    msgpack_pack_map(&m->pk, 1);
    kv_str(m, "type");
    kv_str(m, type);
}

/* Apply the payload as a three-frame message with sequence number seq. */
static inline int32_t kv_send(wsel_router *r, uint64_t worker, uint32_t rank, kvmsg *m,
                              uint64_t seq)
{
    unsigned char sb[8];
    for (int i = 0; i < 8; i++)
        sb[i] = (unsigned char)(seq >> (56 - 8 * i));
    const void *frames[3] = {"", sb, m->buf.data};
    size_t sizes[3] = {0, 8, m->buf.size};
    int32_t rc = wsel_router_apply_kv_message(r, worker, rank, frames, sizes, 3);
    msgpack_sbuffer_destroy(&m->buf);
    return rc;
}

#endif
