/*
 * arrow_batch.c — a RecordBatch's field nodes and buffers into arrays.
 * Facts of Arrow's columnar format: fields are laid out depth-first, one
 * FieldNode {length, null_count} per array and, per layout, validity +
 * values (fixed width), validity + offsets + data (binary), validity + views
 * + the variadic data buffers (views), validity + offsets (list), validity +
 * offsets + sizes (list view), validity (struct), none (run-end encoded); a
 * dictionary-encoded array holds only validity + indices. With body
 * compression each non-empty buffer is an int64 uncompressed length (-1:
 * stored raw) and an LZ4 frame.
 */
#include <string.h>

#include "arrow_int.h"

/* RecordBatch table fields (Message.fbs). */
enum { RB_LENGTH = 0, RB_NODES = 1, RB_BUFFERS = 2, RB_COMPRESSION = 3, RB_VARIADIC = 4 };

typedef struct batch_cursor_s {
    lc_arrow_stream_t *s;
    const uint8_t *body;
    size_t body_len;
    bool lz4;
    afb_vector_t nodes, buffers, variadic;
    size_t next_node, next_buffer, next_variadic;
    lc_status_t *st;
} batch_cursor_t;

typedef struct buffer_s {
    const uint8_t *p;
    size_t len;
} buffer_t;

static int column_error(batch_cursor_t *c, const lc_arrow_field_t *f, const char *why)
{
    return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT, "arrow: column \"%s\": %s", f->name, why);
}

static int decompress(batch_cursor_t *c, const uint8_t *src, size_t n, buffer_t *out)
{
    if (n < 8)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: a compressed buffer is shorter than its length prefix");
    int64_t raw = afb_read_le(src, 8, true);
    if (raw == -1) {
        *out = (buffer_t){src + 8, n - 8};
        return 0;
    }
    if (raw < 0 || (uint64_t)raw > c->s->lim.max_decompressed_bytes - c->s->decompressed)
        return lc_status_set(c->st, LC_CODE_RESOURCE_EXHAUSTED,
                             "arrow: decompressed buffers pass the limit of %zu bytes",
                             c->s->lim.max_decompressed_bytes);
    uint8_t *dst = lc_arena_alloc(c->s->arena, raw ? (size_t)raw : 1);
    if (!dst)
        return lc_status_set(c->st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    LZ4F_resetDecompressionContext(c->s->lz4);
    size_t got = 0, used = 0, hint = 1;
    while (hint != 0) {
        size_t dst_n = (size_t)raw - got, src_n = n - 8 - used;
        hint = LZ4F_decompress(c->s->lz4, dst + got, &dst_n, src + 8 + used, &src_n, NULL);
        if (LZ4F_isError(hint))
            return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT, "arrow: bad LZ4 frame: %s",
                                 LZ4F_getErrorName(hint));
        got += dst_n;
        used += src_n;
        if (hint != 0 && dst_n == 0 && src_n == 0)
            return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                                 "arrow: an LZ4 frame is truncated or longer than its "
                                 "declared %lld bytes",
                                 (long long)raw);
    }
    if (got != (size_t)raw)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: an LZ4 frame gave %zu bytes, its prefix said %lld", got,
                             (long long)raw);
    c->s->decompressed += got;
    *out = (buffer_t){dst, got};
    return 0;
}

static int take_buffer(batch_cursor_t *c, buffer_t *out)
{
    if (c->next_buffer >= c->buffers.n)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: the batch has fewer buffers than its schema needs");
    const uint8_t *p = c->buffers.buf + c->buffers.start + 16 * c->next_buffer++;
    int64_t off = afb_read_le(p, 8, true), len = afb_read_le(p + 8, 8, true);
    if (off < 0 || len < 0 || (uint64_t)off > c->body_len ||
        (uint64_t)len > c->body_len - (uint64_t)off)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: a buffer lies outside the message body");
    if (len == 0 || !c->lz4) {
        *out = (buffer_t){c->body + off, (size_t)len};
        return 0;
    }
    return decompress(c, c->body + off, (size_t)len, out);
}

