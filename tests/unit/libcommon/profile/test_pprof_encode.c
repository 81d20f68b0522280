/*
 * test_pprof_encode.c — the builder's own protobuf writer (pprof_builder.c,
 * "encoding") against protobuf-c.
 *
 * Oracle: protobuf-c. Whatever the builder writes is unpacked by protobuf-c
 * (lc_pprof__decode_protobuf_c) and packed again by protobuf-c
 * (lc_pprof_encode): the bytes must be the same, which holds only when every
 * field has protobuf-c's number order, proto3 zero omission, packing and
 * length prefixes. The content is checked separately: every pprof of
 * testdata copied through the builder keeps its per-type totals, time and
 * period (the builder merges duplicate locations and functions, so their
 * counts can only shrink).
 */
#include <stdio.h>

#include "../../../../libcommon/profile/src/pprof_int.h"
#include "lc/gz.h"
#include "lc/pprof.h"
#include "lc_test.h"

#define ARENA_CAP (1u << 30)

/* Unpacked and packed again by protobuf-c: must give the same bytes. */
static void check_canonical(const char *what, const lc_buf_t *mine)
{
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof__decode_protobuf_c(mine->data, mine->len, a, &p, &st));
    lc_buf_t again;
    lc_buf_init(&again, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_encode(p, false, &again));
    if (again.len != mine->len || memcmp(again.data, mine->data, mine->len) != 0)
        fprintf(stderr, "%s: builder wrote %zu bytes, protobuf-c packs %zu\n", what, mine->len,
                again.len);
    LC_ASSERT_EQ(again.len, mine->len);
    LC_ASSERT_MEM_EQ(again.data, mine->data, mine->len);
    lc_buf_fini(&again);
    lc_arena_free(a);
}

/* ---------------------------------------------------------------- a decoded pprof, rebuilt */

/* One table's ids: the pprof's (by position) and the builder's for them. */
typedef struct ids_s {
    uint64_t *pprof, *built;
    size_t n;
} ids_t;

static ids_t ids_new(size_t n)
{
    return (ids_t){calloc(n + 1, 8), calloc(n + 1, 8), n};
}

static void ids_free(ids_t *ids)
{
    free(ids->pprof);
    free(ids->built);
}

static uint64_t built_id(const ids_t *ids, uint64_t pprof_id)
{
    for (size_t i = 0; i < ids->n; i++)
        if (ids->pprof[i] == pprof_id)
            return ids->built[i];
    return 0;
}

static void copy_functions_and_mappings(const lc_pprof_t *p, lc_pprof_builder_t *b, ids_t *fn,
                                        ids_t *map)
{
    for (size_t i = 0; i < p->n_function; i++) {
        const Google__V1__Function *f = p->function[i];
        fn->pprof[i] = f->id;
        fn->built[i] =
            lc_pprof_builder_function(b, lc_pprof_str(p, f->name), lc_pprof_str(p, f->system_name),
                                      lc_pprof_str(p, f->filename), f->start_line);
    }
    for (size_t i = 0; i < p->n_mapping; i++) {
        const Google__V1__Mapping *m = p->mapping[i];
        map->pprof[i] = m->id;
        map->built[i] = lc_pprof_builder_mapping(b, m->memory_start, m->memory_limit,
                                                 m->file_offset, lc_pprof_str(p, m->filename),
                                                 lc_pprof_str(p, m->build_id), m->has_functions);
    }
}

static void copy_locations(const lc_pprof_t *p, lc_pprof_builder_t *b, const ids_t *fn,
                           const ids_t *map, ids_t *loc)
{
    for (size_t i = 0; i < p->n_location; i++) {
        const Google__V1__Location *l = p->location[i];
        lc_pprof_line_t *lines = calloc(l->n_line + 1, sizeof(*lines));
        for (size_t k = 0; k < l->n_line; k++)
            lines[k] = (lc_pprof_line_t){built_id(fn, l->line[k]->function_id), l->line[k]->line};
        loc->pprof[i] = l->id;
        loc->built[i] = lc_pprof_builder_location(b, built_id(map, l->mapping_id), l->address,
                                                  lines, l->n_line);
        free(lines);
    }
}

static void copy_samples(const lc_pprof_t *p, lc_pprof_builder_t *b, const ids_t *loc)
{
    for (size_t s = 0; s < p->n_sample; s++) {
        const Google__V1__Sample *x = p->sample[s];
        uint64_t *locs = calloc(x->n_location_id + 1, 8);
        const char **kv = calloc(2 * x->n_label + 1, sizeof(char *));
        size_t pairs = 0;
        for (size_t k = 0; k < x->n_location_id; k++)
            locs[k] = built_id(loc, x->location_id[k]);
        for (size_t k = 0; k < x->n_label; k++) {
            if (!x->label[k]->str)
                continue; /* the builder keeps string labels only */
            kv[2 * pairs] = lc_pprof_str(p, x->label[k]->key);
            kv[2 * pairs++ + 1] = lc_pprof_str(p, x->label[k]->str);
        }
        lc_pprof_builder_sample(b, locs, x->n_location_id, x->value, pairs ? kv : NULL, pairs);
        free(locs);
        free(kv);
    }
}

