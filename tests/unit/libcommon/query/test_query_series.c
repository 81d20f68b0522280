/*
 * test_query_series.c — SelectSeries bucketing, group_by, AVERAGE and limit on
 * hand-made profiles (pyroscope-api.md §5.8). Expected points are worked out
 * in the comments.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/query.h"
#include "lc_test.h"

#define MS 1000000LL

/*
 * Boundaries 1000, 2000, 3000, 4000, 5000 (start 1000, end 5000, step 1000).
 *   eu-a: t1000 v10 -> 1000; t1500 v5 -> 2000; t2000 v7 -> 2000;
 *         t5001 v100 and t-1 v100 (before start - step) are outside the range.
 *   b:    t2500 v4 -> 3000; t4999 v1 -> 5000.
 *   us-a: t1001 v3 -> 2000.
 */
typedef struct prof_s {
    int series;
    int64_t t_ms, v;
} prof_t;

static const prof_t profiles[] = {
    {0, 1000, 10}, {0, 1500, 5}, {0, 2000, 7}, {0, 5001, 100},
    {0, -1, 100},  {1, 2500, 4}, {1, 4999, 1}, {2, 1001, 3},
};

static void make_labels(lc_labels_t ls[3])
{
    for (int i = 0; i < 3; i++)
        lc_labels_init(&ls[i]);
    lc_labels_add(&ls[0], "region", "eu");
    lc_labels_add(&ls[0], "service_name", "a");
    lc_labels_add(&ls[1], "service_name", "b");
    lc_labels_add(&ls[2], "region", "us");
    lc_labels_add(&ls[2], "service_name", "a");
}

static Types__V1__Series **run(const lc_query_series_opts_t *o, lc_arena_t *a, size_t *n)
{
    lc_labels_t ls[3];
    make_labels(ls);
    lc_query_series_t *s = lc_query_series_new(o);
    for (size_t i = 0; i < LC_ARRAY_LEN(profiles); i++) {
        uint32_t g;
        LC_ASSERT_OK(lc_query_series_group(s, &ls[profiles[i].series], &g));
        LC_ASSERT_OK(lc_query_series_add(s, g, profiles[i].t_ms * MS, profiles[i].v));
    }
    Types__V1__Series **out = NULL;
    LC_ASSERT_OK(lc_query_series_emit(s, a, &out, n));
    lc_query_series_free(s);
    for (int i = 0; i < 3; i++)
        lc_labels_fini(&ls[i]);
    return out;
}

/* want: pairs of (timestamp, value). */
static void check_points(const Types__V1__Series *se, const double *want, size_t n_pairs)
{
    LC_ASSERT_EQ(se->n_points, n_pairs);
    for (size_t i = 0; i < n_pairs && i < se->n_points; i++) {
        LC_ASSERT_EQ(se->points[i]->timestamp, (int64_t)want[2 * i]);
        LC_CHECK(se->points[i]->value == want[2 * i + 1]);
    }
}

static void check_labels(const Types__V1__Series *se, const char *const *kv, size_t n)
{
    LC_ASSERT_EQ(se->n_labels, n);
    for (size_t i = 0; i < n && i < se->n_labels; i++) {
        LC_ASSERT_STR_EQ(se->labels[i]->name, kv[2 * i]);
        LC_ASSERT_STR_EQ(se->labels[i]->value, kv[2 * i + 1]);
    }
}

static const lc_query_series_opts_t base = {.start_ms = 1000, .end_ms = 5000, .step_ms = 1000};

/* No group_by: one series without labels; 2000 = 5 + 7 + 3. */
static void test_sum_single_series(void)
{
    lc_arena_t *a = lc_arena_new(1 << 20);
    size_t n;
    Types__V1__Series **out = run(&base, a, &n);
    LC_ASSERT_EQ(n, 1);
    static const double want[] = {1000, 10, 2000, 15, 3000, 4, 5000, 1};
    if (n == 1) {
        LC_ASSERT_EQ(out[0]->n_labels, 0);
        check_points(out[0], want, 4);
    }
    lc_arena_free(a);
}

/* AVERAGE: 2000 holds three profiles: 15 / 3 = 5. */
static void test_average(void)
{
    lc_query_series_opts_t o = base;
    o.average = true;
    lc_arena_t *a = lc_arena_new(1 << 20);
    size_t n;
    Types__V1__Series **out = run(&o, a, &n);
    static const double want[] = {1000, 10, 2000, 5, 3000, 4, 5000, 1};
    LC_ASSERT_EQ(n, 1);
    if (n == 1)
        check_points(out[0], want, 4);
    lc_arena_free(a);
}

/* group_by region, service_name: labels in group_by order; b lacks region.
 * Sorted pairwise: [region=eu,..] < [region=us,..] < [service_name=b]. */
