/*
 * arrow_write.c — the Arrow IPC stream writer of lc/arrow_write.h.
 *
 * Layout written (Arrow columnar format, "Encapsulated message format"):
 * for each of the Schema and the RecordBatch message, 0xFFFFFFFF, the
 * int32 length of the flatbuffer (padded so the body starts 8-aligned), the
 * flatbuffer Message, then the body (buffers each padded to 8 bytes); then
 * 0xFFFFFFFF 0x00000000 ends the stream.
 *
 * The flatbuffer builder (fbb_*) grows its buffer downwards as flatbuffers
 * does: children are written before their parents, so every uoffset points
 * forward. An object is named by its "end offset", the bytes written from
 * its first byte to the end of the buffer, which does not change as more is
 * prepended. Vtable slots follow Schema.fbs / Message.fbs field order.
 */
#include <string.h>

#include "lc/arrow_write.h"

/* ------------------------------------------------------ flatbuffer builder */

#define FBB_MAX_SLOTS 8

typedef struct fbb_s {
    uint8_t *buf; /* bytes live in buf[cap - used, cap) */
    size_t cap, used, minalign;
    size_t slot[FBB_MAX_SLOTS]; /* end offsets of this table's fields, 0 = absent */
    size_t n_slots, table_start;
} fbb_t;

static void fbb_init(fbb_t *b)
{
    *b = (fbb_t){.cap = 1024, .minalign = 1};
    b->buf = lc_xmalloc(b->cap);
}

static void fbb_fini(fbb_t *b)
{
    lc_free(b->buf);
}

static void fbb_grow(fbb_t *b, size_t need)
{
    if (b->cap - b->used >= need)
        return;
    size_t cap = b->cap;
    while (cap - b->used < need)
        cap *= 2;
    uint8_t *nb = lc_xmalloc(cap);
    memcpy(nb + cap - b->used, b->buf + b->cap - b->used, b->used);
    lc_free(b->buf);
    b->buf = nb;
    b->cap = cap;
}

static void fbb_push(fbb_t *b, const void *data, size_t n)
{
    fbb_grow(b, n);
    b->used += n;
    memcpy(b->buf + b->cap - b->used, data, n);
}

static void fbb_zeros(fbb_t *b, size_t n)
{
    fbb_grow(b, n);
    b->used += n;
    memset(b->buf + b->cap - b->used, 0, n);
}

/* Pads so that after `additional` more bytes the position is aligned to size. */
static void fbb_prep(fbb_t *b, size_t size, size_t additional)
{
    if (size > b->minalign)
        b->minalign = size;
    fbb_zeros(b, (~(b->used + additional) + 1) & (size - 1));
}

