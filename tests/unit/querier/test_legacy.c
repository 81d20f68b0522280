/*
 * test_legacy.c — the pieces of the legacy render endpoints that need no
 * server (pyroscope-api.md §7.1–§7.3): the timeline step ladder, the
 * timeline itself, the flamebearer JSON byte for byte, Go's string escaping,
 * and the DOT call graph. Every expected value is worked out by hand in the
 * comments from Pyroscope's rules, never taken from the code under test.
 */
#include <stdio.h>
#include <string.h>

#include "lc_test.h"
#include "lc_test_pprof.h"
#include "querier_int.h"

#define DAY_MS (86400LL * 1000)

/* ------------------------------------------------------ the step ladder */

/*
 * CalcPointInterval: interval = range / 1500; below 15 s -> 15 s; else the
 * first rung whose bound it does not pass. Worked out per case.
 */
static void test_point_interval_ladder(void)
{
    static const struct {
        int64_t range_ms;
        double step;
    } cases[] = {
        {1000, 15},                  /* 0.67 ms -> the 15 s floor */
        {3600 * 1000, 15},           /* 1 h: 2.4 s -> floor */
        {6 * 3600 * 1000, 15},       /* 6 h: 14.4 s -> floor */
        {26250 * 1000, 15},          /* 17.5 s exactly: <= 17.5 s -> 15 s */
        {26250 * 1000 + 1500, 20},   /* 17.501 s: <= 25 s -> 20 s */
        {12 * 3600 * 1000, 30},      /* 28.8 s: <= 45 s -> 30 s */
        {DAY_MS, 60},                /* 57.6 s: <= 90 s -> 1 m */
        {2 * DAY_MS, 120},           /* 115.2 s: <= 210 s -> 2 m */
        {7 * DAY_MS, 300},           /* 403.2 s: <= 450 s -> 5 m */
        {30 * DAY_MS, 1800},         /* 1728 s: <= 2700 s -> 30 m */
        {180 * DAY_MS, 10800},       /* 10368 s: <= 16200 s -> 3 h */
        {360 * DAY_MS, 21600},       /* 20736 s: <= 32400 s -> 6 h */
        {720 * DAY_MS, 43200},       /* 41472 s: <= 86400 s -> 12 h */
        {1800 * DAY_MS, 86400},      /* 103680 s: <= 172800 s -> 24 h */
        {5000 * DAY_MS, 86400},      /* 288000 s: <= 1 w -> still 24 h */
        {20000 * DAY_MS, 604800},    /* 1152000 s: <= 3 w -> 1 w */
        {40000 * DAY_MS, 2592000},   /* 2304000 s: < 6 w -> 30 d */
        {100000 * DAY_MS, 31536000}, /* 5760000 s -> 1 y */
        {-DAY_MS, 15},               /* until before from: negative -> floor */
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        int64_t from = 1700000000000LL;
        double got = qry_calc_point_interval(from, from + cases[i].range_ms);
        if (got != cases[i].step)
            fprintf(stderr, "  range %lld ms: got %g s, want %g s\n", (long long)cases[i].range_ms,
                    got, cases[i].step);
        LC_CHECK(got == cases[i].step);
    }
}

/* -------------------------------------------------------------- timeline */

static Types__V1__Point *point(int64_t ts_ms, double v)
{
    static Types__V1__Point pool[16];
    static size_t used;
    Types__V1__Point *p = &pool[used++ % LC_ARRAY_LEN(pool)];
    *p = (Types__V1__Point)TYPES__V1__POINT__INIT;
    p->timestamp = ts_ms;
    p->value = v;
    return p;
}

static void check_timeline(const qry_timeline_t *t, int64_t start, int64_t step,
                           const uint64_t *want, size_t n)
{
    LC_ASSERT_EQ(t->start_sec, start);
    LC_ASSERT_EQ(t->step_sec, step);
    LC_ASSERT_EQ(t->n, n);
    for (size_t i = 0; i < n && i < t->n; i++)
        LC_ASSERT_EQ(t->samples[i], want[i]);
}

