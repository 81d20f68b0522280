/*
 * lc/arrow.h — a bounded reader for Arrow IPC *streams* (issue 28): what the
 * Parca Agent sends in WriteArrow (v2) and Write (v1).
 *
 * Reads the encapsulated message format (0xFFFFFFFF, int32 metadata length,
 * flatbuffer Message, body), a Schema, DictionaryBatches (replacement and
 * delta) and RecordBatches, with body compression LZ4_FRAME (liblz4's frame
 * API). Column types: int8..int64 signed and unsigned, bool, timestamp,
 * fixed_size_binary, binary/utf8 and their large and view variants, list,
 * large_list, list_view, large_list_view, struct, run_end_encoded, and any of
 * them dictionary-encoded (dictionaries may nest). Anything else is a clear
 * "unsupported" error.
 *
 * Ownership: the stream borrows the input bytes (they must outlive it) and
 * allocates everything else, decompressed buffers included, in the caller's
 * arena; views stay valid until the arena is reset. lc_arrow_stream_close
 * frees the LZ4 context only. Every size an input can drive is bounded by
 * lc_arrow_limits_t and the arena's cap; malformed input gives -1 and a
 * message in the status, never an abort or a read out of bounds.
 *
 * Threading: a stream is used by one thread; streams are independent.
 */
#ifndef LC_ARROW_H
#define LC_ARROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"

typedef struct lc_arrow_limits_s {
    size_t max_metadata_bytes;     /* one message's flatbuffer */
    size_t max_body_bytes;         /* one message's body, as sent */
    size_t max_decompressed_bytes; /* all LZ4 output of the stream */
    size_t max_messages;           /* schema + dictionaries + batches */
    size_t max_fields;             /* schema nodes, nested ones included */
    size_t max_depth;              /* nesting of types (and of dictionaries) */
    int64_t max_rows;              /* length of any one array (field node) */
    int64_t max_dictionary_rows;   /* one dictionary, deltas included */
    size_t max_buffers;            /* buffers (and field nodes) of one batch */
} lc_arrow_limits_t;

void lc_arrow_limits_default(lc_arrow_limits_t *lim);

typedef enum {
    LC_ARROW_INT, /* also timestamp (int64) */
    LC_ARROW_BOOL,
    LC_ARROW_FIXED_BINARY,
    LC_ARROW_BINARY, /* binary, utf8 (int32 offsets) */
    LC_ARROW_LARGE_BINARY,
    LC_ARROW_BINARY_VIEW,
    LC_ARROW_LIST,
    LC_ARROW_LARGE_LIST,
    LC_ARROW_LIST_VIEW,
    LC_ARROW_LARGE_LIST_VIEW,
    LC_ARROW_STRUCT,
    LC_ARROW_RUN_END, /* children: run_ends (int), values */
} lc_arrow_kind_t;

typedef struct lc_arrow_field_s {
    const char *name;
    bool nullable;
    lc_arrow_kind_t kind;
    bool is_utf8;      /* utf8 / large_utf8 / utf8_view */
    bool is_timestamp; /* INT of 64 bits: unit in time_unit (0 s .. 3 ns) */
    int time_unit;
    int bit_width; /* INT: 8, 16, 32, 64 */
    bool is_signed;
    int32_t byte_width;         /* FIXED_BINARY */
    const char *extension_name; /* field metadata ARROW:extension:name, or NULL */
    bool dict_encoded;          /* values are indices into dictionary dict_id */
    int64_t dict_id;
    int index_bit_width;
    bool index_signed;
    struct lc_arrow_field_s *children;
    size_t n_children;
} lc_arrow_field_t;

typedef struct lc_arrow_schema_s {
    lc_arrow_field_t *fields;
    size_t n_fields;
    const char **meta_keys; /* the schema's custom_metadata */
    const char **meta_values;
    size_t n_meta;
} lc_arrow_schema_t;

typedef struct lc_arrow_dict_s lc_arrow_dict_t;

/* One decoded array; its buffers are checked against its length and type at
 * decode time (offsets monotonic and inside data, views inside their buffers,
 * run ends increasing, list ranges inside the child). Dictionary indices are
 * checked when read, since a later delta may add the entry. */
typedef struct lc_arrow_array_s {
    const lc_arrow_field_t *field;
    int64_t length;
    int64_t null_count;
    const uint8_t *validity; /* NULL: no nulls */
    const uint8_t *values;   /* ints, indices, bool bits, fixed binary, views */
    const uint8_t *offsets;  /* binary and list offsets, list-view offsets */
    const uint8_t *sizes;    /* list-view sizes */
    const uint8_t *data;     /* binary bytes */
    size_t data_len;
    const uint8_t **variadic; /* binary-view data buffers */
    size_t *variadic_len;
    size_t n_variadic;
    struct lc_arrow_array_s *children;
    size_t n_children;
    const lc_arrow_dict_t *dict; /* field->dict_encoded */
} lc_arrow_array_t;

typedef struct lc_arrow_batch_s {
    int64_t length;
    lc_arrow_array_t *columns; /* one per schema field */
    size_t n_columns;
} lc_arrow_batch_t;

typedef struct lc_arrow_stream_s lc_arrow_stream_t;

/* Reads the framing and the Schema message. Returns 0 or -1 (status set). */
int lc_arrow_stream_open(lc_arrow_stream_t **out, const uint8_t *data, size_t len,
                         const lc_arrow_limits_t *lim, lc_arena_t *arena, lc_status_t *st);
const lc_arrow_schema_t *lc_arrow_stream_schema(const lc_arrow_stream_t *s);
/* The next record batch, taking in the dictionary batches before it.
 * Returns 1 (a batch), 0 (end of stream) or -1 (status set). */
int lc_arrow_stream_next(lc_arrow_stream_t *s, const lc_arrow_batch_t **out, lc_status_t *st);
void lc_arrow_stream_close(lc_arrow_stream_t *s);

/* ---- reading values. Each getter follows run-end encoding and dictionary
 * indices down to the array holding the value, and returns 0 (a value),
 * 1 (null) or -1 (status set: row out of range, bad dictionary index, or a
 * getter that does not fit the type). */
int lc_arrow_resolve(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **leaf,
                     int64_t *leaf_row, lc_status_t *st);
int lc_arrow_get_int(const lc_arrow_array_t *a, int64_t row, int64_t *out, lc_status_t *st);
int lc_arrow_get_uint(const lc_arrow_array_t *a, int64_t row, uint64_t *out, lc_status_t *st);
int lc_arrow_get_bool(const lc_arrow_array_t *a, int64_t row, bool *out, lc_status_t *st);
int lc_arrow_get_bytes(const lc_arrow_array_t *a, int64_t row, const uint8_t **p, size_t *n,
                       lc_status_t *st);
/* A list row: the elements are child[start, start + count). */
int lc_arrow_get_list(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **child,
                      int64_t *start, int64_t *count, lc_status_t *st);
/* A struct row: *leaf is the struct array (maybe a dictionary's), read its
 * children at *leaf_row; lc_arrow_child finds one by name (NULL if none). */
int lc_arrow_get_struct(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **leaf,
                        int64_t *leaf_row, lc_status_t *st);
const lc_arrow_array_t *lc_arrow_child(const lc_arrow_array_t *a, const char *name);

#endif