static int take_node(batch_cursor_t *c, const lc_arrow_field_t *f, lc_arrow_array_t *a)
{
    if (c->next_node >= c->nodes.n)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: the batch has fewer field nodes than its schema needs");
    const uint8_t *p = c->nodes.buf + c->nodes.start + 16 * c->next_node++;
    a->field = f;
    a->length = afb_read_le(p, 8, true);
    a->null_count = afb_read_le(p + 8, 8, true);
    if (a->length < 0 || a->length > c->s->lim.max_rows)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: column \"%s\" has %lld rows (limit %lld)", f->name,
                             (long long)a->length, (long long)c->s->lim.max_rows);
    if (a->null_count < 0 || a->null_count > a->length)
        return column_error(c, f, "null count outside 0..length");
    return 0;
}

/* Takes the validity buffer; no bitmap is needed when nothing is null. */
static int take_validity(batch_cursor_t *c, lc_arrow_array_t *a)
{
    buffer_t b;
    if (take_buffer(c, &b) != 0)
        return -1;
    if (a->null_count == 0)
        return 0;
    if (b.len < ((size_t)a->length + 7) / 8)
        return column_error(c, a->field, "validity bitmap shorter than the column");
    a->validity = b.p;
    return 0;
}

/* Takes a buffer of at least length * width bytes (width in bits for bool). */
static int take_fixed(batch_cursor_t *c, lc_arrow_array_t *a, size_t bits, const uint8_t **out,
                      size_t *out_len)
{
    buffer_t b;
    if (take_buffer(c, &b) != 0)
        return -1;
    /* max_rows is the caller's; keep length * bits from wrapping whatever it is */
    if (bits && (uint64_t)a->length > (SIZE_MAX - 7) / bits)
        return column_error(c, a->field, "column too long for its width");
    if (b.len < ((size_t)a->length * bits + 7) / 8)
        return column_error(c, a->field, "buffer shorter than the column");
    *out = b.p;
    if (out_len)
        *out_len = b.len;
    return 0;
}

/* Offsets: length + 1 of them (none for an empty column), non-decreasing,
 * from 0 or more up to limit. */
static int check_offsets(batch_cursor_t *c, lc_arrow_array_t *a, size_t width, int64_t limit)
{
    if (a->length == 0)
        return 0;
    int64_t prev = afb_read_le(a->offsets, width, true);
    if (prev < 0)
        return column_error(c, a->field, "negative offset");
    for (int64_t i = 1; i <= a->length; i++) {
        int64_t next = afb_read_le(a->offsets + (size_t)i * width, width, true);
        if (next < prev)
            return column_error(c, a->field, "offsets decrease");
        prev = next;
    }
    if (prev > limit)
        return column_error(c, a->field, "offsets point past the data");
    return 0;
}

static int read_binary(batch_cursor_t *c, lc_arrow_array_t *a, size_t width)
{
    buffer_t data;
    if (a->length > 0 &&
        take_fixed(c, &(lc_arrow_array_t){.field = a->field, .length = a->length + 1}, width * 8,
                   &a->offsets, NULL) != 0)
        return -1;
    if (a->length == 0) {
        buffer_t skip;
        if (take_buffer(c, &skip) != 0)
            return -1;
    }
    if (take_buffer(c, &data) != 0)
        return -1;
    a->data = data.p;
    a->data_len = data.len;
    return check_offsets(c, a, width, (int64_t)data.len);
}

static int check_views(batch_cursor_t *c, lc_arrow_array_t *a)
{
    for (int64_t i = 0; i < a->length; i++) {
        const uint8_t *v = a->values + 16 * (size_t)i;
        int64_t len = afb_read_le(v, 4, true);
        if (len < 0)
            return column_error(c, a->field, "negative view length");
        if (len <= 12)
            continue;
        int64_t idx = afb_read_le(v + 8, 4, true), off = afb_read_le(v + 12, 4, true);
        if (idx < 0 || (size_t)idx >= a->n_variadic || off < 0 ||
            (uint64_t)off + (uint64_t)len > a->variadic_len[idx])
            return column_error(c, a->field, "a view points outside its data buffers");
    }
    return 0;
}

