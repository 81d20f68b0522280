/*
 * arrow_view.c — reading values out of decoded arrays: run-end encoding and
 * dictionary indices are followed here, at read time, because a dictionary
 * delta may legally add the entry after the batch that names it was read.
 */
#include <string.h>

#include "arrow_int.h"

static int out_of_range(lc_status_t *st, const lc_arrow_array_t *a, int64_t row)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                         "arrow: column \"%s\": row %lld outside 0..%lld", a->field->name,
                         (long long)row, (long long)a->length);
}

static bool is_null(const lc_arrow_array_t *a, int64_t row)
{
    return a->validity && !((a->validity[row / 8] >> (row % 8)) & 1);
}

/* The run holding row: the first run end greater than it. */
static int64_t run_of(const lc_arrow_array_t *a, int64_t row)
{
    const lc_arrow_array_t *ends = &a->children[0];
    size_t width = (size_t)ends->field->bit_width / 8;
    int64_t lo = 0, hi = ends->length - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (afb_read_le(ends->values + (size_t)mid * width, width, true) > row)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Dictionary entry index into (chunk, row). */
static int dict_entry(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **chunk,
                      int64_t *chunk_row, lc_status_t *st)
{
    const lc_arrow_field_t *f = a->field;
    size_t width = (size_t)f->index_bit_width / 8;
    int64_t idx = afb_read_le(a->values + (size_t)row * width, width, f->index_signed);
    const lc_arrow_dict_t *d = a->dict;
    if (idx < 0 || idx >= d->length)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: column \"%s\": dictionary index %lld outside 0..%lld", f->name,
                             (long long)idx, (long long)d->length);
    size_t k = d->n_chunks - 1;
    while (d->chunk_start[k] > idx)
        k--;
    *chunk = &d->chunks[k];
    *chunk_row = idx - d->chunk_start[k];
    return 0;
}

int lc_arrow_resolve(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **leaf,
                     int64_t *leaf_row, lc_status_t *st)
{
    /* Each step goes one level down the field tree or through one
     * dictionary, both bounded by max_depth at decode; 64 is a backstop. */
    for (int hops = 0; hops < 64; hops++) {
        if (row < 0 || row >= a->length)
            return out_of_range(st, a, row);
        if (a->field->dict_encoded) {
            if (is_null(a, row))
                return 1;
            if (dict_entry(a, row, &a, &row, st) != 0)
                return -1;
            continue;
        }
        if (a->field->kind == LC_ARROW_RUN_END) {
            row = run_of(a, row);
            a = &a->children[1];
            continue;
        }
        *leaf = a;
        *leaf_row = row;
        return is_null(a, row) ? 1 : 0;
    }
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "arrow: dictionaries refer in a cycle");
}

static int resolve_kind(const lc_arrow_array_t *a, int64_t row, lc_arrow_kind_t want,
                        const lc_arrow_array_t **leaf, int64_t *leaf_row, lc_status_t *st)
{
    int rc = lc_arrow_resolve(a, row, leaf, leaf_row, st);
    if (rc != 0)
        return rc;
    if ((*leaf)->field->kind != want)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: column \"%s\" does not hold the type asked for",
                             a->field->name);
    return 0;
}

int lc_arrow_get_int(const lc_arrow_array_t *a, int64_t row, int64_t *out, lc_status_t *st)
{
    const lc_arrow_array_t *l;
    int64_t r;
    int rc = resolve_kind(a, row, LC_ARROW_INT, &l, &r, st);
    if (rc != 0)
        return rc;
    size_t width = (size_t)l->field->bit_width / 8;
    *out = afb_read_le(l->values + (size_t)r * width, width, l->field->is_signed);
    return 0;
}

int lc_arrow_get_uint(const lc_arrow_array_t *a, int64_t row, uint64_t *out, lc_status_t *st)
{
    int64_t v;
    int rc = lc_arrow_get_int(a, row, &v, st);
    if (rc == 0)
        *out = (uint64_t)v;
    return rc;
}

