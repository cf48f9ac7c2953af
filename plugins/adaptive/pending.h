// SPDX-License-Identifier: Apache-2.0
/*
 * pending.h -- requests the adaptive plugin routed and has not yet heard
 * the outcome of: request id -> (the row's fingerprint, the row's
 * prefill_tokens when it was routed, the largest prefill_tokens of its
 * worker's rows then).
 *
 * Direct-mapped on the request id, `capacity` slots (a power of two), three
 * atomic words each: the request id, {32-bit row fingerprint, 32-bit
 * prefill tokens (saturated)}, that word 0 when the slot is empty (a
 * fingerprint is never 0), and the worker's tokens (saturated). A request routed while
 * more than `capacity` others are in flight may overwrite one of them, whose outcome is
 * then not learned from. Lookups and updates run from any number of threads, never block
 * and never allocate; a take empties the slot with a compare-and-swap, so each routed
 * request is learned from at most once. Two selects racing on one slot can leave one id
 * paired with the other's value: the fingerprint check of the outcome's row catches most,
 * and the rest cost the model one sample (so can a put racing a take between its read of
 * the worker's tokens and its compare-and-swap).
 */
#ifndef WSEL_ADAPTIVE_PENDING_H
#define WSEL_ADAPTIVE_PENDING_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct pending_slot {
    _Atomic uint64_t id;
    _Atomic uint64_t value;  /* fingerprint << 32 | tokens; 0 = empty */
    _Atomic uint64_t worker; /* the worker's largest prefill_tokens */
} pending_slot;

typedef struct pending {
    pending_slot *slots;
    uint64_t mask;
} pending;

/* Allocate `capacity` (1 to 2^24) rounded up to a power of two empty
 * slots. Returns 0, WSEL_EINVAL or WSEL_ENOMEM (then *p is untouched). */
int32_t pending_init(pending *p, uint32_t capacity);

/* Release the storage; a zeroed one is a harmless no-op. */
void pending_free(pending *p);

/* Remember that `request_id` went to the row with fingerprint `row_fp`
 * (non-zero) showing `tokens` prefill tokens, the largest of its worker's
 * rows showing `worker_tokens` (both saturated at 2^32 - 1). */
void pending_put(pending *p, uint64_t request_id, uint32_t row_fp, uint64_t tokens,
                 uint64_t worker_tokens);

/* Take what was remembered for `request_id` when it went to the row with
 * fingerprint `row_fp`: writes the tokens and the worker's and returns 1,
 * emptying the slot; returns 0 (nothing written, slot untouched) when the
 * id is not remembered or went to another row. */
int pending_take(pending *p, uint64_t request_id, uint32_t row_fp, uint32_t *out_tokens,
                 uint32_t *out_worker_tokens);

#endif