static void test_group_by(void)
{
    static const char *const gb[] = {"region", "service_name"};
    lc_query_series_opts_t o = base;
    o.group_by = gb;
    o.n_group_by = 2;
    lc_arena_t *a = lc_arena_new(1 << 20);
    size_t n;
    Types__V1__Series **out = run(&o, a, &n);
    LC_ASSERT_EQ(n, 3);
    if (n == 3) {
        static const char *const l0[] = {"region", "eu", "service_name", "a"};
        static const char *const l1[] = {"region", "us", "service_name", "a"};
        static const char *const l2[] = {"service_name", "b"};
        static const double p0[] = {1000, 10, 2000, 12};
        static const double p1[] = {2000, 3};
        static const double p2[] = {3000, 4, 5000, 1};
        check_labels(out[0], l0, 2);
        check_points(out[0], p0, 2);
        check_labels(out[1], l1, 2);
        check_points(out[1], p1, 1);
        check_labels(out[2], l2, 1);
        check_points(out[2], p2, 2);
    }
    lc_arena_free(a);
}

/* Issue 12, fault 7: step > end - start. As in Pyroscope (which reads from
 * start - step), the point at start holds [start - step, start]; a profile
 * after start with no boundary <= end after it is not counted. */
static void test_step_larger_than_range(void)
{
    lc_query_series_opts_t o = {.start_ms = 10000, .end_ms = 10500, .step_ms = 60000};
    lc_query_series_t *s = lc_query_series_new(&o);
    lc_labels_t ls;
    lc_labels_init(&ls);
    uint32_t g;
    LC_ASSERT_OK(lc_query_series_group(s, &ls, &g));
    LC_ASSERT_OK(lc_query_series_add(s, g, -50000 * MS, 1)); /* = start - step */
    LC_ASSERT_OK(lc_query_series_add(s, g, 9000 * MS, 2));
    LC_ASSERT_OK(lc_query_series_add(s, g, 10000 * MS, 4));
    LC_ASSERT_OK(lc_query_series_add(s, g, 10200 * MS, 100));  /* next boundary is past end */
    LC_ASSERT_OK(lc_query_series_add(s, g, -50001 * MS, 100)); /* before start - step */
    lc_arena_t *a = lc_arena_new(1 << 20);
    Types__V1__Series **out;
    size_t n;
    LC_ASSERT_OK(lc_query_series_emit(s, a, &out, &n));
    LC_ASSERT_EQ(n, 1);
    static const double want[] = {10000, 7};
    if (n == 1)
        check_points(out[0], want, 1);
    lc_arena_free(a);
    lc_labels_fini(&ls);
    lc_query_series_free(s);
}

/* limit 2 keeps the two largest totals (eu-a 22, b 5; us-a 3 dropped), then
 * sorts them by labels. */
static void test_limit(void)
{
    static const char *const gb[] = {"region", "service_name"};
    lc_query_series_opts_t o = base;
    o.group_by = gb;
    o.n_group_by = 2;
    o.limit = 2;
    lc_arena_t *a = lc_arena_new(1 << 20);
    size_t n;
    Types__V1__Series **out = run(&o, a, &n);
    LC_ASSERT_EQ(n, 2);
    if (n == 2) {
        static const char *const l0[] = {"region", "eu", "service_name", "a"};
        static const char *const l1[] = {"service_name", "b"};
        check_labels(out[0], l0, 2);
        check_labels(out[1], l1, 1);
    }
    lc_arena_free(a);
}

/* End not on a boundary: 1000..4500 step 1000 -> last boundary 4000; the
 * profile at 4999 would need boundary 5000 > end and is dropped. */
static void test_last_boundary(void)
{
    lc_query_series_opts_t o = base;
    o.end_ms = 4500;
    lc_arena_t *a = lc_arena_new(1 << 20);
    size_t n;
    Types__V1__Series **out = run(&o, a, &n);
    static const double want[] = {1000, 10, 2000, 15, 3000, 4};
    LC_ASSERT_EQ(n, 1);
    if (n == 1)
        check_points(out[0], want, 3);
    lc_arena_free(a);
}

/* Nothing in range: no series at all. */
static void test_empty(void)
{
    lc_query_series_opts_t o = {.start_ms = 10, .end_ms = 20, .step_ms = 5};
    lc_arena_t *a = lc_arena_new(1 << 20);
    size_t n = 99;
    Types__V1__Series **out = run(&o, a, &n);
    LC_ASSERT_EQ(n, 0);
    LC_CHECK(out != NULL);
    lc_arena_free(a);
}

LC_TEST_MAIN(test_step_larger_than_range, test_sum_single_series, test_average, test_group_by,
             test_limit, test_last_boundary, test_empty)