int lc_arrow_get_bool(const lc_arrow_array_t *a, int64_t row, bool *out, lc_status_t *st)
{
    const lc_arrow_array_t *l;
    int64_t r;
    int rc = resolve_kind(a, row, LC_ARROW_BOOL, &l, &r, st);
    if (rc == 0)
        *out = (l->values[r / 8] >> (r % 8)) & 1;
    return rc;
}

static void view_bytes(const lc_arrow_array_t *l, int64_t r, const uint8_t **p, size_t *n)
{
    const uint8_t *v = l->values + 16 * (size_t)r;
    *n = (size_t)afb_read_le(v, 4, true);
    if (*n <= 12) {
        *p = v + 4;
        return;
    }
    size_t buf = (size_t)afb_read_le(v + 8, 4, true), off = (size_t)afb_read_le(v + 12, 4, true);
    *p = l->variadic[buf] + off;
}

int lc_arrow_get_bytes(const lc_arrow_array_t *a, int64_t row, const uint8_t **p, size_t *n,
                       lc_status_t *st)
{
    const lc_arrow_array_t *l;
    int64_t r;
    int rc = lc_arrow_resolve(a, row, &l, &r, st);
    if (rc != 0)
        return rc;
    size_t w = l->field->kind == LC_ARROW_LARGE_BINARY ? 8 : 4;
    switch (l->field->kind) {
    case LC_ARROW_BINARY:
    case LC_ARROW_LARGE_BINARY: {
        int64_t start = afb_read_le(l->offsets + (size_t)r * w, w, true);
        int64_t end = afb_read_le(l->offsets + (size_t)(r + 1) * w, w, true);
        *p = l->data + start;
        *n = (size_t)(end - start);
        return 0;
    }
    case LC_ARROW_FIXED_BINARY:
        *n = (size_t)l->field->byte_width;
        *p = l->values + (size_t)r * *n;
        return 0;
    case LC_ARROW_BINARY_VIEW:
        view_bytes(l, r, p, n);
        return 0;
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: column \"%s\" does not hold bytes", a->field->name);
    }
}

int lc_arrow_get_list(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **child,
                      int64_t *start, int64_t *count, lc_status_t *st)
{
    const lc_arrow_array_t *l;
    int64_t r;
    int rc = lc_arrow_resolve(a, row, &l, &r, st);
    if (rc != 0)
        return rc;
    lc_arrow_kind_t k = l->field->kind;
    size_t w = k == LC_ARROW_LARGE_LIST || k == LC_ARROW_LARGE_LIST_VIEW ? 8 : 4;
    if (k == LC_ARROW_LIST || k == LC_ARROW_LARGE_LIST) {
        *start = afb_read_le(l->offsets + (size_t)r * w, w, true);
        *count = afb_read_le(l->offsets + (size_t)(r + 1) * w, w, true) - *start;
    } else if (k == LC_ARROW_LIST_VIEW || k == LC_ARROW_LARGE_LIST_VIEW) {
        *start = afb_read_le(l->offsets + (size_t)r * w, w, true);
        *count = afb_read_le(l->sizes + (size_t)r * w, w, true);
    } else {
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "arrow: column \"%s\" is not a list",
                             a->field->name);
    }
    *child = &l->children[0];
    return 0;
}

int lc_arrow_get_struct(const lc_arrow_array_t *a, int64_t row, const lc_arrow_array_t **leaf,
                        int64_t *leaf_row, lc_status_t *st)
{
    return resolve_kind(a, row, LC_ARROW_STRUCT, leaf, leaf_row, st);
}

const lc_arrow_array_t *lc_arrow_child(const lc_arrow_array_t *a, const char *name)
{
    for (size_t i = 0; i < a->n_children; i++)
        if (strcmp(a->children[i].field->name, name) == 0)
            return &a->children[i];
    return NULL;
}