static int read_views(batch_cursor_t *c, lc_arrow_array_t *a)
{
    if (take_fixed(c, a, 128, &a->values, NULL) != 0)
        return -1;
    if (c->next_variadic >= c->variadic.n)
        return column_error(c, a->field, "no variadic buffer count for a view column");
    int64_t n = afb_read_le(c->variadic.buf + c->variadic.start + 8 * c->next_variadic++, 8, true);
    if (n < 0 || (uint64_t)n > c->buffers.n - c->next_buffer)
        return column_error(c, a->field, "variadic buffer count past the batch's buffers");
    a->n_variadic = (size_t)n;
    a->variadic = lc_arena_calloc(c->s->arena, a->n_variadic + 1, sizeof(*a->variadic));
    a->variadic_len = lc_arena_calloc(c->s->arena, a->n_variadic + 1, sizeof(size_t));
    if (!a->variadic || !a->variadic_len)
        return lc_status_set(c->st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    for (size_t i = 0; i < a->n_variadic; i++) {
        buffer_t b;
        if (take_buffer(c, &b) != 0)
            return -1;
        a->variadic[i] = b.p;
        a->variadic_len[i] = b.len;
    }
    return check_views(c, a);
}

static int read_array(batch_cursor_t *c, const lc_arrow_field_t *f, lc_arrow_array_t *a,
                      size_t depth);

static int read_children(batch_cursor_t *c, lc_arrow_array_t *a, size_t depth)
{
    const lc_arrow_field_t *f = a->field;
    a->n_children = f->n_children;
    a->children = lc_arena_calloc(c->s->arena, f->n_children + 1, sizeof(*a->children));
    if (!a->children)
        return lc_status_set(c->st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    for (size_t i = 0; i < f->n_children; i++)
        if (read_array(c, &f->children[i], &a->children[i], depth + 1) != 0)
            return -1;
    return 0;
}

static int read_list(batch_cursor_t *c, lc_arrow_array_t *a, size_t width, bool view, size_t depth)
{
    size_t n_offsets = (size_t)a->length + (view ? 0 : 1);
    if (a->length > 0 || view) {
        if (take_fixed(c, &(lc_arrow_array_t){.field = a->field, .length = (int64_t)n_offsets},
                       width * 8, &a->offsets, NULL) != 0)
            return -1;
    } else {
        buffer_t skip;
        if (take_buffer(c, &skip) != 0)
            return -1;
    }
    if (view && take_fixed(c, a, width * 8, &a->sizes, NULL) != 0)
        return -1;
    if (read_children(c, a, depth) != 0)
        return -1;
    int64_t child_len = a->children[0].length;
    if (!view)
        return check_offsets(c, a, width, child_len);
    for (int64_t i = 0; i < a->length; i++) {
        int64_t off = afb_read_le(a->offsets + (size_t)i * width, width, true);
        int64_t size = afb_read_le(a->sizes + (size_t)i * width, width, true);
        if (off < 0 || size < 0 || off > child_len || size > child_len - off)
            return column_error(c, a->field, "a list view points outside its child");
    }
    return 0;
}

/* Run ends: no nulls, strictly increasing, positive, the last covering length. */
static int read_run_end(batch_cursor_t *c, lc_arrow_array_t *a, size_t depth)
{
    if (read_children(c, a, depth) != 0)
        return -1;
    const lc_arrow_array_t *ends = &a->children[0], *vals = &a->children[1];
    if (ends->null_count != 0 || vals->length < ends->length)
        return column_error(c, a->field, "run ends with nulls or more runs than values");
    size_t width = (size_t)ends->field->bit_width / 8;
    int64_t prev = 0;
    for (int64_t i = 0; i < ends->length; i++) {
        int64_t end = afb_read_le(ends->values + (size_t)i * width, width, true);
        if (end <= prev)
            return column_error(c, a->field, "run ends do not increase");
        prev = end;
    }
    if (prev < a->length)
        return column_error(c, a->field, "run ends stop before the column does");
    return 0;
}

static int read_struct_array(batch_cursor_t *c, lc_arrow_array_t *a, size_t depth)
{
    if (read_children(c, a, depth) != 0)
        return -1;
    for (size_t i = 0; i < a->n_children; i++)
        if (a->children[i].length < a->length)
            return column_error(c, a->field, "a struct child is shorter than the struct");
    return 0;
}

static int read_layout(batch_cursor_t *c, lc_arrow_array_t *a, size_t depth)
{
    const lc_arrow_field_t *f = a->field;
    switch (f->kind) {
    case LC_ARROW_INT:
        return take_fixed(c, a, (size_t)f->bit_width, &a->values, NULL);
    case LC_ARROW_BOOL:
        return take_fixed(c, a, 1, &a->values, NULL);
    case LC_ARROW_FIXED_BINARY:
        return take_fixed(c, a, (size_t)f->byte_width * 8, &a->values, NULL);
    case LC_ARROW_BINARY:
        return read_binary(c, a, 4);
    case LC_ARROW_LARGE_BINARY:
        return read_binary(c, a, 8);
    case LC_ARROW_BINARY_VIEW:
        return read_views(c, a);
    case LC_ARROW_LIST:
        return read_list(c, a, 4, false, depth);
    case LC_ARROW_LARGE_LIST:
        return read_list(c, a, 8, false, depth);
    case LC_ARROW_LIST_VIEW:
        return read_list(c, a, 4, true, depth);
    case LC_ARROW_LARGE_LIST_VIEW:
        return read_list(c, a, 8, true, depth);
    case LC_ARROW_STRUCT:
        return read_struct_array(c, a, depth);
    case LC_ARROW_RUN_END:
        return read_run_end(c, a, depth);
    }
    return column_error(c, f, "unsupported type");
}

static int read_array(batch_cursor_t *c, const lc_arrow_field_t *f, lc_arrow_array_t *a,
                      size_t depth)
{
    if (depth > c->s->lim.max_depth)
        return column_error(c, f, "nested too deep");
    if (take_node(c, f, a) != 0)
        return -1;
    if (f->dict_encoded) {
        a->dict = arrow_dict_find(c->s, f->dict_id);
        if (!a->dict)
            return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                                 "arrow: column \"%s\" uses dictionary %lld before it was sent",
                                 f->name, (long long)f->dict_id);
        return take_validity(c, a) != 0
                   ? -1
                   : take_fixed(c, a, (size_t)f->index_bit_width, &a->values, NULL);
    }
    if (f->kind == LC_ARROW_RUN_END) {
        if (a->null_count != 0)
            return column_error(c, f, "a run-end encoded array has its own null count");
        return read_layout(c, a, depth);
    }
    if (take_validity(c, a) != 0)
        return -1;
    return read_layout(c, a, depth);
}

static int open_cursor(batch_cursor_t *c, const afb_table_t *rb)
{
    afb_table_t comp;
    int rc = afb_table(rb, RB_COMPRESSION, &comp);
    if (rc < 0)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT, "arrow: malformed compression");
    if (rc == 0) {
        int64_t codec = 0, method = 0;
        if (afb_int(&comp, 0, 1, &codec) < 0 || afb_int(&comp, 1, 1, &method) < 0)
            return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT, "arrow: malformed compression");
        if (codec != 0 || method != 0)
            return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                                 "arrow: body compression codec %lld is not supported "
                                 "(only LZ4_FRAME)",
                                 (long long)codec);
        c->lz4 = true;
    }
    if (afb_vector(rb, RB_NODES, 16, &c->nodes) < 0 ||
        afb_vector(rb, RB_BUFFERS, 16, &c->buffers) < 0 ||
        afb_vector(rb, RB_VARIADIC, 8, &c->variadic) < 0)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT, "arrow: malformed record batch");
    if (c->nodes.n > c->s->lim.max_buffers || c->buffers.n > c->s->lim.max_buffers)
        return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: a batch has more than %zu buffers or field nodes",
                             c->s->lim.max_buffers);
    return 0;
}

int arrow_batch_read(lc_arrow_stream_t *s, const afb_table_t *rb, const uint8_t *body,
                     size_t body_len, const lc_arrow_field_t *fields, size_t n_fields,
                     lc_arrow_array_t **arrays, int64_t *length, lc_status_t *st)
{
    batch_cursor_t c = {.s = s, .body = body, .body_len = body_len, .st = st};
    if (open_cursor(&c, rb) != 0)
        return -1;
    if (afb_int(rb, RB_LENGTH, 8, length) < 0 || *length < 0 || *length > s->lim.max_rows)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: a batch's row count is negative or past %lld",
                             (long long)s->lim.max_rows);
    *arrays = lc_arena_calloc(s->arena, n_fields + 1, sizeof(**arrays));
    if (!*arrays)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    for (size_t i = 0; i < n_fields; i++) {
        if (read_array(&c, &fields[i], &(*arrays)[i], 1) != 0)
            return -1;
        if ((*arrays)[i].length < *length)
            return column_error(&c, &fields[i], "column shorter than the batch");
    }
    return 0;
}