static void fbb_scalar(fbb_t *b, uint64_t v, size_t size)
{
    uint8_t le[8];
    for (size_t i = 0; i < size; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    fbb_prep(b, size, 0);
    fbb_push(b, le, size);
}

static void fbb_uoffset(fbb_t *b, size_t ref)
{
    fbb_prep(b, 4, 0);
    fbb_scalar(b, (uint32_t)(b->used + 4 - ref), 4);
}

static size_t fbb_string(fbb_t *b, const char *s)
{
    size_t n = strlen(s);
    fbb_prep(b, 4, n + 1);
    fbb_zeros(b, 1);
    fbb_push(b, s, n);
    fbb_scalar(b, (uint32_t)n, 4);
    return b->used;
}

static size_t fbb_offset_vector(fbb_t *b, const size_t *refs, size_t n)
{
    fbb_prep(b, 4, 4 * n);
    for (size_t i = n; i-- > 0;)
        fbb_uoffset(b, refs[i]);
    fbb_scalar(b, (uint32_t)n, 4);
    return b->used;
}

/* A vector of 16-byte structs of two int64 (FieldNode, Buffer). */
static size_t fbb_pair_vector(fbb_t *b, const int64_t *pairs, size_t n)
{
    fbb_prep(b, 4, 16 * n);
    fbb_prep(b, 8, 16 * n);
    for (size_t i = 2 * n; i-- > 0;)
        fbb_scalar(b, (uint64_t)pairs[i], 8);
    fbb_scalar(b, (uint32_t)n, 4);
    return b->used;
}

static void fbb_table_start(fbb_t *b)
{
    memset(b->slot, 0, sizeof(b->slot));
    b->n_slots = 0;
    b->table_start = b->used;
}

static void fbb_slot_done(fbb_t *b, size_t slot)
{
    b->slot[slot] = b->used;
    if (slot + 1 > b->n_slots)
        b->n_slots = slot + 1;
}

static void fbb_field_scalar(fbb_t *b, size_t slot, uint64_t v, size_t size)
{
    fbb_scalar(b, v, size);
    fbb_slot_done(b, slot);
}

static void fbb_field_offset(fbb_t *b, size_t slot, size_t ref)
{
    fbb_uoffset(b, ref);
    fbb_slot_done(b, slot);
}

static size_t fbb_table_end(fbb_t *b)
{
    fbb_prep(b, 4, 0);
    fbb_scalar(b, 0, 4); /* soffset to the vtable, patched below */
    size_t table = b->used;
    for (size_t i = b->n_slots; i-- > 0;)
        fbb_scalar(b, b->slot[i] ? table - b->slot[i] : 0, 2);
    fbb_scalar(b, table - b->table_start, 2);
    fbb_scalar(b, 4 + 2 * b->n_slots, 2);
    int32_t soff = (int32_t)(b->used - table);
    uint8_t *at = b->buf + b->cap - table;
    for (int i = 0; i < 4; i++)
        at[i] = (uint8_t)((uint32_t)soff >> (8 * i));
    return table;
}

/* The finished flatbuffer, padded to a multiple of 8 bytes at its end (the
 * IPC framing wants the body 8-aligned), appended to out. */
static int fbb_finish(fbb_t *b, size_t root, lc_buf_t *out, size_t *len)
{
    fbb_prep(b, b->minalign > 8 ? b->minalign : 8, 4);
    fbb_uoffset(b, root);
    size_t pad = (8 - b->used % 8) % 8;
    *len = b->used + pad;
    int rc = lc_buf_append(out, b->buf + b->cap - b->used, b->used);
    static const uint8_t zeros[8];
    return rc ? rc : lc_buf_append(out, zeros, pad);
}

/* -------------------------------------------------------------- columns */

enum { TYPE_INT = 2, TYPE_BINARY = 4, TYPE_UTF8 = 5, TYPE_BOOL = 6, TYPE_LIST = 12 };
enum { HEADER_SCHEMA = 1, HEADER_DICTIONARY_BATCH = 2, HEADER_RECORD_BATCH = 3 };
#define METADATA_V5 4

void lc_arw_batch_init(lc_arw_batch_t *b, const lc_arw_field_t *fields, size_t n, size_t max_bytes)
{
    *b = (lc_arw_batch_t){.cols = lc_xcalloc(n ? n : 1, sizeof(lc_arw_col_t)), .n_cols = n};
    for (size_t i = 0; i < n; i++) {
        lc_arw_col_t *c = &b->cols[i];
        c->field = fields[i];
        lc_buf_init(&c->values, max_bytes);
        lc_buf_init(&c->offsets, max_bytes);
        int32_t zero = 0;
        if ((c->field.type == LC_ARW_UTF8 || c->field.type == LC_ARW_BINARY ||
             c->field.type == LC_ARW_LIST_UINT32) &&
            lc_buf_append(&c->offsets, &zero, 4) != 0)
            b->err = LC_ETOOBIG;
    }
}

void lc_arw_batch_fini(lc_arw_batch_t *b)
{
    for (size_t i = 0; i < b->n_cols; i++) {
        lc_buf_fini(&b->cols[i].values);
        lc_buf_fini(&b->cols[i].offsets);
    }
    lc_free(b->cols);
    *b = (lc_arw_batch_t){0};
}

static void put_bytes(lc_arw_batch_t *b, lc_buf_t *to, const void *p, size_t n)
{
    if (!b->err && lc_buf_append(to, p, n) != 0)
        b->err = LC_ETOOBIG;
}

static void put_offset(lc_arw_batch_t *b, lc_arw_col_t *c)
{
    int32_t off = (int32_t)c->items;
    if (c->items > INT32_MAX)
        b->err = LC_ETOOBIG;
    if (c->offsets.cap - c->offsets.len >= 4 && !b->err) { /* reserved: no call */
        memcpy(c->offsets.data + c->offsets.len, &off, 4);
        c->offsets.len += 4;
        return;
    }
    put_bytes(b, &c->offsets, &off, 4);
}

void lc_arw_put_str(lc_arw_batch_t *b, size_t col, const char *s)
{
    lc_arw_put_bytes(b, col, s, s ? strlen(s) : 0);
}

void lc_arw_put_bytes(lc_arw_batch_t *b, size_t col, const void *p, size_t n)
{
    lc_arw_col_t *c = &b->cols[col];
    put_bytes(b, &c->values, p, n);
    c->items += n;
    c->n++;
    put_offset(b, c);
}

void lc_arw_put_int(lc_arw_batch_t *b, size_t col, int64_t v)
{
    lc_arw_col_t *c = &b->cols[col];
    size_t width = c->field.type == LC_ARW_INT32 || c->field.type == LC_ARW_UINT32 ||
                           c->field.type == LC_ARW_DICT_UTF8
                       ? 4
                       : 8;
    c->n++;
    if (c->values.cap - c->values.len < width && !b->err && lc_buf_reserve(&c->values, width) != 0)
        b->err = LC_ETOOBIG;
    if (b->err)
        return;
    uint8_t *p = c->values.data + c->values.len;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (width == 4) { /* one store: this runs per cell of 100,000s of rows */
        uint32_t w = (uint32_t)v;
        memcpy(p, &w, 4);
    } else {
        memcpy(p, &v, 8);
    }
#else
    for (size_t i = 0; i < width; i++) /* little endian, whatever the host */
        p[i] = (uint8_t)((uint64_t)v >> (8 * i));
#endif
    c->values.len += width;
}

void lc_arw_batch_reserve(lc_arw_batch_t *b, size_t rows)
{
    for (size_t i = 0; i < b->n_cols && !b->err; i++) {
        lc_arw_col_t *c = &b->cols[i];
        size_t width = 0;
        switch (c->field.type) {
        case LC_ARW_INT32:
        case LC_ARW_UINT32:
        case LC_ARW_DICT_UTF8:
            width = 4;
            break;
        case LC_ARW_INT64:
        case LC_ARW_UINT64:
            width = 8;
            break;
        case LC_ARW_BOOL:
            width = 1; /* over-reserves bits; bounded by rows bytes */
            break;
        case LC_ARW_UTF8:
        case LC_ARW_BINARY:
        case LC_ARW_LIST_UINT32:
            if (lc_buf_reserve(&c->offsets, (rows + 1) * 4) != 0)
                b->err = LC_ETOOBIG;
            width = 4;
            break;
        }
        if (!b->err && lc_buf_reserve(&c->values, rows * width) != 0)
            b->err = LC_ETOOBIG;
    }
}

void lc_arw_put_bool(lc_arw_batch_t *b, size_t col, bool v)
{
    lc_arw_col_t *c = &b->cols[col];
    if (c->n % 8 == 0 && c->values.cap > c->values.len && !b->err)
        c->values.data[c->values.len++] = 0;
    else if (c->n % 8 == 0)
        put_bytes(b, &c->values, "", 1);
    if (!b->err && v)
        c->values.data[c->n / 8] |= (uint8_t)(1u << (c->n % 8));
    c->n++;
}

void lc_arw_put_list(lc_arw_batch_t *b, size_t col, const uint32_t *items, size_t n)
{
    lc_arw_col_t *c = &b->cols[col];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n && c->values.cap - c->values.len >= n * 4 && !b->err) {
        memcpy(c->values.data + c->values.len, items, n * 4);
        c->values.len += n * 4;
    } else if (n) {
        put_bytes(b, &c->values, items, n * 4);
    }
#else
    for (size_t i = 0; i < n; i++) {
        uint8_t le[4] = {(uint8_t)items[i], (uint8_t)(items[i] >> 8), (uint8_t)(items[i] >> 16),
                         (uint8_t)(items[i] >> 24)};
        put_bytes(b, &c->values, le, 4);
    }
#endif
    c->items += n;
    c->n++;
    put_offset(b, c);
}

