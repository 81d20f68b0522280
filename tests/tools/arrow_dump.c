/*
 * arrow_dump.c — decodes an Arrow IPC stream with lc/arrow.h and prints every
 * value as JSON, so tests/integration/test_arrow_ipc.py can compare it with
 * what pyarrow wrote (the oracle). Integers print as decimal strings (uint64
 * does not fit a JSON number), bytes as lower-case hex, structs as objects,
 * lists as arrays; run-end encoding and dictionaries are resolved.
 *
 * Usage: arrow_dump FILE [--parca-request]   (the latter: FILE is a
 * WriteArrowRequest whose field 1 holds the stream). Exit 1 with the
 * reader's message on stderr when the stream is rejected.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/arrow.h"

static json_t *value_json(const lc_arrow_array_t *a, int64_t row, lc_status_t *st);

static json_t *hex_json(const uint8_t *p, size_t n)
{
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = 0;
    json_t *j = json_string(s);
    free(s);
    return j;
}

static json_t *int_json(const lc_arrow_array_t *leaf, int64_t row, lc_status_t *st)
{
    char text[32];
    if (leaf->field->is_signed) {
        int64_t v;
        if (lc_arrow_get_int(leaf, row, &v, st) != 0)
            return NULL;
        snprintf(text, sizeof(text), "%lld", (long long)v);
    } else {
        uint64_t v;
        if (lc_arrow_get_uint(leaf, row, &v, st) != 0)
            return NULL;
        snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
    }
    return json_string(text);
}

static json_t *list_json(const lc_arrow_array_t *a, int64_t row, lc_status_t *st)
{
    const lc_arrow_array_t *child;
    int64_t start, count;
    if (lc_arrow_get_list(a, row, &child, &start, &count, st) != 0)
        return NULL;
    json_t *arr = json_array();
    for (int64_t i = 0; i < count; i++) {
        json_t *v = value_json(child, start + i, st);
        if (!v) {
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, v);
    }
    return arr;
}

static json_t *struct_json(const lc_arrow_array_t *s, int64_t row, lc_status_t *st)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < s->n_children; i++) {
        json_t *v = value_json(&s->children[i], row, st);
        if (!v) {
            json_decref(obj);
            return NULL;
        }
        json_object_set_new(obj, s->children[i].field->name, v);
    }
    return obj;
}

static json_t *value_json(const lc_arrow_array_t *a, int64_t row, lc_status_t *st)
{
    const lc_arrow_array_t *leaf;
    int64_t r;
    int rc = lc_arrow_resolve(a, row, &leaf, &r, st);
    if (rc < 0)
        return NULL;
    if (rc == 1)
        return json_null();
    const uint8_t *p;
    size_t n;
    bool b;
    switch (leaf->field->kind) {
    case LC_ARROW_INT:
        return int_json(leaf, r, st);
    case LC_ARROW_BOOL:
        return lc_arrow_get_bool(leaf, r, &b, st) == 0 ? json_boolean(b) : NULL;
    case LC_ARROW_FIXED_BINARY:
    case LC_ARROW_BINARY:
    case LC_ARROW_LARGE_BINARY:
    case LC_ARROW_BINARY_VIEW:
        return lc_arrow_get_bytes(leaf, r, &p, &n, st) == 0 ? hex_json(p, n) : NULL;
    case LC_ARROW_STRUCT:
        return struct_json(leaf, r, st);
    default:
        return list_json(leaf, r, st);
    }
}

static json_t *batch_json(const lc_arrow_schema_t *sc, const lc_arrow_batch_t *b, lc_status_t *st)
{
    json_t *obj = json_object();
    for (size_t c = 0; c < b->n_columns; c++) {
        json_t *col = json_array();
        json_object_set_new(obj, sc->fields[c].name, col);
        for (int64_t row = 0; row < b->length; row++) {
            json_t *v = value_json(&b->columns[c], row, st);
            if (!v) {
                json_decref(obj);
                return NULL;
            }
            json_array_append_new(col, v);
        }
    }
    return obj;
}

/* The bytes of field 1 (ipc_buffer) of a WriteArrowRequest. */
static int unwrap_request(const uint8_t **data, size_t *len)
{
    const uint8_t *p = *data, *end = p + *len;
    while (p < end) {
        uint64_t key, n;
        if (lc_uvarint_get(&p, end, &key) != 0 || (key & 7) != 2 ||
            lc_uvarint_get(&p, end, &n) != 0 || n > (uint64_t)(end - p))
            return -1;
        if (key >> 3 == 1) {
            *data = p;
            *len = (size_t)n;
            return 0;
        }
        p += n;
    }
    return -1;
}

static int dump(const uint8_t *data, size_t len, lc_arena_t *arena, lc_status_t *st)
{
    lc_arrow_limits_t lim;
    lc_arrow_limits_default(&lim);
    lc_arrow_stream_t *s;
    if (lc_arrow_stream_open(&s, data, len, &lim, arena, st) != 0)
        return -1;
    const lc_arrow_schema_t *sc = lc_arrow_stream_schema(s);
    json_t *out = json_object(), *meta = json_object(), *batches = json_array();
    for (size_t i = 0; i < sc->n_meta; i++)
        json_object_set_new(meta, sc->meta_keys[i], json_string(sc->meta_values[i]));
    json_object_set_new(out, "metadata", meta);
    json_object_set_new(out, "batches", batches);
    const lc_arrow_batch_t *b;
    int rc;
    while ((rc = lc_arrow_stream_next(s, &b, st)) == 1) {
        json_t *j = batch_json(sc, b, st);
        if (!j) {
            rc = -1;
            break;
        }
        json_array_append_new(batches, j);
    }
    lc_arrow_stream_close(s);
    if (rc == 0)
        json_dumpf(out, stdout, JSON_COMPACT);
    json_decref(out);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: arrow_dump FILE [--parca-request]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    static uint8_t buf[64 << 20];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    const uint8_t *data = buf;
    if (argc > 2 && strcmp(argv[2], "--parca-request") == 0 && unwrap_request(&data, &len) != 0) {
        fprintf(stderr, "arrow_dump: not a WriteArrowRequest\n");
        return 1;
    }
    lc_arena_t *arena = lc_arena_new((size_t)1 << 30);
    lc_status_t st = {0};
    int rc = dump(data, len, arena, &st);
    lc_arena_free(arena);
    if (rc != 0) {
        fprintf(stderr, "arrow_dump: %s\n", st.msg);
        return 1;
    }
    return 0;
}
