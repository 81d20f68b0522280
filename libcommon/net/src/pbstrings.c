/*
 * pbstrings.c — refuses NUL bytes in protobuf string fields (lc/pbstrings.h).
 *
 * A walk over the wire form: each length-delimited field is looked up in the
 * descriptor; a string is searched for a NUL, a message is walked in turn.
 * Scalars and unknown fields are stepped over. Malformed input ends the walk
 * quietly, since the caller's unpack already judged (or will judge) it.
 */
#include <stdbool.h>
#include <string.h>

#include "lc/pbstrings.h"

#define PB_MAX_DEPTH 100

typedef struct pbs_cursor_s {
    const uint8_t *p, *end;
} pbs_cursor_t;

/* false at the end of the input or on a varint longer than 10 bytes */
static bool pbs_varint(pbs_cursor_t *c, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70 && c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Steps over a field's payload; data and len are set for length-delimited ones. */
static bool pbs_skip(pbs_cursor_t *c, unsigned wire_type, const uint8_t **data, size_t *len)
{
    uint64_t n = 0;
    switch (wire_type) {
    case 0:
        return pbs_varint(c, &n);
    case 1:
        n = 8;
        break;
    case 5:
        n = 4;
        break;
    case 2:
        if (!pbs_varint(c, &n))
            return false;
        *data = c->p;
        *len = (size_t)n;
        break;
    default:
        return false; /* groups: protobuf-c refuses them */
    }
    if (n > (uint64_t)(c->end - c->p))
        return false;
    c->p += n;
    return true;
}

static int pbs_walk(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                    int depth, lc_status_t *st)
{
    if (depth > PB_MAX_DEPTH)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: messages nested too deep",
                             desc->name);
    pbs_cursor_t c = {data, data + len};
    uint64_t tag;
    while (c.p < c.end && pbs_varint(&c, &tag)) {
        const uint8_t *field = NULL;
        size_t field_len = 0;
        if (!pbs_skip(&c, (unsigned)(tag & 7), &field, &field_len))
            return 0;
        const ProtobufCFieldDescriptor *f =
            field ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3)) : NULL;
        if (!f)
            continue;
        if (f->type == PROTOBUF_C_TYPE_STRING && memchr(field, 0, field_len))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "%s.%s: a NUL byte is not allowed in a string", desc->name,
                                 f->name);
        if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
            pbs_walk(f->descriptor, field, field_len, depth + 1, st) != 0)
            return -1;
    }
    return 0;
}

int lc_pb_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                        lc_status_t *st)
{
    return pbs_walk(desc, data, len, 0, st);
}