/*
 * Range [1007 s, 1067 s], step 15: snapped to [1005 s, 1065 s) -> 4 samples.
 * SelectSeries boundaries are 1007 + 15k: points at 1022 s (5.9 -> 5) and
 * 1052 s (7). Before the first: (1022 - 1005) / 15 = 1 zero; between them
 * (1052 - 1022) / 15 - 1 = 1 zero -> [0, 5, 0, 7]. A point at 1067 s is at or
 * past the snapped end and is dropped.
 */
static void test_timeline(void)
{
    lc_arena_t *a = lc_arena_new(1 << 20);
    Types__V1__Point *pts[] = {point(1022000, 5.9), point(1052000, 7), point(1067000, 9)};
    Types__V1__Series s = TYPES__V1__SERIES__INIT;
    s.points = pts;
    s.n_points = 3;
    qry_timeline_t t;
    LC_ASSERT_OK(qry_timeline_build(&s, 1007000, 1067000, 15, a, &t));
    static const uint64_t want[] = {0, 5, 0, 7};
    check_timeline(&t, 1005, 15, want, 4);

    /* No series: 4 zeros. */
    static const uint64_t zeros[] = {0, 0, 0, 0};
    LC_ASSERT_OK(qry_timeline_build(NULL, 1007000, 1067000, 15, a, &t));
    check_timeline(&t, 1005, 15, zeros, 4);

    /* [1006 s, 1019 s] snaps to [1005 s, 1005 s): no samples, start 1005. */
    LC_ASSERT_OK(qry_timeline_build(&s, 1006000, 1019000, 15, a, &t));
    check_timeline(&t, 1005, 15, NULL, 0);
    /* [1001 s, 1010 s] snaps to [990 s, 1005 s): one bucket; every point is
     * at or past 1005 s, so one zero. */
    static const uint64_t one_zero[] = {0};
    LC_ASSERT_OK(qry_timeline_build(&s, 1001000, 1010000, 15, a, &t));
    check_timeline(&t, 990, 15, one_zero, 1);
    lc_arena_free(a);
}

/* --------------------------------------------------------- flamebearer */

/* The §5.4 worked example: a;b=3, a;c=2, d=1. */
static void example_flamebearer(qry_flamebearer_t *fb, Querier__V1__Level *lv,
                                Querier__V1__Level **lvp)
{
    static char *names[] = {"total", "d", "a", "c", "b"};
    static int64_t l0[] = {0, 6, 0, 0}, l1[] = {0, 5, 0, 2, 0, 1, 1, 1},
                   l2[] = {0, 3, 3, 4, 0, 2, 2, 3};
    int64_t *vals[] = {l0, l1, l2};
    size_t lens[] = {4, 8, 8};
    for (size_t i = 0; i < 3; i++) {
        lv[i] = (Querier__V1__Level)QUERIER__V1__LEVEL__INIT;
        lv[i].values = vals[i];
        lv[i].n_values = lens[i];
        lvp[i] = &lv[i];
    }
    *fb = (qry_flamebearer_t){.names = names,
                              .n_names = 5,
                              .levels = lvp,
                              .n_levels = 3,
                              .total = 6,
                              .max_self = 3,
                              .sample_type = "cpu",
                              .sample_unit = "nanoseconds"};
}

static void check_json(const qry_flamebearer_t *fb, const char *want)
{
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(qry_flamebearer_json(fb, &out));
    LC_ASSERT_OK(lc_buf_putc(&out, '\0'));
    LC_ASSERT_STR_EQ((const char *)out.data, want);
    lc_buf_fini(&out);
}

