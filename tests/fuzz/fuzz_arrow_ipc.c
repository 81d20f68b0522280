/*
 * fuzz_arrow_ipc.c — the Arrow IPC stream reader (libcommon/arrow) on
 * arbitrary bytes, with small limits so the limit paths run too. Whatever
 * the input, opening, iterating and reading every value of every column
 * (through run ends, dictionaries, lists and structs) must finish without a
 * crash or an out-of-bounds read, and every refusal must say why.
 * Seeds: tests/integration/arrow_gen.py's streams and the real agent's pushes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lc/arrow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reading shared list-view ranges again and again is legal and quadratic;
 * the walk stops after this many values. */
#define FUZZ_VALUE_BUDGET 200000

typedef struct walk_s {
    long budget;
} walk_t;

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_arrow_ipc: %s\n", what);
        abort();
    }
}

/* A getter's result: 0 or 1, or -1 with a message. */
static void check_rc(int rc, const lc_status_t *st)
{
    require(rc >= -1 && rc <= 1, "a getter returned something other than -1, 0, 1");
    require(rc != -1 || st->msg[0], "a getter failed without a message");
}

static void walk_value(walk_t *w, const lc_arrow_array_t *a, int64_t row)
{
    if (--w->budget < 0)
        return;
    lc_status_t st = {0};
    const lc_arrow_array_t *leaf, *child;
    int64_t r, start, count;
    int rc = lc_arrow_resolve(a, row, &leaf, &r, &st);
    check_rc(rc, &st);
    if (rc != 0)
        return;
    int64_t i;
    bool b;
    const uint8_t *p;
    size_t n;
    volatile uint8_t sink = 0;
    switch (leaf->field->kind) {
    case LC_ARROW_INT:
        check_rc(lc_arrow_get_int(leaf, r, &i, &st), &st);
        return;
    case LC_ARROW_BOOL:
        check_rc(lc_arrow_get_bool(leaf, r, &b, &st), &st);
        return;
    case LC_ARROW_STRUCT:
        for (size_t k = 0; k < leaf->n_children; k++)
            walk_value(w, &leaf->children[k], r);
        return;
    case LC_ARROW_FIXED_BINARY:
    case LC_ARROW_BINARY:
    case LC_ARROW_LARGE_BINARY:
    case LC_ARROW_BINARY_VIEW:
        rc = lc_arrow_get_bytes(leaf, r, &p, &n, &st);
        check_rc(rc, &st);
        for (size_t k = 0; rc == 0 && k < n; k++) /* ASan checks each byte */
            sink ^= p[k];
        return;
    default:
        rc = lc_arrow_get_list(leaf, r, &child, &start, &count, &st);
        check_rc(rc, &st);
        for (int64_t k = 0; rc == 0 && k < count && w->budget > 0; k++)
            walk_value(w, child, start + k);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_arrow_limits_t lim;
    lc_arrow_limits_default(&lim);
    lim.max_decompressed_bytes = 8 << 20;
    lim.max_rows = 1 << 16;
    lim.max_dictionary_rows = 1 << 16;
    lim.max_fields = 256;
    lim.max_depth = 12;
    lim.max_messages = 256;
    lc_arena_t *arena = lc_arena_new(64u << 20);
    lc_status_t st = {0};
    lc_arrow_stream_t *s;
    if (lc_arrow_stream_open(&s, data, size, &lim, arena, &st) != 0) {
        require(st.msg[0], "open failed without a message");
        lc_arena_free(arena);
        return 0;
    }
    walk_t w = {FUZZ_VALUE_BUDGET};
    const lc_arrow_batch_t *b;
    int rc;
    while ((rc = lc_arrow_stream_next(s, &b, &st)) == 1) {
        require(b->n_columns == lc_arrow_stream_schema(s)->n_fields, "column count");
        for (size_t c = 0; c < b->n_columns; c++)
            for (int64_t row = 0; row < b->length && w.budget > 0; row++)
                walk_value(&w, &b->columns[c], row);
    }
    require(rc == 0 || st.msg[0], "next failed without a message");
    lc_arrow_stream_close(s);
    lc_arena_free(arena);
    return 0;
}
