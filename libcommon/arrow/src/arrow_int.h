/*
 * arrow_int.h — the arrow room's private parts: a minimal flatbuffer table
 * reader and the stream state shared by arrow_schema.c, arrow_batch.c and
 * arrow_stream.c. Single-threaded like the stream.
 *
 * Why our own flatbuffer reader: Debian 12 ships no flatbuffers C runtime
 * (flatcc is not packaged), and Arrow's messages need only tables, scalars,
 * strings, vectors and unions; every read here checks its bounds, which a
 * generated reader would not do without a separate verifier.
 */
#ifndef LC_ARROW_INT_H
#define LC_ARROW_INT_H

#include <lz4frame.h>

#include "lc/arrow.h"

/* A flatbuffer table: where it starts and where its vtable is, inside buf. */
typedef struct afb_table_s {
    const uint8_t *buf;
    size_t len;
    size_t pos;
    size_t vtable;
    size_t vtable_len;
    size_t table_len;
} afb_table_t;

/* A vector: n elements of elem_size bytes at buf + start. */
typedef struct afb_vector_s {
    const uint8_t *buf;
    size_t len;
    size_t start;
    size_t n;
} afb_vector_t;

/* All return 0 (found), 1 (absent: the default applies) or -1 (corrupt). */
int afb_root(const uint8_t *buf, size_t len, afb_table_t *t);
int afb_int(const afb_table_t *t, unsigned id, size_t size, int64_t *out);
int afb_table(const afb_table_t *t, unsigned id, afb_table_t *sub);
int afb_vector(const afb_table_t *t, unsigned id, size_t elem_size, afb_vector_t *v);
int afb_vector_table(const afb_vector_t *v, size_t i, afb_table_t *sub);
int afb_string(const afb_table_t *t, unsigned id, const char **s, size_t *n);
int64_t afb_read_le(const uint8_t *p, size_t size, bool is_signed);

typedef struct lc_arrow_dict_s {
    int64_t id;
    const lc_arrow_field_t *value_field; /* the dictionary's type, not encoded */
    lc_arrow_array_t *chunks;            /* the first batch, then deltas */
    int64_t *chunk_start;                /* first row of each chunk */
    size_t n_chunks;
    size_t cap_chunks;
    int64_t length;
} lc_arrow_dict_t;

struct lc_arrow_stream_s {
    const uint8_t *data;
    size_t len;
    size_t pos;
    lc_arrow_limits_t lim;
    lc_arena_t *arena;
    LZ4F_dctx *lz4;
    size_t messages;
    size_t decompressed;
    bool ended;
    lc_arrow_schema_t schema;
    const lc_arrow_field_t **dict_fields; /* every dictionary-encoded field */
    lc_arrow_dict_t **dicts;              /* current dictionary per dict_fields[i] */
    size_t n_dicts;
    lc_arrow_batch_t batch;
};

/* One framed message: its flatbuffer header and its body. */
typedef struct arrow_msg_s {
    int header_type; /* 1 Schema, 2 DictionaryBatch, 3 RecordBatch */
    afb_table_t header;
    const uint8_t *body;
    size_t body_len;
} arrow_msg_t;

int arrow_schema_read(lc_arrow_stream_t *s, const afb_table_t *schema, lc_status_t *st);
/* Decodes a RecordBatch table against fields into arrays. */
int arrow_batch_read(lc_arrow_stream_t *s, const afb_table_t *rb, const uint8_t *body,
                     size_t body_len, const lc_arrow_field_t *fields, size_t n_fields,
                     lc_arrow_array_t **arrays, int64_t *length, lc_status_t *st);
lc_arrow_dict_t *arrow_dict_find(const lc_arrow_stream_t *s, int64_t id);

#endif