/* The whole render document, key order and all, as Go's encoder writes it. */
static void test_render_json_golden(void)
{
    Querier__V1__Level lv[3], *lvp[3];
    qry_flamebearer_t fb;
    example_flamebearer(&fb, lv, lvp);
    uint64_t samples[] = {0, 5, 0, 7};
    qry_timeline_t tl = {.start_sec = 1005, .step_sec = 15, .samples = samples, .n = 4};
    fb.timeline = &tl;
    check_json(&fb, "{\"version\":1,\"flamebearer\":{\"names\":[\"total\",\"d\",\"a\",\"c\",\"b\"],"
                    "\"levels\":[[0,6,0,0],[0,5,0,2,0,1,1,1],[0,3,3,4,0,2,2,3]],"
                    "\"numTicks\":6,\"maxSelf\":3},"
                    "\"metadata\":{\"format\":\"single\",\"spyName\":\"\","
                    "\"sampleRate\":1000000000,\"units\":\"samples\",\"name\":\"cpu\"},"
                    "\"timeline\":{\"startTime\":1005,\"samples\":[0,5,0,7],"
                    "\"durationDelta\":15,\"watermarks\":null},"
                    "\"groups\":null,\"heatmap\":null}\n");
}

/*
 * groups: keys sorted byte-wise ("*" < "eu" < "us"); two series without the
 * label both map to "*" and the later one (order 2) wins.
 */
static void test_render_groups(void)
{
    Querier__V1__Level lv[3], *lvp[3];
    qry_flamebearer_t fb;
    example_flamebearer(&fb, lv, lvp);
    uint64_t a[] = {1}, b[] = {2}, c[] = {3}, d[] = {4};
    qry_timeline_t tl = {.start_sec = 0, .step_sec = 15, .samples = d, .n = 0};
    qry_group_t groups[] = {
        {"us", 0, {0, 15, a, 1}},
        {"*", 1, {0, 15, b, 1}},
        {"*", 2, {0, 15, c, 1}},
        {"eu", 3, {0, 15, d, 1}},
    };
    fb.timeline = &tl;
    fb.has_groups = true;
    fb.groups = groups;
    fb.n_groups = 4;
    fb.sample_type = "alloc_objects"; /* objects, rate 100 */
    fb.sample_unit = "count";
    check_json(&fb, "{\"version\":1,\"flamebearer\":{\"names\":[\"total\",\"d\",\"a\",\"c\",\"b\"],"
                    "\"levels\":[[0,6,0,0],[0,5,0,2,0,1,1,1],[0,3,3,4,0,2,2,3]],"
                    "\"numTicks\":6,\"maxSelf\":3},"
                    "\"metadata\":{\"format\":\"single\",\"spyName\":\"\","
                    "\"sampleRate\":100,\"units\":\"objects\",\"name\":\"alloc_objects\"},"
                    "\"timeline\":{\"startTime\":0,\"samples\":[],"
                    "\"durationDelta\":15,\"watermarks\":null},"
                    "\"groups\":{"
                    "\"*\":{\"startTime\":0,\"samples\":[3],\"durationDelta\":15,"
                    "\"watermarks\":null},"
                    "\"eu\":{\"startTime\":0,\"samples\":[4],\"durationDelta\":15,"
                    "\"watermarks\":null},"
                    "\"us\":{\"startTime\":0,\"samples\":[1],\"durationDelta\":15,"
                    "\"watermarks\":null}},"
                    "\"heatmap\":null}\n");
}