void lc_arw_set_dict(lc_arw_batch_t *b, size_t col, const char *const *strings, size_t n)
{
    b->cols[col].dict = strings;
    b->cols[col].n_dict = n;
}

/* ---------------------------------------------------------------- schema */

static size_t int_type(fbb_t *f, int bits, bool is_signed)
{
    fbb_table_start(f);
    fbb_field_scalar(f, 0, (uint32_t)bits, 4);
    fbb_field_scalar(f, 1, is_signed, 1);
    return fbb_table_end(f);
}

static size_t empty_table(fbb_t *f)
{
    fbb_table_start(f);
    return fbb_table_end(f);
}

/* DictionaryEncoding {id, indexType: Int(32, signed), isOrdered: false}. */
static size_t dict_encoding(fbb_t *f, int64_t id)
{
    size_t index_type = int_type(f, 32, true);
    fbb_table_start(f);
    fbb_field_scalar(f, 0, (uint64_t)id, 8);
    fbb_field_offset(f, 1, index_type);
    fbb_field_scalar(f, 2, 0, 1);
    return fbb_table_end(f);
}

static size_t field_table_dict(fbb_t *f, const char *name, int type_type, size_t type,
                               size_t children, size_t dict)
{
    size_t name_ref = fbb_string(f, name);
    fbb_table_start(f);
    fbb_field_offset(f, 0, name_ref);
    if (dict)
        fbb_field_offset(f, 4, dict);
    fbb_field_scalar(f, 1, 0, 1); /* nullable: false */
    fbb_field_scalar(f, 2, (uint64_t)type_type, 1);
    fbb_field_offset(f, 3, type);
    fbb_field_offset(f, 5, children);
    return fbb_table_end(f);
}

