// SPDX-License-Identifier: Apache-2.0
/*
 * mp_unpack.c -- see mp_unpack.h. msgpack-c's parser is a template
 * (msgpack/unpack_template.h) over callbacks that make each object; its
 * library instantiates it with callbacks it cannot inline, each object
 * built on the stack and copied as a whole (a store-forwarding stall per
 * object). Here the template is instantiated once more, with callbacks
 * that keep an object in plain fields (mp_obj) and store it field by
 * field, and that bound the containers' counts by the message's bytes.
 */
#include "mp_unpack.h"

#include <msgpack/unpack_define.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct mp_user {
    msgpack_zone *z;
    size_t budget; /* elements the bytes not yet read can still hold */
    int nomem;
} mp_user;

/*
 * The parser's object: msgpack_object's bytes as plain fields (no union),
 * so that the compiler keeps an object in registers and writes it into
 * its array or map with stores alone. `a` holds the union's first 8
 * bytes (an integer's or a double's bits; a string's, bin's, array's or
 * map's uint32 size; an ext's type and size), `ptr` its pointer.
 */
typedef struct mp_obj {
    uint32_t type;
    uint32_t pad;
    uint64_t a;
    const void *ptr;
} mp_obj;

_Static_assert(sizeof(mp_obj) == sizeof(msgpack_object) &&
                   offsetof(msgpack_object, via) == offsetof(mp_obj, a) &&
                   offsetof(msgpack_object, via.str.size) == offsetof(mp_obj, a) &&
                   offsetof(msgpack_object, via.str.ptr) == offsetof(mp_obj, ptr) &&
                   offsetof(msgpack_object, via.array.ptr) == offsetof(mp_obj, ptr) &&
                   offsetof(msgpack_object, via.map.ptr) == offsetof(mp_obj, ptr) &&
                   offsetof(msgpack_object, via.ext.size) == offsetof(mp_obj, a) + 4 &&
                   offsetof(msgpack_object, via.ext.ptr) == offsetof(mp_obj, ptr),
               "mp_obj must have msgpack_object's layout");

/* The word `a` whose first 4 bytes in memory hold v (a size); and its
 * reverse. Likewise a byte first, then v in the next 4 (an ext). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MP_FIRST32(v) ((uint64_t)(v))
#define MP_GET32(a) ((uint32_t)(a))
#define MP_BYTE_THEN32(b, v) ((uint64_t)(uint8_t)(b) | (uint64_t)(v) << 32)
#define MP_FIRST8(b) ((uint64_t)(b))
#else
#define MP_FIRST32(v) ((uint64_t)(v) << 32)
#define MP_GET32(a) ((uint32_t)((a) >> 32))
#define MP_BYTE_THEN32(b, v) ((uint64_t)(uint8_t)(b) << 56 | (uint64_t)(v))
#define MP_FIRST8(b) ((uint64_t)(b) << 56)
#endif

static inline mp_obj mp_make(msgpack_object_type t, uint64_t a, const void *ptr)
{
    return (mp_obj){(uint32_t)t, 0, a, ptr};
}

#define msgpack_unpack_struct(name) struct mp_tpl##name
#define msgpack_unpack_func(ret, name) static ret mp_tpl##name
#define msgpack_unpack_callback(name) mp_cb##name
#define msgpack_unpack_object mp_obj
#define msgpack_unpack_user mp_user

static inline mp_obj mp_cb_root(mp_user *u)
{
    (void)u;
    return mp_make(MSGPACK_OBJECT_NIL, 0, NULL);
}

/* Integers as msgpack-c makes them: those >= 0 positive, as u64. */
static inline int mp_int(int64_t d, mp_obj *o)
{
    *o = mp_make(d >= 0 ? MSGPACK_OBJECT_POSITIVE_INTEGER : MSGPACK_OBJECT_NEGATIVE_INTEGER,
                 (uint64_t)d, NULL);
    return 0;
}

/* The template's callbacks, by name. */
#define MP_INT(name, T)                                                                   \
    static inline int mp_cb##name(mp_user *u, T d, mp_obj *o)                             \
    {                                                                                     \
        (void)u;                                                                          \
        return mp_int((int64_t)d, o);                                                     \
    }
MP_INT(_int8, int8_t)
MP_INT(_int16, int16_t)
MP_INT(_int32, int32_t)
MP_INT(_int64, int64_t)
MP_INT(_uint8, uint8_t)
MP_INT(_uint16, uint16_t)
MP_INT(_uint32, uint32_t)

static inline int mp_cb_uint64(mp_user *u, uint64_t d, mp_obj *o)
{
    (void)u;
    *o = mp_make(MSGPACK_OBJECT_POSITIVE_INTEGER, d, NULL);
    return 0;
}

static inline int mp_cb_double(mp_user *u, double d, mp_obj *o)
{
    (void)u;
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    *o = mp_make(MSGPACK_OBJECT_FLOAT64, bits, NULL);
    return 0;
}

static inline int mp_cb_float(mp_user *u, float d, mp_obj *o)
{
    mp_cb_double(u, d, o);
    o->type = MSGPACK_OBJECT_FLOAT32;
    return 0;
}