/* render-diff: format double, no timeline, leftTicks/rightTicks, a zero one omitted. */
static void test_diff_json(void)
{
    static char *names[] = {"total", "a"};
    static int64_t l0[] = {0, 3, 0, 0, 4, 0, 0}, l1[] = {0, 3, 3, 0, 0, 0, 1};
    Querier__V1__Level lv[2] = {QUERIER__V1__LEVEL__INIT, QUERIER__V1__LEVEL__INIT};
    Querier__V1__Level *lvp[2] = {&lv[0], &lv[1]};
    lv[0].values = l0;
    lv[0].n_values = 7;
    lv[1].values = l1;
    lv[1].n_values = 7;
    qry_flamebearer_t fb = {.names = names,
                            .n_names = 2,
                            .levels = lvp,
                            .n_levels = 2,
                            .total = 7,
                            .max_self = 3,
                            .diff = true,
                            .left_ticks = 3,
                            .right_ticks = 0,
                            .sample_type = "inuse_space",
                            .sample_unit = "bytes"};
    check_json(&fb, "{\"version\":1,\"flamebearer\":{\"names\":[\"total\",\"a\"],"
                    "\"levels\":[[0,3,0,0,4,0,0],[0,3,3,0,0,0,1]],\"numTicks\":7,\"maxSelf\":3},"
                    "\"metadata\":{\"format\":\"double\",\"spyName\":\"\",\"sampleRate\":100,"
                    "\"units\":\"bytes\",\"name\":\"inuse_space\"},"
                    "\"timeline\":null,\"groups\":null,\"heatmap\":null,\"leftTicks\":3}\n");
}

/* Go's encoding/json: <, >, & and U+2028 as \u escapes, control bytes as
 * \u00XX (\n, \t, \b, \f short), invalid UTF-8 as U+FFFD, é as is. */
static void test_string_escaping(void)
{
    char *names[] = {"a<b>&\"\\\n\t\b\f\x01\xe2\x80\xa8\xff\xc3\xa9"};
    char *empty[] = {NULL};
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(qry_string_array_json(names, 1, &out));
    LC_ASSERT_OK(lc_buf_putc(&out, '\0'));
    LC_ASSERT_STR_EQ((const char *)out.data, "[\"a\\u003cb\\u003e\\u0026\\\"\\\\\\n\\t\\b\\f"
                                             "\\u0001\\u2028\\ufffd\xc3\xa9\"]\n");
    lc_buf_reset(&out);
    LC_ASSERT_OK(qry_string_array_json(empty, 0, &out)); /* a nil Go slice */
    LC_ASSERT_OK(lc_buf_putc(&out, '\0'));
    LC_ASSERT_STR_EQ((const char *)out.data, "null\n");
    lc_buf_fini(&out);
}

/* ------------------------------------------------------------------- DOT */

/* A samples/count pprof with the given stacks (names root first, ';'). */
static Google__V1__Profile *build_pprof(const char *const *stacks, const int64_t *values, size_t n,
                                        lc_arena_t *a)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "samples", "count");
    for (size_t i = 0; i < n; i++) {
        uint64_t locs[8];
        size_t depth = 0;
        char copy[128];
        snprintf(copy, sizeof(copy), "%s", stacks[i]);
        char *save = NULL;
        for (char *f = strtok_r(copy, ";", &save); f && depth < 8; f = strtok_r(NULL, ";", &save)) {
            uint64_t fn = lc_pprof_builder_function(b, f, f, "", 0);
            lc_pprof_line_t line = {fn, 1};
            locs[depth++] = lc_pprof_builder_location(b, 0, 0, &line, 1);
        }
        for (size_t k = 0; k < depth / 2; k++) { /* leaf first */
            uint64_t t = locs[k];
            locs[k] = locs[depth - 1 - k];
            locs[depth - 1 - k] = t;
        }
        lc_pprof_builder_sample(b, locs, depth, &values[i], NULL, 0);
    }
    lc_pprof_t *p = lc_test_pprof_built(b, a);
    LC_CHECK(p != NULL);
    return p;
}

static char *dot_of(const Google__V1__Profile *p, size_t nodes)
{
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(qry_pprof_to_dot(p, nodes, &out));
    LC_ASSERT_OK(lc_buf_putc(&out, '\0'));
    size_t len;
    return (char *)lc_buf_steal(&out, &len);
}

static void check_has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fprintf(stderr, "  missing: %s\n", want);
    LC_CHECK(strstr(text, want) != NULL);
}