static size_t field_table(fbb_t *f, const char *name, int type_type, size_t type, size_t children)
{
    return field_table_dict(f, name, type_type, type, children, 0);
}

/* Column col's field; a dictionary column's id is its column index. */
static size_t column_field(fbb_t *f, const lc_arw_field_t *c, size_t col)
{
    size_t none = fbb_offset_vector(f, NULL, 0);
    switch (c->type) {
    case LC_ARW_DICT_UTF8: {
        size_t dict = dict_encoding(f, (int64_t)col);
        return field_table_dict(f, c->name, TYPE_UTF8, empty_table(f), none, dict);
    }
    case LC_ARW_UTF8:
        return field_table(f, c->name, TYPE_UTF8, empty_table(f), none);
    case LC_ARW_BINARY:
        return field_table(f, c->name, TYPE_BINARY, empty_table(f), none);
    case LC_ARW_BOOL:
        return field_table(f, c->name, TYPE_BOOL, empty_table(f), none);
    case LC_ARW_LIST_UINT32: {
        size_t item = field_table(f, "item", TYPE_INT, int_type(f, 32, false), none);
        size_t children = fbb_offset_vector(f, &item, 1);
        return field_table(f, c->name, TYPE_LIST, empty_table(f), children);
    }
    default: {
        bool wide = c->type == LC_ARW_INT64 || c->type == LC_ARW_UINT64;
        bool is_signed = c->type == LC_ARW_INT32 || c->type == LC_ARW_INT64;
        return field_table(f, c->name, TYPE_INT, int_type(f, wide ? 64 : 32, is_signed), none);
    }
    }
}

/* A message body as the buffers it is made of (borrowed, not copied):
 * written straight after the metadata, each padded to 8 bytes. */
typedef struct piece_s {
    const void *p;
    size_t n;
} piece_t;

typedef struct body_s {
    size_t len;               /* bytes with padding */
    int64_t *nodes, *buffers; /* (length, null_count) / (offset, length) pairs */
    size_t n_nodes, n_buffers, cap_nodes, cap_buffers;
    piece_t *pieces;
    size_t cap_pieces;
} body_t;

