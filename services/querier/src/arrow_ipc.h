/*
 * arrow_ipc.h — a small Apache Arrow IPC stream writer (columnar format
 * 1.0, metadata V5) for the Parca reports that answer Arrow records
 * (FLAMEGRAPH_ARROW, TABLE_ARROW). Debian has no C Arrow library, and the
 * reports need only a handful of types, so the writer is ember's own: a
 * schema message, one record batch, the end-of-stream marker, with the
 * flatbuffers metadata built back to front as the flatbuffers format lays
 * it out.
 *
 * Types: utf8, dictionary<int32, utf8> (one DictionaryBatch message per
 * such column, before the record batch), int32/uint32/int64/uint64, bool and
 * list<uint32>; no nulls
 * (every validity buffer is absent, null_count 0). Columns are appended row
 * by row. Ownership: the batch owns its buffers until arw_batch_fini.
 * Threading: one batch per thread.
 */
#ifndef EMBER_ARROW_IPC_H
#define EMBER_ARROW_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lc/alloc.h"

typedef enum {
    ARW_UTF8,
    ARW_INT32,
    ARW_UINT32,
    ARW_INT64,
    ARW_UINT64,
    ARW_BOOL,
    ARW_LIST_UINT32,
    ARW_DICT_UTF8, /* dictionary<int32, utf8>: values are indices into a string table */
} arw_type_t;

typedef struct arw_field_s {
    const char *name;
    arw_type_t type;
} arw_field_t;

typedef struct arw_col_s {
    arw_field_t field;
    const char *const *dict; /* ARW_DICT_UTF8: the strings (borrowed) */
    size_t n_dict;
    lc_buf_t values;  /* fixed-width values, bool bits, utf8 bytes or list items */
    lc_buf_t offsets; /* utf8 / list: int32 offsets, n + 1 of them */
    size_t n;         /* rows */
    size_t items;     /* utf8 bytes / list items so far */
} arw_col_t;

typedef struct arw_batch_s {
    arw_col_t *cols;
    size_t n_cols;
    int err; /* first append error (cap passed); arw_encode reports it */
} arw_batch_t;

/* Columns as fields says (copied); each buffer capped at max_bytes. */
void arw_batch_init(arw_batch_t *b, const arw_field_t *fields, size_t n, size_t max_bytes);
void arw_batch_fini(arw_batch_t *b);

/* Makes room for rows more rows in every column (one allocation each
 * instead of doublings); a hint: a cap passed is reported by arw_encode. */
void arw_batch_reserve(arw_batch_t *b, size_t rows);

/* One value appended to column col (which must have the matching type). */
void arw_put_str(arw_batch_t *b, size_t col, const char *s);
void arw_put_int(arw_batch_t *b, size_t col, int64_t v); /* any integer column */
void arw_put_bool(arw_batch_t *b, size_t col, bool v);
/* arw_put_int for a column known to be 4 bytes wide (int32, uint32,
 * dictionary indices) or 8 (int64, uint64): inline, one store while the
 * column has room (arw_batch_reserve), for reports of 100,000s of rows. */
static inline void arw_put_i32(arw_batch_t *b, size_t col, int64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    arw_col_t *c = &b->cols[col];
    if (c->values.cap - c->values.len >= 4 && !b->err) {
        uint32_t w = (uint32_t)v;
        memcpy(c->values.data + c->values.len, &w, 4);
        c->values.len += 4;
        c->n++;
        return;
    }
#endif
    arw_put_int(b, col, v);
}
static inline void arw_put_i64(arw_batch_t *b, size_t col, int64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    arw_col_t *c = &b->cols[col];
    if (c->values.cap - c->values.len >= 8 && !b->err) {
        memcpy(c->values.data + c->values.len, &v, 8);
        c->values.len += 8;
        c->n++;
        return;
    }
#endif
    arw_put_int(b, col, v);
}
void arw_put_list(arw_batch_t *b, size_t col, const uint32_t *items, size_t n);
/* ARW_DICT_UTF8: the column's dictionary (borrowed until arw_encode), then
 * one index into it per row with arw_put_int. */
void arw_set_dict(arw_batch_t *b, size_t col, const char *const *strings, size_t n);

/* The IPC stream of the batch (every column must have the same row count).
 * Returns 0 or an lc error (LC_ETOOBIG past a cap, LC_EINVAL on ragged
 * columns). */
int arw_encode(const arw_batch_t *b, lc_buf_t *out) LC_MUST_CHECK;

#endif
