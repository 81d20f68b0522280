/*
 * arrow_stream.c — framing and message order of an Arrow IPC stream, and the
 * dictionaries. Facts of the format: each message is 0xFFFFFFFF, an int32
 * metadata length, the flatbuffer Message {version 0, header_type 1, header 2,
 * bodyLength 3} padded to 8, then bodyLength bytes of body; a length of 0 ends
 * the stream (older writers omit the 0xFFFFFFFF). DictionaryBatch {id 0,
 * data 1, isDelta 2} replaces or (delta) extends a dictionary.
 */
#include <string.h>

#include "arrow_int.h"

enum { HEADER_SCHEMA = 1, HEADER_DICTIONARY = 2, HEADER_RECORD_BATCH = 3 };

void lc_arrow_limits_default(lc_arrow_limits_t *lim)
{
    *lim = (lc_arrow_limits_t){
        .max_metadata_bytes = 1 << 20,
        .max_body_bytes = 64 << 20,
        .max_decompressed_bytes = 256 << 20,
        .max_messages = 100000,
        .max_fields = 1024,
        .max_depth = 16,
        .max_rows = 16 << 20,
        .max_dictionary_rows = 16 << 20,
        .max_buffers = 65536,
    };
}

static int malformed(lc_status_t *st, const char *what, size_t at)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "arrow: %s at byte %zu", what, at);
}

static int frame_length(lc_arrow_stream_t *s, int64_t *meta_len, lc_status_t *st)
{
    size_t left = s->len - s->pos;
    if (left == 0) {
        *meta_len = 0; /* no end-of-stream marker: the stream simply ends */
        return 0;
    }
    if (left < 4)
        return malformed(st, "truncated message length", s->pos);
    int64_t v = afb_read_le(s->data + s->pos, 4, false);
    s->pos += 4;
    if (v == 0xFFFFFFFF) {
        if (s->len - s->pos < 4)
            return malformed(st, "truncated message length", s->pos);
        v = afb_read_le(s->data + s->pos, 4, true);
        s->pos += 4;
    }
    if (v < 0 || (uint64_t)v > s->lim.max_metadata_bytes || (uint64_t)v > s->len - s->pos)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: message metadata of %lld bytes at byte %zu is negative, "
                             "past the limit (%zu) or past the end",
                             (long long)v, s->pos, s->lim.max_metadata_bytes);
    *meta_len = v;
    return 0;
}

/* Reads the next message; returns 1, 0 at the end of the stream, or -1. */
static int next_message(lc_arrow_stream_t *s, arrow_msg_t *m, lc_status_t *st)
{
    int64_t meta_len = 0;
    if (s->ended || frame_length(s, &meta_len, st) != 0)
        return s->ended ? 0 : -1;
    if (meta_len == 0) {
        s->ended = true;
        return 0;
    }
    if (++s->messages > s->lim.max_messages)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "arrow: more than %zu messages",
                             s->lim.max_messages);
    afb_table_t msg;
    int64_t version = 0, type = 0, body_len = 0;
    size_t at = s->pos;
    if (afb_root(s->data + s->pos, (size_t)meta_len, &msg) != 0 ||
        afb_int(&msg, 0, 2, &version) < 0 || afb_int(&msg, 1, 1, &type) < 0 ||
        afb_int(&msg, 3, 8, &body_len) < 0 || afb_table(&msg, 2, &m->header) != 0)
        return malformed(st, "malformed message header", at);
    s->pos += (size_t)meta_len;
    if (version < 3)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: metadata version V%lld is too old (V4 or later)",
                             (long long)version + 1);
    if (body_len < 0 || (uint64_t)body_len > s->lim.max_body_bytes ||
        (uint64_t)body_len > s->len - s->pos)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: message body of %lld bytes at byte %zu is negative, past "
                             "the limit (%zu) or past the end",
                             (long long)body_len, s->pos, s->lim.max_body_bytes);
    m->header_type = (int)type;
    m->body = s->data + s->pos;
    m->body_len = (size_t)body_len;
    s->pos += (size_t)body_len;
    return 1;
}

/* A new dictionary (replacement) or the current one grown by a chunk (delta).
 * A replacement is a new object so batches already read keep their values. */
