/*
 * pprof_reference.c — the pprof decoder ember used before pprof_decode.c:
 * protobuf-c's generic unpack plus two fixes on top of it. Nothing in the
 * services calls it any more; it stays as the oracle of the differential tests
 * (test_pprof_decode.c, fuzz_pprof_decode.c), which hold the hand-written
 * decoder to protobuf-c's accept/reject decisions, messages and output. Being
 * the only caller of protobuf_c_message_unpack for pprof, it is linked only
 * into the binaries that use it.
 */
#include <string.h>

#include "pprof_int.h"

/* protobuf-c hands strings over NUL-terminated, so whatever follows an
 * embedded NUL would be invisible to validation (ingest/invalid_utf8.pb.gz
 * hides its invalid bytes exactly that way) and silently lost. This walks the
 * top-level fields of the unpacked bytes, and re-copies each string_table
 * entry that holds a NUL with the NULs replaced by U+FFFD. A shape it does not
 * expect just ends the walk: protobuf-c has already accepted the bytes. */
#define PB_FIELD_STRING_TABLE 6

static int pb_skip_field(const uint8_t **cur, const uint8_t *end, unsigned wire_type,
                         uint64_t *len_out)
{
    uint64_t v;
    *len_out = 0;
    switch (wire_type) {
    case 0:
        return lc_uvarint_get(cur, end, &v);
    case 1:
        v = 8;
        break;
    case 5:
        v = 4;
        break;
    case 2:
        if (lc_uvarint_get(cur, end, &v))
            return LC_ECORRUPT;
        *len_out = v;
        break;
    default:
        return LC_ECORRUPT;
    }
    if (v > (uint64_t)(end - *cur))
        return LC_ECORRUPT;
    *cur += v;
    return 0;
}

static int restore_embedded_nuls(const uint8_t *data, size_t len, lc_pprof_t *p, lc_arena_t *arena)
{
    if (!data)
        return 0;
    const uint8_t *cur = data, *end = data + len;
    size_t idx = 0;
    while (cur < end) {
        uint64_t key, n;
        if (lc_uvarint_get(&cur, end, &key) || pb_skip_field(&cur, end, key & 7, &n))
            return 0;
        if ((key >> 3) != PB_FIELD_STRING_TABLE || (key & 7) != 2)
            continue;
        const uint8_t *s = cur - n;
        if (idx < p->n_string_table && memchr(s, 0, n)) {
            p->string_table[idx] = lc_pprof__copy_replacing_nuls(s, n, arena);
            if (!p->string_table[idx])
                return LC_ETOOBIG;
        }
        idx++;
    }
    return 0;
}

/* protobuf-c accepts field number 0 when its tag is a non-minimal varint
 * (0x85 0x00) and keeps it as an unknown field, but rejects the minimal tag it
 * would write back, so such a profile could be stored and never read again.
 * Field 0 is invalid protobuf (Go refuses it too): reject it here. */
static bool msg_has_field_zero(const ProtobufCMessage *m)
{
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        if (m->unknown_fields[i].tag == 0)
            return true;
    return false;
}

static bool location_has_field_zero(const Google__V1__Location *l)
{
    if (msg_has_field_zero(&l->base))
        return true;
    for (size_t k = 0; k < l->n_line; k++)
        if (msg_has_field_zero(&l->line[k]->base))
            return true;
    return false;
}

static bool sample_has_field_zero(const Google__V1__Sample *s)
{
    if (msg_has_field_zero(&s->base))
        return true;
    for (size_t k = 0; k < s->n_label; k++)
        if (msg_has_field_zero(&s->label[k]->base))
            return true;
    return false;
}

static bool profile_has_field_zero(const lc_pprof_t *p)
{
    bool bad = msg_has_field_zero(&p->base) ||
               (p->period_type && msg_has_field_zero(&p->period_type->base));
    for (size_t i = 0; i < p->n_sample_type && !bad; i++)
        bad = msg_has_field_zero(&p->sample_type[i]->base);
    for (size_t i = 0; i < p->n_sample && !bad; i++)
        bad = sample_has_field_zero(p->sample[i]);
    for (size_t i = 0; i < p->n_mapping && !bad; i++)
        bad = msg_has_field_zero(&p->mapping[i]->base);
    for (size_t i = 0; i < p->n_location && !bad; i++)
        bad = location_has_field_zero(p->location[i]);
    for (size_t i = 0; i < p->n_function && !bad; i++)
        bad = msg_has_field_zero(&p->function[i]->base);
    return bad;
}

int lc_pprof__decode_protobuf_c(const uint8_t *pb, size_t len, lc_arena_t *arena, lc_pprof_t **out,
                                lc_status_t *st)
{
    static const uint8_t empty[1];
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(arena, &alloc);
    ProtobufCMessage *msg =
        protobuf_c_message_unpack(&google__v1__profile__descriptor, &alloc, len, pb ? pb : empty);
    int rc = msg ? restore_embedded_nuls(pb, len, (lc_pprof_t *)msg, arena) : LC_ECORRUPT;
    if (rc == 0 && profile_has_field_zero((lc_pprof_t *)msg))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, LC_PPROF__MSG_FIELD_ZERO);
    if (rc)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, LC_PPROF__MSG_MALFORMED);
    *out = (lc_pprof_t *)msg;
    return 0;
}

static void drop_unknown(ProtobufCMessage *m)
{
    m->n_unknown_fields = 0;
}

void lc_pprof__drop_unknown_fields(lc_pprof_t *p)
{
    drop_unknown(&p->base);
    if (p->period_type)
        drop_unknown(&p->period_type->base);
    for (size_t i = 0; i < p->n_sample_type; i++)
        drop_unknown(&p->sample_type[i]->base);
    for (size_t i = 0; i < p->n_sample; i++) {
        drop_unknown(&p->sample[i]->base);
        for (size_t k = 0; k < p->sample[i]->n_label; k++)
            drop_unknown(&p->sample[i]->label[k]->base);
    }
    for (size_t i = 0; i < p->n_mapping; i++)
        drop_unknown(&p->mapping[i]->base);
    for (size_t i = 0; i < p->n_location; i++) {
        drop_unknown(&p->location[i]->base);
        for (size_t k = 0; k < p->location[i]->n_line; k++)
            drop_unknown(&p->location[i]->line[k]->base);
    }
    for (size_t i = 0; i < p->n_function; i++)
        drop_unknown(&p->function[i]->base);
}