static void copy_profile(const lc_pprof_t *p, lc_pprof_builder_t *b)
{
    ids_t fn = ids_new(p->n_function), map = ids_new(p->n_mapping), loc = ids_new(p->n_location);
    copy_functions_and_mappings(p, b, &fn, &map);
    copy_locations(p, b, &fn, &map, &loc);
    copy_samples(p, b, &loc);
    ids_free(&fn);
    ids_free(&map);
    ids_free(&loc);
}

static void totals(const lc_pprof_t *p, int64_t *out)
{
    for (size_t t = 0; t < p->n_sample_type && t < 8; t++) {
        out[t] = 0;
        for (size_t s = 0; s < p->n_sample; s++)
            out[t] += p->sample[s]->value[t];
    }
}

static void check_rebuilt(const char *name, const unsigned char *d, size_t len)
{
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = 0;
    lc_pprof_t *p;
    lc_status_t st = {0};
    if (lc_pprof_decode(d, len, &lim, a, &p, &st) != 0 || p->n_sample_type == 0 ||
        p->n_sample_type > 8) {
        lc_arena_free(a); /* not a profile the builder can hold: nothing to compare */
        return;
    }
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    for (size_t t = 0; t < p->n_sample_type; t++)
        lc_pprof_builder_sample_type(b, lc_pprof_str(p, p->sample_type[t]->type),
                                     lc_pprof_str(p, p->sample_type[t]->unit));
    if (p->period_type)
        lc_pprof_builder_period(b, lc_pprof_str(p, p->period_type->type),
                                lc_pprof_str(p, p->period_type->unit), p->period);
    lc_pprof_builder_times(b, p->time_nanos, p->duration_nanos);
    copy_profile(p, b);
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, &out));
    check_canonical(name, &out);

    lc_pprof_t *q;
    LC_ASSERT_OK(lc_pprof_decode(out.data, out.len, &lim, a, &q, &st));
    int64_t want[8], got[8];
    totals(p, want);
    totals(q, got);
    LC_ASSERT_EQ(q->n_sample_type, p->n_sample_type);
    for (size_t t = 0; t < p->n_sample_type; t++)
        LC_ASSERT_EQ(got[t], want[t]);
    LC_CHECK(q->n_location <= p->n_location && q->n_function <= p->n_function);
    LC_ASSERT_EQ(q->time_nanos, p->time_nanos);
    LC_ASSERT_EQ(q->period, p->period_type ? p->period : 0);
    lc_buf_fini(&out);
    lc_pprof_builder_free(b);
    lc_arena_free(a);
}

static void test_every_testdata_pprof_rebuilt_packs_as_protobuf_c(void)
{
    LC_CHECK(lc_test_each_testdata_file("pprof", check_rebuilt) +
                 lc_test_each_testdata_file("ingest", check_rebuilt) >=
             26);
}

/* ---------------------------------------------------------------- crafted */

/* Zeros everywhere a zero can be, negative values, empty strings, several
 * lines, labels and a period: each must be written as protobuf-c would. */
static void test_edge_values(void)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "", "");
    lc_pprof_builder_sample_type(b, "alloc", "bytes");
    lc_pprof_builder_period(b, "", "", 0);
    lc_pprof_builder_times(b, -5, 0);
    uint64_t m0 = lc_pprof_builder_mapping(b, 0, 0, 0, "", "", false);
    uint64_t m1 = lc_pprof_builder_mapping(b, 1ull << 63, UINT64_MAX, 300, "/lib/x", "ab", true);
    uint64_t f0 = lc_pprof_builder_function(b, "", "", "", 0);
    uint64_t f1 = lc_pprof_builder_function(b, "f", "f", "f.c", -1);
    lc_pprof_line_t lines[3] = {{f0, 0}, {f1, -7}, {f1, INT64_MAX}};
    uint64_t l0 = lc_pprof_builder_location(b, m0, 0, NULL, 0);
    uint64_t l1 = lc_pprof_builder_location(b, m1, UINT64_MAX, lines, 3);
    uint64_t stack[2] = {l1, l0};
    int64_t v0[2] = {0, 0}, v1[2] = {-1, INT64_MIN};
    const char *kv[4] = {"k", "", "", "v"};
    lc_pprof_builder_sample(b, stack, 2, v0, NULL, 0);
    lc_pprof_builder_sample(b, stack, 1, v1, kv, 2);
    lc_pprof_builder_sample(b, NULL, 0, v1, NULL, 0);
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, &out));
    check_canonical("edge values", &out);

    lc_buf_t gz; /* and the gzip form holds the same bytes */
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, true, &gz));
    lc_buf_t plain;
    lc_buf_init(&plain, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gunzip(gz.data, gz.len, 1 << 20, &plain));
    LC_ASSERT_EQ(plain.len, out.len);
    LC_ASSERT_MEM_EQ(plain.data, out.data, out.len);
    lc_buf_fini(&plain);
    lc_buf_fini(&gz);
    lc_buf_fini(&out);
    lc_pprof_builder_free(b);
}

LC_TEST_MAIN(test_every_testdata_pprof_rebuilt_packs_as_protobuf_c, test_edge_values)
