/*
 * arrow_fb.c — a bounds-checked flatbuffer reader for the Arrow message
 * tables (see arrow_int.h for why it exists). Layout facts: a table starts
 * with an int32 back-offset to its vtable; the vtable holds its own size, the
 * table's size and one uint16 offset per field (0: absent); references are
 * uint32 offsets forward from where they are stored; vectors and strings
 * start with a uint32 count. Everything is little-endian.
 */
#include <string.h>

#include "arrow_int.h"

int64_t afb_read_le(const uint8_t *p, size_t size, bool is_signed)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++)
        v |= (uint64_t)p[i] << (8 * i);
    if (is_signed && size < 8 && (v >> (8 * size - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * size);
    return (int64_t)v;
}

static int table_at(const uint8_t *buf, size_t len, size_t pos, afb_table_t *t)
{
    if (pos > len || len - pos < 4)
        return -1;
    int64_t back = afb_read_le(buf + pos, 4, true);
    int64_t vtable = (int64_t)pos - back;
    if (vtable < 0 || (uint64_t)vtable > len || len - (size_t)vtable < 4)
        return -1;
    size_t vt = (size_t)vtable;
    size_t vt_len = (size_t)afb_read_le(buf + vt, 2, false);
    size_t tbl_len = (size_t)afb_read_le(buf + vt + 2, 2, false);
    if (vt_len < 4 || vt_len % 2 || vt_len > len - vt || tbl_len < 4 || tbl_len > len - pos)
        return -1;
    *t = (afb_table_t){buf, len, pos, vt, vt_len, tbl_len};
    return 0;
}

int afb_root(const uint8_t *buf, size_t len, afb_table_t *t)
{
    if (len < 4)
        return -1;
    return table_at(buf, len, (size_t)afb_read_le(buf, 4, false), t);
}

/* The field's position in buf, 0 if absent, or -1 if it would not fit. */
static int64_t field_pos(const afb_table_t *t, unsigned id, size_t size)
{
    size_t slot = 4 + 2 * (size_t)id;
    if (slot + 2 > t->vtable_len)
        return 0;
    size_t off = (size_t)afb_read_le(t->buf + t->vtable + slot, 2, false);
    if (off == 0)
        return 0;
    if (off < 4 || off > t->table_len || t->table_len - off < size)
        return -1;
    return (int64_t)(t->pos + off);
}

int afb_int(const afb_table_t *t, unsigned id, size_t size, int64_t *out)
{
    int64_t p = field_pos(t, id, size);
    if (p <= 0)
        return p < 0 ? -1 : 1;
    *out = afb_read_le(t->buf + p, size, true);
    return 0;
}

/* Follows the uint32 reference stored in field id. */
static int ref(const afb_table_t *t, unsigned id, size_t *target)
{
    int64_t p = field_pos(t, id, 4);
    if (p <= 0)
        return p < 0 ? -1 : 1;
    uint64_t to = (uint64_t)p + (uint64_t)afb_read_le(t->buf + p, 4, false);
    if (to >= t->len)
        return -1;
    *target = (size_t)to;
    return 0;
}

int afb_table(const afb_table_t *t, unsigned id, afb_table_t *sub)
{
    size_t to;
    int rc = ref(t, id, &to);
    if (rc != 0)
        return rc;
    return table_at(t->buf, t->len, to, sub);
}

int afb_vector(const afb_table_t *t, unsigned id, size_t elem_size, afb_vector_t *v)
{
    size_t to;
    int rc = ref(t, id, &to);
    if (rc != 0)
        return rc;
    if (t->len - to < 4)
        return -1;
    uint64_t n = (uint64_t)afb_read_le(t->buf + to, 4, false);
    if (n > (t->len - to - 4) / elem_size)
        return -1;
    *v = (afb_vector_t){t->buf, t->len, to + 4, (size_t)n};
    return 0;
}

int afb_vector_table(const afb_vector_t *v, size_t i, afb_table_t *sub)
{
    if (i >= v->n)
        return -1;
    size_t at = v->start + 4 * i;
    uint64_t to = (uint64_t)at + (uint64_t)afb_read_le(v->buf + at, 4, false);
    if (to >= v->len)
        return -1;
    return table_at(v->buf, v->len, (size_t)to, sub);
}

int afb_string(const afb_table_t *t, unsigned id, const char **s, size_t *n)
{
    afb_vector_t v;
    int rc = afb_vector(t, id, 1, &v);
    if (rc != 0)
        return rc;
    *s = (const char *)v.buf + v.start;
    *n = v.n;
    return 0;
}