static void body_fini(body_t *d)
{
    lc_free(d->nodes);
    lc_free(d->buffers);
    lc_free(d->pieces);
}

/* One encapsulated message: marker, length, flatbuffer Message, body. */
static int write_message(fbb_t *f, int header_type, size_t header, const body_t *body,
                         lc_buf_t *out)
{
    fbb_table_start(f);
    fbb_field_scalar(f, 3, body ? body->len : 0, 8);
    fbb_field_offset(f, 2, header);
    fbb_field_scalar(f, 0, METADATA_V5, 2);
    fbb_field_scalar(f, 1, (uint64_t)header_type, 1);
    size_t msg = fbb_table_end(f);
    static const uint8_t marker[4] = {0xff, 0xff, 0xff, 0xff};
    size_t len_at = out->len + 4, meta_len = 0;
    uint8_t len_le[4] = {0};
    int rc = lc_buf_append(out, marker, 4);
    if (rc == 0)
        rc = lc_buf_append(out, len_le, 4);
    if (rc == 0)
        rc = fbb_finish(f, msg, out, &meta_len);
    if (rc == 0) {
        for (int i = 0; i < 4; i++)
            out->data[len_at + (size_t)i] = (uint8_t)(meta_len >> (8 * i));
        static const uint8_t zeros[8];
        rc = body ? lc_buf_reserve(out, body->len) : 0;
        for (size_t i = 0; body && rc == 0 && i < body->n_buffers; i++) {
            const piece_t *pc = &body->pieces[i];
            rc = pc->n ? lc_buf_append(out, pc->p, pc->n) : 0;
            if (rc == 0)
                rc = lc_buf_append(out, zeros, (8 - pc->n % 8) % 8);
        }
    }
    return rc;
}

static int write_schema(const lc_arw_batch_t *b, lc_buf_t *out)
{
    fbb_t f;
    fbb_init(&f);
    size_t *refs = lc_xcalloc(b->n_cols + 1, sizeof(size_t));
    for (size_t i = 0; i < b->n_cols; i++)
        refs[i] = column_field(&f, &b->cols[i].field, i);
    size_t fields = fbb_offset_vector(&f, refs, b->n_cols);
    lc_free(refs);
    fbb_table_start(&f);
    fbb_field_offset(&f, 1, fields);
    fbb_field_scalar(&f, 0, 0, 2); /* little endian */
    size_t schema = fbb_table_end(&f);
    int rc = write_message(&f, HEADER_SCHEMA, schema, NULL, out);
    fbb_fini(&f);
    return rc;
}

/* ---------------------------------------------------------- record batch */

static int body_buffer(body_t *d, const void *p, size_t n)
{
    d->buffers = lc_xgrow(d->buffers, &d->cap_buffers, 2 * d->n_buffers + 2, sizeof(int64_t));
    d->pieces = lc_xgrow(d->pieces, &d->cap_pieces, d->n_buffers + 1, sizeof(piece_t));
    d->buffers[2 * d->n_buffers] = (int64_t)d->len;
    d->buffers[2 * d->n_buffers + 1] = (int64_t)n;
    d->pieces[d->n_buffers] = (piece_t){p, n};
    d->n_buffers++;
    d->len += n + (8 - n % 8) % 8;
    return 0;
}

static void body_node(body_t *d, size_t length)
{
    d->nodes = lc_xgrow(d->nodes, &d->cap_nodes, 2 * d->n_nodes + 2, sizeof(int64_t));
    d->nodes[2 * d->n_nodes] = (int64_t)length;
    d->nodes[2 * d->n_nodes + 1] = 0;
    d->n_nodes++;
}

static int body_column(body_t *d, const lc_arw_col_t *c)
{
    body_node(d, c->n);
    int rc = body_buffer(d, NULL, 0); /* validity: absent, no nulls */
    switch (c->field.type) {
    case LC_ARW_UTF8:
    case LC_ARW_BINARY:
        if (rc == 0)
            rc = body_buffer(d, c->offsets.data, c->offsets.len);
        return rc ? rc : body_buffer(d, c->values.data, c->values.len);
    case LC_ARW_LIST_UINT32:
        if (rc == 0)
            rc = body_buffer(d, c->offsets.data, c->offsets.len);
        body_node(d, c->items);
        if (rc == 0)
            rc = body_buffer(d, NULL, 0);
        return rc ? rc : body_buffer(d, c->values.data, c->values.len);
    default:
        return rc ? rc : body_buffer(d, c->values.data, c->values.len);
    }
}