static inline int mp_cb_nil(mp_user *u, mp_obj *o)
{
    (void)u;
    *o = mp_make(MSGPACK_OBJECT_NIL, 0, NULL);
    return 0;
}

static inline int mp_cb_true(mp_user *u, mp_obj *o)
{
    (void)u;
    *o = mp_make(MSGPACK_OBJECT_BOOLEAN, MP_FIRST8(1), NULL);
    return 0;
}

static inline int mp_cb_false(mp_user *u, mp_obj *o)
{
    (void)u;
    *o = mp_make(MSGPACK_OBJECT_BOOLEAN, 0, NULL);
    return 0;
}

/* A container of n objects (a map's n / 2 pairs) from the zone, none yet
 * filled (no element: no allocation). Every object of a message takes at
 * least one of its bytes, so all containers together declare fewer
 * objects than it has bytes: a count past that is refused before any
 * allocation (a 5-byte header claiming 2^32 elements would ask for 96
 * GiB). */
static inline int mp_container(mp_user *u, msgpack_object_type t, size_t n, mp_obj *o)
{
    if (n > u->budget)
        return MSGPACK_UNPACK_PARSE_ERROR;
    u->budget -= n;
    void *p = n ? msgpack_zone_malloc(u->z, n * sizeof(msgpack_object)) : NULL;
    *o = mp_make(t, MP_FIRST32(0), p);
    u->nomem = n && !p;
    return u->nomem ? MSGPACK_UNPACK_NOMEM_ERROR : 0;
}

static inline int mp_cb_array(mp_user *u, unsigned int n, mp_obj *o)
{
    return mp_container(u, MSGPACK_OBJECT_ARRAY, n, o);
}

static inline int mp_cb_map(mp_user *u, unsigned int n, mp_obj *o)
{
    return mp_container(u, MSGPACK_OBJECT_MAP, 2 * (size_t)n, o);
}

/* Container c's next element gets o (its size grows by one). */
static inline msgpack_object *mp_next(mp_obj *c, size_t elem)
{
    uint32_t i = MP_GET32(c->a);
    c->a = MP_FIRST32(i + 1);
    return (msgpack_object *)((char *)(uintptr_t)c->ptr + (size_t)i * elem);
}

/* o into *dst field by field: a copy of the whole would load it from the
 * stack in wider pieces than its fields were stored (a stall each). */
static inline void mp_store(msgpack_object *dst, const mp_obj *o)
{
    char *p = (char *)dst;
    memcpy(p + offsetof(mp_obj, type), &o->type, sizeof(o->type));
    memcpy(p + offsetof(mp_obj, a), &o->a, sizeof(o->a));
    memcpy(p + offsetof(mp_obj, ptr), &o->ptr, sizeof(o->ptr));
}

static inline int mp_cb_array_item(mp_user *u, mp_obj *c, mp_obj o)
{
    (void)u;
    mp_store(mp_next(c, sizeof(msgpack_object)), &o);
    return 0;
}

static inline int mp_cb_map_item(mp_user *u, mp_obj *c, mp_obj k, mp_obj v)
{
    (void)u;
    msgpack_object *kv = mp_next(c, sizeof(msgpack_object_kv));
    mp_store(kv, &k);
    mp_store(kv + 1, &v);
    return 0;
}

static inline int mp_cb_str(mp_user *u, const char *b, const char *p, unsigned int l,
                            mp_obj *o)
{
    (void)u;
    (void)b;
    *o = mp_make(MSGPACK_OBJECT_STR, MP_FIRST32(l), p);
    return 0;
}

static inline int mp_cb_bin(mp_user *u, const char *b, const char *p, unsigned int l,
                            mp_obj *o)
{
    (void)u;
    (void)b;
    *o = mp_make(MSGPACK_OBJECT_BIN, MP_FIRST32(l), p);
    return 0;
}

/* An ext's first byte is its type (the template counts it in l >= 1). */
static inline int mp_cb_ext(mp_user *u, const char *b, const char *p, unsigned int l,
                            mp_obj *o)
{
    (void)u;
    (void)b;
    if (l == 0)
        return MSGPACK_UNPACK_PARSE_ERROR;
    *o = mp_make(MSGPACK_OBJECT_EXT, MP_BYTE_THEN32(*p, l - 1), p + 1);
    return 0;
}

/* The template uses GNU case ranges and casts const away. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <msgpack/unpack_template.h>
#pragma GCC diagnostic pop

int rt_mp_unpack(const unsigned char *msg, size_t len, msgpack_zone *z,
                 msgpack_object *out, size_t *objects)
{
    struct mp_tpl_context ctx;
    size_t off = 0;
    mp_tpl_init(&ctx);
    ctx.user = (mp_user){.z = z, .budget = len ? len - 1 : 0};
    int rc = len ? mp_tpl_execute(&ctx, (const char *)msg, len, &off) : 0;
    if (ctx.user.nomem)
        return RT_MP_NOMEM;
    if (rc != 1 || off != len)
        return RT_MP_MALFORMED;
    mp_obj root = mp_tpl_data(&ctx);
    *out = (msgpack_object){.type = MSGPACK_OBJECT_NIL};
    mp_store(out, &root);
    *objects = len - 1 - ctx.user.budget;
    return 0;
}
