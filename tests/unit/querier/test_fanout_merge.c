/*
 * test_fanout_merge.c — the fan-out's merged pprof in canonical order
 * (fo_pprof_canonical, issue 27): the same samples split differently over
 * the shards (the querier's bucket shard below the marks, the ingesters
 * above) give the same bytes, which the plain merge does not; every sample
 * keeps its value.
 */
#include <string.h>

#include "fanout_int.h"
#include "lc_test.h"

typedef struct frame_stack_s {
    const char *leaf;
    int64_t value;
} frame_stack_t;

/* A pprof of "leaf;main" stacks, with a mapping, in the given order. */
static void part(const frame_stack_t *v, size_t n, lc_buf_t *out)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_pprof_builder_period(b, "cpu", "nanoseconds", 10000000);
    uint64_t map = lc_pprof_builder_mapping(b, 0x1000, 0x9000, 0, "/bin/app", "abc", true);
    uint64_t main_fn = lc_pprof_builder_function(b, "main", "main", "main.go", 1);
    lc_pprof_line_t main_line = {main_fn, 10};
    uint64_t main_loc = lc_pprof_builder_location(b, map, 0x1100, &main_line, 1);
    for (size_t i = 0; i < n; i++) {
        lc_pprof_line_t l = {lc_pprof_builder_function(b, v[i].leaf, v[i].leaf, "x.go", 2), 20};
        uint64_t ids[2] = {lc_pprof_builder_location(b, map, 0x2000 + strlen(v[i].leaf), &l, 1),
                           main_loc};
        lc_pprof_builder_sample(b, ids, 2, &v[i].value, NULL, 0);
    }
    lc_buf_init(out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, out));
    lc_pprof_builder_free(b);
}

/* The merge of the parts, canonical or as merged. */
static void merge(lc_buf_t *parts, size_t n, bool canonical, lc_arena_t *a, lc_buf_t *out)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_status_t st = {0};
    int64_t start = 0, end = 0;
    for (size_t i = 0; i < n; i++)
        LC_ASSERT_OK(fo_pprof_add(b, a, parts[i].data, parts[i].len, i == 0, &start, &end, &st));
    lc_buf_init(out, LC_BUF_UNLIMITED);
    if (canonical) {
        lc_buf_t merged;
        lc_buf_init(&merged, LC_BUF_UNLIMITED);
        LC_ASSERT_OK(lc_pprof_builder_encode(b, false, &merged));
        lc_pprof_limits_t lim;
        lc_pprof_limits_default(&lim);
        lc_pprof_t *p;
        LC_ASSERT_OK(lc_pprof_decode(merged.data, merged.len, &lim, a, &p, &st));
        lc_pprof_builder_t *c = lc_pprof_builder_new();
        LC_ASSERT_OK(fo_pprof_canonical(c, a, p));
        LC_ASSERT_OK(lc_pprof_builder_encode(c, false, out));
        lc_pprof_builder_free(c);
        lc_buf_fini(&merged);
    } else {
        LC_ASSERT_OK(lc_pprof_builder_encode(b, false, out));
    }
    lc_pprof_builder_free(b);
}

static int64_t total_of(const lc_buf_t *pb, lc_arena_t *a)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_decode(pb->data, pb->len, &lim, a, &p, &st));
    int64_t sum = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        sum += p->sample[i]->value[0];
    return sum;
}

static void test_same_bytes_however_split(void)
{
    lc_arena_t *a = lc_arena_new(64 << 20);
    /* split 1: two ingesters; split 2: an ingester and the bucket, other order */
    const frame_stack_t s1a[] = {{"f", 1}, {"g", 2}}, s1b[] = {{"hh", 3}, {"f", 4}};
    const frame_stack_t s2a[] = {{"hh", 3}}, s2b[] = {{"g", 2}, {"f", 5}};
    lc_buf_t one[2], two[2], m1, m2, plain1, plain2;
    part(s1a, 2, &one[0]);
    part(s1b, 2, &one[1]);
    part(s2a, 1, &two[0]);
    part(s2b, 2, &two[1]);
    merge(one, 2, false, a, &plain1);
    merge(two, 2, false, a, &plain2);
    LC_CHECK(plain1.len != plain2.len || memcmp(plain1.data, plain2.data, plain1.len) != 0);
    merge(one, 2, true, a, &m1);
    merge(two, 2, true, a, &m2);
    LC_ASSERT_EQ(m1.len, m2.len);
    LC_CHECK(memcmp(m1.data, m2.data, m1.len) == 0);
    LC_ASSERT_EQ(total_of(&m1, a), 10);
    LC_ASSERT_EQ(total_of(&plain1, a), 10);
    lc_buf_t *all[] = {&one[0], &one[1], &two[0], &two[1], &m1, &m2, &plain1, &plain2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        lc_buf_fini(all[i]);
    lc_arena_free(a);
}

/* A profile whose ids are not a builder's (sparse) is refused, not misread. */
static void test_sparse_ids_refused(void)
{
    lc_arena_t *a = lc_arena_new(1 << 20);
    const frame_stack_t s[] = {{"f", 1}};
    lc_buf_t pb;
    part(s, 1, &pb);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_decode(pb.data, pb.len, &lim, a, &p, &st));
    p->function[0]->id = 7;
    lc_pprof_builder_t *c = lc_pprof_builder_new();
    LC_ASSERT_EQ(fo_pprof_canonical(c, a, p), LC_EINPUT);
    lc_pprof_builder_free(c);
    lc_buf_fini(&pb);
    lc_arena_free(a);
}

LC_TEST_MAIN(test_same_bytes_however_split, test_sparse_ids_refused)
