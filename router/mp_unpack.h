// SPDX-License-Identifier: Apache-2.0
/*
 * mp_unpack.h -- msgpack_unpack for one whole message, with msgpack-c's
 * own parser (its installed unpack_template.h) compiled into the router:
 * the same objects in the same zone as the library's msgpack_unpack, its
 * object callbacks inlined into the parser's loop. Any thread; the zone
 * is the caller's.
 */
#ifndef WSEL_ROUTER_MP_UNPACK_H
#define WSEL_ROUTER_MP_UNPACK_H

#include <msgpack.h>
#include <stddef.h>

enum { RT_MP_MALFORMED = -1, RT_MP_NOMEM = -2 };

/* Unpack msg[0..len) into *out, its arrays and maps allocated in z (the
 * strings and bins point into msg), *objects the number of objects z
 * holds for it (24 bytes each): 0 when the bytes are exactly one object;
 * RT_MP_MALFORMED otherwise (a parse error, a cut message, bytes after
 * it, containers declaring more objects than the bytes can hold, nesting
 * past msgpack-c's 32 levels), RT_MP_NOMEM when z could not grow; *out
 * and *objects then unspecified. */
int rt_mp_unpack(const unsigned char *msg, size_t len, msgpack_zone *z,
                 msgpack_object *out, size_t *objects);

#endif
