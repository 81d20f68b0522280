/*
 * lc/arrow_write.h — a small Apache Arrow IPC stream writer (columnar format
 * 1.0, metadata V5) for the Parca reports that answer Arrow records
 * (FLAMEGRAPH_ARROW, TABLE_ARROW) and the stack trace ids ember asks the
 * Parca Agent for in ProfileStoreService/Write (issue 28). Debian has no C Arrow library, and the
 * reports need only a handful of types, so the writer is ember's own: a
 * schema message, one record batch, the end-of-stream marker, with the
 * flatbuffers metadata built back to front as the flatbuffers format lays
 * it out.
 *
 * Types: utf8, binary, dictionary<int32, utf8> (one DictionaryBatch message per
 * such column, before the record batch), int32/uint32/int64/uint64, bool and
 * list<uint32>; no nulls
 * (every validity buffer is absent, null_count 0). Columns are appended row
 * by row. Ownership: the batch owns its buffers until lc_arw_batch_fini.
 * Threading: one batch per thread.
 */
#ifndef LC_ARROW_WRITE_H
#define LC_ARROW_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lc/alloc.h"

typedef enum {
    LC_ARW_UTF8,
    LC_ARW_BINARY,
    LC_ARW_INT32,
    LC_ARW_UINT32,
    LC_ARW_INT64,
    LC_ARW_UINT64,
    LC_ARW_BOOL,
    LC_ARW_LIST_UINT32,
    LC_ARW_DICT_UTF8, /* dictionary<int32, utf8>: values are indices into a string table */
} lc_arw_type_t;

typedef struct lc_arw_field_s {
    const char *name;
    lc_arw_type_t type;
} lc_arw_field_t;

typedef struct lc_arw_col_s {
    lc_arw_field_t field;
    const char *const *dict; /* LC_ARW_DICT_UTF8: the strings (borrowed) */
    size_t n_dict;
    lc_buf_t values;  /* fixed-width values, bool bits, utf8 bytes or list items */
    lc_buf_t offsets; /* utf8 / list: int32 offsets, n + 1 of them */
    size_t n;         /* rows */
    size_t items;     /* utf8 bytes / list items so far */
} lc_arw_col_t;

typedef struct lc_arw_batch_s {
    lc_arw_col_t *cols;
    size_t n_cols;
    int err; /* first append error (cap passed); lc_arw_encode reports it */
} lc_arw_batch_t;

/* Columns as fields says (copied); each buffer capped at max_bytes. */
void lc_arw_batch_init(lc_arw_batch_t *b, const lc_arw_field_t *fields, size_t n, size_t max_bytes);
void lc_arw_batch_fini(lc_arw_batch_t *b);

/* Makes room for rows more rows in every column (one allocation each
 * instead of doublings); a hint: a cap passed is reported by lc_arw_encode. */
void lc_arw_batch_reserve(lc_arw_batch_t *b, size_t rows);

/* One value appended to column col (which must have the matching type). */
void lc_arw_put_str(lc_arw_batch_t *b, size_t col, const char *s);
void lc_arw_put_bytes(lc_arw_batch_t *b, size_t col, const void *p, size_t n); /* binary, utf8 */
void lc_arw_put_int(lc_arw_batch_t *b, size_t col, int64_t v); /* any integer column */
void lc_arw_put_bool(lc_arw_batch_t *b, size_t col, bool v);
/* lc_arw_put_int for a column known to be 4 bytes wide (int32, uint32,
 * dictionary indices) or 8 (int64, uint64): inline, one store while the
 * column has room (lc_arw_batch_reserve), for reports of 100,000s of rows. */
static inline void lc_arw_put_i32(lc_arw_batch_t *b, size_t col, int64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    lc_arw_col_t *c = &b->cols[col];
    if (c->values.cap - c->values.len >= 4 && !b->err) {
        uint32_t w = (uint32_t)v;
        memcpy(c->values.data + c->values.len, &w, 4);
        c->values.len += 4;
        c->n++;
        return;
    }
#endif
    lc_arw_put_int(b, col, v);
}
static inline void lc_arw_put_i64(lc_arw_batch_t *b, size_t col, int64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    lc_arw_col_t *c = &b->cols[col];
    if (c->values.cap - c->values.len >= 8 && !b->err) {
        memcpy(c->values.data + c->values.len, &v, 8);
        c->values.len += 8;
        c->n++;
        return;
    }
#endif
    lc_arw_put_int(b, col, v);
}
void lc_arw_put_list(lc_arw_batch_t *b, size_t col, const uint32_t *items, size_t n);
/* LC_ARW_DICT_UTF8: the column's dictionary (borrowed until lc_arw_encode), then
 * one index into it per row with lc_arw_put_int. */
void lc_arw_set_dict(lc_arw_batch_t *b, size_t col, const char *const *strings, size_t n);

/* The IPC stream of the batch (every column must have the same row count).
 * Returns 0 or an lc error (LC_ETOOBIG past a cap, LC_EINVAL on ragged
 * columns). */
int lc_arw_encode(const lc_arw_batch_t *b, lc_buf_t *out) LC_MUST_CHECK;

#endif