static lc_arrow_dict_t *dict_for_update(lc_arrow_stream_t *s, size_t k, bool delta)
{
    lc_arrow_dict_t *d = s->dicts[k];
    if (!delta || !d) {
        d = lc_arena_calloc(s->arena, 1, sizeof(*d));
        if (!d)
            return NULL;
        lc_arrow_field_t *value = lc_arena_alloc(s->arena, sizeof(*value));
        if (!value)
            return NULL;
        *value = *s->dict_fields[k];
        value->dict_encoded = false;
        d->id = value->dict_id;
        d->value_field = value;
    }
    if (d->n_chunks == d->cap_chunks) {
        size_t cap = d->cap_chunks ? 2 * d->cap_chunks : 4;
        lc_arrow_array_t *chunks = lc_arena_calloc(s->arena, cap, sizeof(*chunks));
        int64_t *starts = lc_arena_calloc(s->arena, cap, sizeof(*starts));
        if (!chunks || !starts)
            return NULL;
        if (d->n_chunks) {
            memcpy(chunks, d->chunks, d->n_chunks * sizeof(*chunks));
            memcpy(starts, d->chunk_start, d->n_chunks * sizeof(*starts));
        }
        d->chunks = chunks;
        d->chunk_start = starts;
        d->cap_chunks = cap;
    }
    return d;
}

static int read_dictionary(lc_arrow_stream_t *s, const arrow_msg_t *m, lc_status_t *st)
{
    int64_t id = 0, delta = 0;
    afb_table_t rb;
    if (afb_int(&m->header, 0, 8, &id) < 0 || afb_int(&m->header, 2, 1, &delta) < 0 ||
        afb_table(&m->header, 1, &rb) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "arrow: malformed dictionary batch");
    size_t k = 0;
    while (k < s->n_dicts && s->dict_fields[k]->dict_id != id)
        k++;
    if (k == s->n_dicts)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: dictionary batch for id %lld, which no field uses",
                             (long long)id);
    lc_arrow_dict_t *d = dict_for_update(s, k, delta != 0);
    if (!d)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    lc_arrow_array_t *arrays = NULL;
    int64_t rows = 0;
    if (arrow_batch_read(s, &rb, m->body, m->body_len, d->value_field, 1, &arrays, &rows, st) != 0)
        return -1;
    if (arrays[0].length > s->lim.max_dictionary_rows - d->length)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: dictionary %lld passes %lld entries", (long long)id,
                             (long long)s->lim.max_dictionary_rows);
    d->chunks[d->n_chunks] = arrays[0];
    d->chunk_start[d->n_chunks++] = d->length;
    d->length += arrays[0].length;
    s->dicts[k] = d;
    return 0;
}

int lc_arrow_stream_open(lc_arrow_stream_t **out, const uint8_t *data, size_t len,
                         const lc_arrow_limits_t *lim, lc_arena_t *arena, lc_status_t *st)
{
    *out = NULL;
    lc_arrow_stream_t *s = lc_arena_calloc(arena, 1, sizeof(*s));
    if (!s)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    *s = (lc_arrow_stream_t){.data = data, .len = len, .lim = *lim, .arena = arena};
    arrow_msg_t m;
    int rc = next_message(s, &m, st);
    if (rc < 0)
        return -1;
    if (rc == 0 || m.header_type != HEADER_SCHEMA)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: the stream does not start with a schema");
    if (arrow_schema_read(s, &m.header, st) != 0)
        return -1;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&s->lz4, LZ4F_VERSION)))
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: no LZ4 context");
    *out = s;
    return 0;
}

const lc_arrow_schema_t *lc_arrow_stream_schema(const lc_arrow_stream_t *s)
{
    return &s->schema;
}

int lc_arrow_stream_next(lc_arrow_stream_t *s, const lc_arrow_batch_t **out, lc_status_t *st)
{
    for (;;) {
        arrow_msg_t m;
        int rc = next_message(s, &m, st);
        if (rc <= 0)
            return rc;
        if (m.header_type == HEADER_DICTIONARY) {
            if (read_dictionary(s, &m, st) != 0)
                return -1;
            continue;
        }
        if (m.header_type != HEADER_RECORD_BATCH)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "arrow: unexpected message type %d after the schema",
                                 m.header_type);
        lc_arrow_batch_t *b = &s->batch;
        *b = (lc_arrow_batch_t){.n_columns = s->schema.n_fields};
        if (arrow_batch_read(s, &m.header, m.body, m.body_len, s->schema.fields, s->schema.n_fields,
                             &b->columns, &b->length, st) != 0)
            return -1;
        *out = b;
        return 1;
    }
}

void lc_arrow_stream_close(lc_arrow_stream_t *s)
{
    if (s && s->lz4)
        LZ4F_freeDecompressionContext(s->lz4);
}
