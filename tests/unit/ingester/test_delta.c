/*
 * test_delta.c — the v1 server-side delta rule (pyroscope-api.md §4.5):
 * memory alloc_objects/alloc_space only, honouring __delta__="false"; the
 * first profile of a series is the baseline and is dropped; a decrease resets
 * the baseline and drops that profile; staged state is discarded with a
 * failed batch.
 */
#include "lc_test.h"
#include "write_int.h"

enum { A = 101, B = 202, C = 303 };

static void test_rule(void)
{
    LC_CHECK(ing_delta_applies("memory", "alloc_objects", false, 0));
    LC_CHECK(ing_delta_applies("memory", "alloc_space", false, 0));
    LC_CHECK(!ing_delta_applies("memory", "alloc_space", true, 0)); /* __delta__="false" */
    LC_CHECK(!ing_delta_applies("memory", "inuse_space", false, 0));
    LC_CHECK(!ing_delta_applies("memory", "inuse_objects", false, 0));
    LC_CHECK(!ing_delta_applies("mutex", "contentions", false, 0)); /* not server-side */
    LC_CHECK(!ing_delta_applies("block", "delay", false, 0));
    LC_CHECK(!ing_delta_applies("process_cpu", "alloc_space", false, 0));
    LC_CHECK(!ing_delta_applies(NULL, "alloc_space", false, 0));
    /* a profile that covers a window (duration_nanos, e.g. Go's heap?seconds=N
     * or pyroscope-io's per-upload memory) already holds that window's values */
    LC_CHECK(!ing_delta_applies("memory", "alloc_space", false, 2000000000));
    LC_CHECK(ing_delta_applies("memory", "alloc_space", false, 0));
}

static bool apply(ing_delta_t *d, uint64_t fp, const uint64_t *k, const int64_t *v, size_t n,
                  int64_t *out)
{
    bool keep = ing_delta_apply(d, fp, k, v, n, out);
    ing_delta_commit(d);
    return keep;
}

static void test_sequence(void)
{
    ing_delta_t *d = ing_delta_new(1000);
    int64_t out[4];
    uint64_t k1[] = {A, B};
    int64_t v1[] = {10, 5};
    LC_CHECK(!apply(d, 1, k1, v1, 2, out)); /* first: baseline, dropped */
    uint64_t k2[] = {A, B, C};
    int64_t v2[] = {15, 5, 2};
    LC_CHECK(apply(d, 1, k2, v2, 3, out));
    LC_ASSERT_EQ(out[0], 5);
    LC_ASSERT_EQ(out[1], 0);
    LC_ASSERT_EQ(out[2], 2); /* a new stack counts in full */
    uint64_t k3[] = {A};
    int64_t v3[] = {12};
    LC_CHECK(!apply(d, 1, k3, v3, 1, out)); /* A went down: reset, dropped */
    uint64_t k4[] = {A, B};
    int64_t v4[] = {20, 1};
    LC_CHECK(apply(d, 1, k4, v4, 2, out)); /* against the reset baseline {A:12} */
    LC_ASSERT_EQ(out[0], 8);
    LC_ASSERT_EQ(out[1], 1);
    uint64_t k5[] = {A, B, A}; /* a stack twice in one profile */
    int64_t v5[] = {21, 1, 4};
    LC_CHECK(apply(d, 1, k5, v5, 3, out));
    LC_ASSERT_EQ(out[0], 5); /* (21 + 4) - 20, on the first one */
    LC_ASSERT_EQ(out[1], 0);
    LC_ASSERT_EQ(out[2], 0);
    ing_delta_free(d);
}

static void test_series_are_independent(void)
{
    ing_delta_t *d = ing_delta_new(1000);
    int64_t out[2];
    uint64_t k[] = {A};
    int64_t v10[] = {10}, v30[] = {30};
    LC_CHECK(!apply(d, 1, k, v10, 1, out));
    LC_CHECK(!apply(d, 2, k, v30, 1, out)); /* another series: its own baseline */
    LC_CHECK(apply(d, 1, k, v30, 1, out));
    LC_ASSERT_EQ(out[0], 20);
    ing_delta_free(d);
}

static void test_staging(void)
{
    ing_delta_t *d = ing_delta_new(1000);
    int64_t out[1];
    uint64_t k[] = {A};
    int64_t v10[] = {10}, v15[] = {15}, v40[] = {40};
    LC_CHECK(!apply(d, 1, k, v10, 1, out));
    /* A batch that fails: its staged baseline must not survive. */
    LC_CHECK(ing_delta_apply(d, 1, k, v40, 1, out));
    LC_ASSERT_EQ(out[0], 30);
    ing_delta_discard(d);
    /* Within one batch, a later profile sees the earlier one's baseline. */
    LC_CHECK(ing_delta_apply(d, 1, k, v15, 1, out));
    LC_ASSERT_EQ(out[0], 5);
    LC_CHECK(ing_delta_apply(d, 1, k, v40, 1, out));
    LC_ASSERT_EQ(out[0], 25);
    ing_delta_commit(d);
    int64_t v41[] = {41};
    LC_CHECK(apply(d, 1, k, v41, 1, out));
    LC_ASSERT_EQ(out[0], 1);
    ing_delta_free(d);
}

static void test_cap_resets(void)
{
    ing_delta_t *d = ing_delta_new(3);
    int64_t out[4];
    uint64_t k[] = {A, B, C, C + 1};
    int64_t v[] = {1, 1, 1, 1};
    LC_CHECK(!apply(d, 1, k, v, 4, out)); /* 4 points > cap 3: dropped state */
    LC_CHECK(!apply(d, 1, k, v, 4, out)); /* so this is a first profile again */
    ing_delta_free(d);
}

LC_TEST_MAIN(test_rule, test_sequence, test_series_are_independent, test_staging, test_cap_resets)
