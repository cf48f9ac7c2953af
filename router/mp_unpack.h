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

/* Unpack msg[0..len) into *out, its arrays and maps allocated in z (the
 * strings and bins point into msg): 0 when the bytes are exactly one
 * object, -1 otherwise (a parse error, a cut message, bytes after it, or
 * the zone out of memory), *out then unspecified. */
int rt_mp_unpack(const unsigned char *msg, size_t len, msgpack_zone *z,
                 msgpack_object *out);

#endif