/* The flatbuffer RecordBatch table of a body. */
static size_t batch_table(fbb_t *f, const body_t *d, size_t rows)
{
    size_t buffers = fbb_pair_vector(f, d->buffers, d->n_buffers);
    size_t nodes = fbb_pair_vector(f, d->nodes, d->n_nodes);
    fbb_table_start(f);
    fbb_field_scalar(f, 0, rows, 8);
    fbb_field_offset(f, 1, nodes);
    fbb_field_offset(f, 2, buffers);
    return fbb_table_end(f);
}

/* A DictionaryBatch with column col's strings (id = col). */
static int write_dictionary(const lc_arw_col_t *c, size_t col, size_t max, lc_buf_t *out)
{
    body_t d = {0};
    lc_buf_t offsets, values;
    lc_buf_init(&offsets, max);
    lc_buf_init(&values, max);
    int rc = 0;
    int32_t off = 0;
    rc = lc_buf_append(&offsets, &off, 4);
    for (size_t i = 0; i < c->n_dict && rc == 0; i++) {
        size_t n = c->dict[i] ? strlen(c->dict[i]) : 0;
        rc = lc_buf_append(&values, c->dict[i], n);
        off += (int32_t)n;
        if (rc == 0)
            rc = values.len > INT32_MAX ? LC_ETOOBIG : lc_buf_append(&offsets, &off, 4);
    }
    body_node(&d, c->n_dict);
    if (rc == 0)
        rc = body_buffer(&d, NULL, 0);
    if (rc == 0)
        rc = body_buffer(&d, offsets.data, offsets.len);
    if (rc == 0)
        rc = body_buffer(&d, values.data, values.len);
    if (rc == 0) {
        fbb_t f;
        fbb_init(&f);
        size_t batch = batch_table(&f, &d, c->n_dict);
        fbb_table_start(&f);
        fbb_field_scalar(&f, 0, col, 8);
        fbb_field_offset(&f, 1, batch);
        fbb_field_scalar(&f, 2, 0, 1);
        size_t dict = fbb_table_end(&f);
        rc = write_message(&f, HEADER_DICTIONARY_BATCH, dict, &d, out);
        fbb_fini(&f);
    }
    lc_buf_fini(&offsets);
    lc_buf_fini(&values);
    body_fini(&d);
    return rc;
}

static int write_batch(const lc_arw_batch_t *b, size_t rows, lc_buf_t *out)
{
    body_t d = {0};
    int rc = 0;
    for (size_t i = 0; i < b->n_cols && rc == 0; i++)
        rc = body_column(&d, &b->cols[i]);
    if (rc == 0) {
        fbb_t f;
        fbb_init(&f);
        size_t batch = batch_table(&f, &d, rows);
        rc = write_message(&f, HEADER_RECORD_BATCH, batch, &d, out);
        fbb_fini(&f);
    }
    body_fini(&d);
    return rc;
}

int lc_arw_encode(const lc_arw_batch_t *b, lc_buf_t *out)
{
    if (b->err)
        return b->err;
    size_t rows = b->n_cols ? b->cols[0].n : 0;
    for (size_t i = 0; i < b->n_cols; i++)
        if (b->cols[i].n != rows)
            return LC_EINPUT;
    int rc = write_schema(b, out);
    for (size_t i = 0; i < b->n_cols && rc == 0; i++)
        if (b->cols[i].field.type == LC_ARW_DICT_UTF8)
            rc = write_dictionary(&b->cols[i], i, out->max, out);
    if (rc == 0)
        rc = write_batch(b, rows, out);
    static const uint8_t eos[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    return rc ? rc : lc_buf_append(out, eos, sizeof(eos));
}