/*
 * main;a;b=3 main;a;c=2 main;d=1 (total 6). cum: main 6, a 5, b 3, c 2, d 1;
 * flat: b 3, c 2, d 1. Ranked by cum. Edges, heaviest first: main->a 5,
 * a->b 3, a->c 2, main->d 1. main and a have no flat: "0 of <cum>".
 */
static void test_dot_graph(void)
{
    static const char *const stacks[] = {"main;a;b", "main;a;c", "main;d"};
    static const int64_t values[] = {3, 2, 1};
    lc_arena_t *a = lc_arena_new(1 << 20);
    Google__V1__Profile *p = build_pprof(stacks, values, 3, a);
    char *dot = p ? dot_of(p, 100) : NULL;
    if (dot) {
        check_has(dot, "digraph \"unnamed\" {\n");
        check_has(dot,
                  "label=\"Type: samples\\lShowing nodes accounting for 6, 100% of 6 total\\l");
        check_has(dot, "N1 [label=\"main\\n0 of 6 (100%)\"");
        check_has(dot, "N2 [label=\"a\\n0 of 5 (83.33%)\"");
        check_has(dot, "N3 [label=\"b\\n3 (50.00%)\"");
        check_has(dot, "N4 [label=\"c\\n2 (33.33%)\"");
        check_has(dot, "N5 [label=\"d\\n1 (16.67%)\"");
        const char *e1 = strstr(dot, "N1 -> N2 [label=\" 5\""),
                   *e2 = strstr(dot, "N2 -> N3 [label=\" 3\"");
        const char *e3 = strstr(dot, "N2 -> N4 [label=\" 2\""),
                   *e4 = strstr(dot, "N1 -> N5 [label=\" 1\"");
        LC_CHECK(e1 && e2 && e3 && e4 && e1 < e2 && e2 < e3 && e3 < e4);
        LC_CHECK(dot[strlen(dot) - 2] == '}');
    }
    lc_free(dot);
    lc_arena_free(a);
}

/*
 * main;mid;leaf=1 main;leaf2=10: cum main 11, leaf2 10, mid 1, leaf 1 (flat
 * 1 beats mid's 0). Three nodes: main, leaf2, leaf; mid is gone, so main ->
 * leaf is a residual edge (dotted, "main ... leaf"), and the legend says 3 of 4.
 */
static void test_dot_top_nodes(void)
{
    static const char *const stacks[] = {"main;mid;leaf", "main;leaf2"};
    static const int64_t values[] = {1, 10};
    lc_arena_t *a = lc_arena_new(1 << 20);
    Google__V1__Profile *p = build_pprof(stacks, values, 2, a);
    char *dot = p ? dot_of(p, 3) : NULL;
    if (dot) {
        check_has(dot, "Showing top 3 nodes out of 4\\l");
        check_has(dot, "N3 [label=\"leaf\\n1 (9.09%)\"");
        LC_CHECK(strstr(dot, "label=\"mid") == NULL);
        check_has(dot, "N1 -> N3 [label=\" 1\"");
        check_has(dot, "style=\"dotted\" tooltip=\"main ... leaf (1)\"");
    }
    lc_free(dot);
    lc_arena_free(a);
}

/* No samples: no graph at all (the endpoint then sends an empty body). */
static void test_dot_empty(void)
{
    lc_arena_t *a = lc_arena_new(1 << 20);
    Google__V1__Profile *p = build_pprof(NULL, NULL, 0, a);
    char *dot = p ? dot_of(p, 100) : NULL;
    if (dot)
        LC_ASSERT_STR_EQ(dot, "");
    lc_free(dot);
    lc_arena_free(a);
}

LC_TEST_MAIN(test_point_interval_ladder, test_timeline, test_render_json_golden, test_render_groups,
             test_diff_json, test_string_escaping, test_dot_graph, test_dot_top_nodes,
             test_dot_empty)
