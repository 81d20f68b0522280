/*
 * test_querier_select.c — what narrows a query: the stack-trace selector
 * (call-site focus and Go PGO), profile_id_selector with span_selector, and
 * the §5.9 time-range rules; plus lc_connect_reply_raw, which carries the
 * merged pprof these RPCs answer. The data is querier_fixture.h's: the
 * hand-made profile twice under service app (eu at T0, us at T0+10 s). Per
 * profile, root first:
 *   s1 main; outer, inner (one location, inlined); leaf  = 5  (span a)
 *   s2 main; outer, inner                               = 2  (span b)
 *   s3 main; L4 (a location without lines)              = 3
 *   s4 L4                                               = 1
 * so a profile totals 11. Expected answers are worked out in each comment.
 */
#include "lc/gz.h"
#include "querier_fixture.h"

#define APP "{service_name=\"app\"}"
#define HOUR_MS (3600LL * 1000)

/* --------------------------------------------------------------- helpers */

static Types__V1__StackTraceSelector
call_site(const char *const *names, size_t n, Types__V1__Location *locs, Types__V1__Location **ptrs)
{
    Types__V1__StackTraceSelector sts = TYPES__V1__STACK_TRACE_SELECTOR__INIT;
    for (size_t i = 0; i < n; i++) {
        locs[i] = (Types__V1__Location)TYPES__V1__LOCATION__INIT;
        locs[i].name = (char *)names[i];
        ptrs[i] = &locs[i];
    }
    sts.call_site = ptrs;
    sts.n_call_site = n;
    return sts;
}

typedef struct merge_s {
    const char *sel;
    int64_t start, end;
    int format;
    Types__V1__StackTraceSelector *sts;
    char **spans, **profile_ids;
    size_t n_spans, n_profile_ids;
    qry_t *q;
} merge_t;

static void run_merge(call_t *c, const merge_t *m)
{
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.label_selector = (char *)(m->sel ? m->sel : APP);
    r.start = m->start ? m->start : T0_MS;
    r.end = m->end ? m->end : T0_MS + 60000;
    r.format = m->format;
    r.stack_trace_selector = m->sts;
    r.span_selector = m->spans;
    r.n_span_selector = m->n_spans;
    r.profile_id_selector = m->profile_ids;
    r.n_profile_id_selector = m->n_profile_ids;
    call_init(c, NULL, NULL);
    call_run_reply(c, qry_rpc_select_merge_stacktraces, &r, m->q);
}

/* The flame graph total of a merge, -1 when the call failed. */
static int64_t merge_total(const merge_t *m)
{
    call_t c;
    run_merge(&c, m);
    const Querier__V1__SelectMergeStacktracesResponse *resp = (const void *)c.out;
    int64_t total = c.rc == 0 && resp && resp->flamegraph ? resp->flamegraph->total : -1;
    call_fini(&c);
    return total;
}

static int64_t call_site_total(const char *const *names, size_t n)
{
    Types__V1__Location locs[8], *ptrs[8];
    Types__V1__StackTraceSelector sts = call_site(names, n, locs, ptrs);
    merge_t m = {.sts = &sts};
    return merge_total(&m);
}

static void run_merge_profile(call_t *c, Types__V1__StackTraceSelector *sts, char **profile_ids,
                              size_t n_ids)
{
    Querier__V1__SelectMergeProfileRequest r = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.label_selector = APP;
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.stack_trace_selector = sts;
    r.profile_id_selector = profile_ids;
    r.n_profile_id_selector = n_ids;
    call_init(c, NULL, NULL);
    call_run_reply(c, qry_rpc_select_merge_profile, &r, NULL);
}

static int64_t pprof_total(const Google__V1__Profile *p)
{
    int64_t total = 0;
    for (size_t i = 0; p && i < p->n_sample; i++)
        total += p->sample[i]->value[0];
    return total;
}

static const Google__V1__Location *location(const Google__V1__Profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++) {
        if (p->location[i]->id == id)
            return p->location[i];
    }
    return NULL;
}

static const char *function_name(const Google__V1__Profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_function; i++) {
        if (p->function[i]->id == id)
            return p->string_table[p->function[i]->name];
    }
    return NULL;
}

/* ------------------------------------------------------ call-site focus */

/*
 * Call site main;outer keeps s1 and s2: 7 per profile, 14. Root, main and
 * outer carry no self; inner self 2+2 = 4; leaf 10 at x = inner.x + 4.
 */
static void test_call_site_flamegraph(void)
{
    static const char *const site[] = {"main", "outer"};
    static const char *const names[] = {"total", "main", "outer", "inner", "leaf"};
    static const int64_t levels[5][4] = {
        {0, 14, 0, 0}, {0, 14, 0, 1}, {0, 14, 0, 2}, {0, 14, 4, 3}, {4, 10, 10, 4}};
    Types__V1__Location locs[2], *ptrs[2];
    Types__V1__StackTraceSelector sts = call_site(site, 2, locs, ptrs);
    merge_t m = {.sts = &sts};
    call_t c;
    run_merge(&c, &m);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectMergeStacktracesResponse *resp = (const void *)c.out;
    const Querier__V1__FlameGraph *fg = resp ? resp->flamegraph : NULL;
    LC_CHECK(fg != NULL);
    if (fg) {
        check_strings(fg->names, fg->n_names, names, 5);
        LC_ASSERT_EQ(fg->n_levels, 5);
        for (size_t l = 0; l < 5 && l < fg->n_levels; l++) {
            for (size_t k = 0; k < 4 && k < fg->levels[l]->n_values; k++)
                LC_ASSERT_EQ(fg->levels[l]->values[k], levels[l][k]);
        }
        LC_ASSERT_EQ(fg->total, 14);
        LC_ASSERT_EQ(fg->max_self, 10);
    }
    call_fini(&c);
}

/* Prefix rules: whole names, from the root, inlined frames outermost first. */
static void test_call_site_prefixes(void)
{
    static const char *const main_only[] = {"main"};
    static const char *const full[] = {"main", "outer", "inner", "leaf"};
    static const char *const too_long[] = {"main", "outer", "inner", "leaf", "x"};
    static const char *const not_root[] = {"outer"};
    static const char *const inner_first[] = {"main", "inner"}; /* outer comes before inner */
    static const char *const partial_name[] = {"mai"};
    LC_ASSERT_EQ(call_site_total(main_only, 1), 20); /* s1 + s2 + s3 = 10, twice */
    LC_ASSERT_EQ(call_site_total(full, 4), 10);      /* s1 */
    LC_ASSERT_EQ(call_site_total(too_long, 5), 0);
    LC_ASSERT_EQ(call_site_total(not_root, 1), 0);
    LC_ASSERT_EQ(call_site_total(inner_first, 2), 0);
    LC_ASSERT_EQ(call_site_total(partial_name, 1), 0);
    LC_ASSERT_EQ(call_site_total(NULL, 0), 22); /* an empty call site selects everything */
}

/* SelectSeries per region under main;outer: 7 at each profile's boundary. */
static void test_call_site_series(void)
{
    static const char *const site[] = {"main", "outer"};
    Types__V1__Location locs[2], *ptrs[2];
    Types__V1__StackTraceSelector sts = call_site(site, 2, locs, ptrs);
    Querier__V1__SelectSeriesRequest r = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    char *gb[] = {"region"};
    r.profile_typeid = CPU_ID;
    r.label_selector = APP;
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.step = 15;
    r.group_by = gb;
    r.n_group_by = 1;
    r.stack_trace_selector = &sts;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectSeriesResponse *resp = (const void *)c.out;
    LC_ASSERT_EQ(resp ? resp->n_series : 0, 2);
    for (size_t i = 0; resp && i < resp->n_series && i < 2; i++) {
        LC_ASSERT_EQ(resp->series[i]->n_points, 1);
        LC_CHECK(resp->series[i]->points[0]->value == 7.0);
    }
    call_fini(&c);
}

/* Merged pprof under main;outer: 14, and every stack's root side is main,
 * then the location holding outer (and inner). */
static void test_call_site_pprof(void)
{
    static const char *const site[] = {"main", "outer"};
    Types__V1__Location locs[2], *ptrs[2];
    Types__V1__StackTraceSelector sts = call_site(site, 2, locs, ptrs);
    call_t c;
    run_merge_profile(&c, &sts, NULL, 0);
    LC_ASSERT_OK(c.rc);
    const Google__V1__Profile *p = (const void *)c.out;
    LC_ASSERT_EQ(pprof_total(p), 14);
    for (size_t i = 0; p && i < p->n_sample; i++) {
        const Google__V1__Sample *s = p->sample[i];
        LC_CHECK(s->n_location_id >= 2);
        if (s->n_location_id < 2)
            continue;
        const Google__V1__Location *root = location(p, s->location_id[s->n_location_id - 1]);
        const Google__V1__Location *next = location(p, s->location_id[s->n_location_id - 2]);
        LC_CHECK(root && root->n_line == 1 && next && next->n_line == 2);
        if (root && next && root->n_line == 1 && next->n_line == 2) {
            LC_ASSERT_STR_EQ(function_name(p, root->line[0]->function_id), "main");
            LC_ASSERT_STR_EQ(function_name(p, next->line[1]->function_id), "outer");
        }
    }
    call_fini(&c);

    /* The same through SelectMergeStacktraces format PPROF. */
    merge_t m = {.sts = &sts, .format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF};
    run_merge(&c, &m);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectMergeStacktracesResponse *resp = (const void *)c.out;
    LC_CHECK(resp && resp->pprof && resp->pprof->profile);
    if (resp && resp->pprof)
        LC_ASSERT_EQ(pprof_total(resp->pprof->profile), 14);
    call_fini(&c);
}

static void test_call_site_cap(void)
{
    static const char *names[LC_QUERY_MAX_CALL_SITE + 1];
    Types__V1__Location *locs = calloc(LC_QUERY_MAX_CALL_SITE + 1, sizeof(*locs));
    Types__V1__Location **ptrs = calloc(LC_QUERY_MAX_CALL_SITE + 1, sizeof(*ptrs));
    for (size_t i = 0; i <= LC_QUERY_MAX_CALL_SITE; i++)
        names[i] = "main";
    Types__V1__StackTraceSelector sts = call_site(names, LC_QUERY_MAX_CALL_SITE + 1, locs, ptrs);
    merge_t m = {.sts = &sts};
    call_t c;
    run_merge(&c, &m);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    free(locs);
    free(ptrs);
}

/* ---------------------------------------------------------------- Go PGO */

/*
 * keep_locations 1: each stack keeps its leaf location: leaf 5 (s1), the
 * inner/outer location 2 (s2), L4 3 + 1 (s3, s4), twice: 10, 4, 8 in 3
 * samples, total 22 — and the call site [outer], which alone would select
 * nothing, is ignored because go_pgo is set.
 */
static void test_pgo_keep_locations(void)
{
    static const char *const site[] = {"outer"};
    Types__V1__Location locs[1], *ptrs[1];
    Types__V1__StackTraceSelector sts = call_site(site, 1, locs, ptrs);
    Types__V1__GoPGO pgo = TYPES__V1__GO_PGO__INIT;
    pgo.keep_locations = 1;
    sts.go_pgo = &pgo;
    call_t c;
    run_merge_profile(&c, &sts, NULL, 0);
    LC_ASSERT_OK(c.rc);
    const Google__V1__Profile *p = (const void *)c.out;
    LC_ASSERT_EQ(pprof_total(p), 22);
    LC_ASSERT_EQ(p ? p->n_sample : 0, 3);
    for (size_t i = 0; p && i < p->n_sample; i++)
        LC_ASSERT_EQ(p->sample[i]->n_location_id, 1);
    call_fini(&c);
}

/*
 * aggregate_callees: the leaf location's innermost line gets line 0 (leaf
 * was line 31; the inlined location's inner was 21); callers keep theirs
 * (main line 2). Totals unchanged: 22.
 */
static void test_pgo_aggregate_callees(void)
{
    Types__V1__StackTraceSelector sts = TYPES__V1__STACK_TRACE_SELECTOR__INIT;
    Types__V1__GoPGO pgo = TYPES__V1__GO_PGO__INIT;
    pgo.aggregate_callees = true;
    sts.go_pgo = &pgo;
    call_t c;
    run_merge_profile(&c, &sts, NULL, 0);
    LC_ASSERT_OK(c.rc);
    const Google__V1__Profile *p = (const void *)c.out;
    LC_ASSERT_EQ(pprof_total(p), 22);
    for (size_t i = 0; p && i < p->n_sample; i++) {
        const Google__V1__Sample *s = p->sample[i];
        const Google__V1__Location *leaf = location(p, s->location_id[0]);
        if (leaf && leaf->n_line)
            LC_ASSERT_EQ(leaf->line[0]->line, 0);
        const Google__V1__Location *root = location(p, s->location_id[s->n_location_id - 1]);
        if (s->n_location_id > 1 && root && root->n_line)
            LC_ASSERT_EQ(root->line[0]->line, 2);
    }
    call_fini(&c);
}

/* -------------------------------------------------------- sample ids */

/*
 * profile_id_selector names the same stored id as span_selector (the
 * profile_id/span_id pprof label): b marks s2 (2 per profile, 4); a marks s1
 * (10). Given both, a sample needs an id in each: a and b -> nothing.
 */
static void test_profile_ids(void)
{
    char *a[] = {"000000000000000a"}, *b[] = {"000000000000000B"};
    merge_t m = {.profile_ids = b, .n_profile_ids = 1};
    LC_ASSERT_EQ(merge_total(&m), 4);
    m = (merge_t){.profile_ids = a, .n_profile_ids = 1, .spans = a, .n_spans = 1};
    LC_ASSERT_EQ(merge_total(&m), 10);
    m = (merge_t){.profile_ids = b, .n_profile_ids = 1, .spans = a, .n_spans = 1};
    LC_ASSERT_EQ(merge_total(&m), 0);

    call_t c;
    run_merge_profile(&c, NULL, a, 1);
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(pprof_total((const void *)c.out), 10);
    call_fini(&c);

    /* Pyroscope profile UUIDs select whole profiles; the fixture's were
     * stored without one, so none matches (Push tests cover the matches). */
    char *uuid[] = {"6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff", "6F2E49DDF2B14BF8821BA1CC9F070AFF"};
    m = (merge_t){.profile_ids = uuid, .n_profile_ids = 2};
    run_merge(&c, &m);
    LC_ASSERT_OK(c.rc);
    call_fini(&c);
    LC_ASSERT_EQ(merge_total(&m), 0);
    /* One form per list; an id of neither form is the client's error. */
    char *mixed[] = {"000000000000000a", "6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff"};
    char *mixed2[] = {"6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff", "000000000000000a"};
    char *bad[] = {"6f2e49dd-f2b1-4bf8-821b-a1cc9f070af"};
    char **invalid[] = {mixed, mixed2, bad};
    size_t n_invalid[] = {2, 2, 1};
    for (size_t i = 0; i < 3; i++) {
        m = (merge_t){.profile_ids = invalid[i], .n_profile_ids = n_invalid[i]};
        run_merge(&c, &m);
        LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
        call_fini(&c);
    }
    char *trace[] = {"0123456789abcdef0123456789abcdef"};
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.trace_id_selector = trace;
    r.n_trace_id_selector = 1;
    call_init(&c, NULL, NULL);
    call_run_reply(&c, qry_rpc_select_merge_stacktraces, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNIMPLEMENTED);
    call_fini(&c);
}

/* ---------------------------------------------------------- time range */

static void check_too_long(const call_t *c, const char *actual)
{
    LC_ASSERT_EQ(c->st.code, LC_CODE_INVALID_ARGUMENT);
    char want[128];
    snprintf(want, sizeof(want), "max_query_length, actual: %s, limit: 24h0m0s", actual);
    if (!strstr(c->st.msg, want))
        fprintf(stderr, "  message: %s\n", c->st.msg);
    LC_CHECK(strstr(c->st.msg, want) != NULL);
}

/* 24 h is the longest range; 0 turns the rule off. */
static void test_max_query_length(void)
{
    call_t c;
    merge_t m = {.end = T0_MS + 24 * HOUR_MS};
    LC_ASSERT_EQ(merge_total(&m), 22);
    m.end = T0_MS + 25 * HOUR_MS;
    run_merge(&c, &m);
    check_too_long(&c, "25h0m0s");
    call_fini(&c);
    m.end = T0_MS + 24 * HOUR_MS + 1500;
    run_merge(&c, &m);
    check_too_long(&c, "24h0m1.5s");
    call_fini(&c);

    qry_t open = qry;
    open.front.opts.max_query_length_ms = 0;
    m = (merge_t){.end = T0_MS + 1000 * HOUR_MS, .q = &open};
    LC_ASSERT_EQ(merge_total(&m), 22);

    /* start after end is its own error. */
    m = (merge_t){.start = T0_MS + 1, .end = T0_MS};
    run_merge(&c, &m);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    LC_CHECK(strstr(c.st.msg, "must not be after") != NULL);
    call_fini(&c);
}

/* The rule covers SelectSeries and each side of Diff, and the listing RPCs
 * only when they send both start and end. */
static void test_max_query_length_everywhere(void)
{
    Querier__V1__SelectSeriesRequest sr = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    sr.profile_typeid = CPU_ID;
    sr.start = T0_MS;
    sr.end = T0_MS + 48 * HOUR_MS;
    sr.step = 60;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &sr, NULL);
    check_too_long(&c, "48h0m0s");
    call_fini(&c);

    Querier__V1__SelectMergeStacktracesRequest left =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    Querier__V1__SelectMergeStacktracesRequest right = left;
    left.profile_typeid = right.profile_typeid = CPU_ID;
    left.start = right.start = T0_MS;
    left.end = T0_MS + 60000;
    right.end = T0_MS + 30 * HOUR_MS;
    Querier__V1__DiffRequest dr = QUERIER__V1__DIFF_REQUEST__INIT;
    dr.left = &left;
    dr.right = &right;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_diff, &dr, NULL);
    check_too_long(&c, "30h0m0s");
    call_fini(&c);

    Types__V1__LabelValuesRequest lr = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    lr.name = "service_name";
    lr.start = T0_MS;
    lr.end = T0_MS + 25 * HOUR_MS;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_label_values, &lr, NULL);
    check_too_long(&c, "25h0m0s");
    call_fini(&c);
    lr.start = 0; /* no start: not limited, as Pyroscope's GetTimeRange */
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_label_values, &lr, NULL);
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(c.out ? ((Types__V1__LabelValuesResponse *)c.out)->n_names : 0, 2);
    call_fini(&c);
}

/*
 * Look-back: with now - lookback = T0 + 5 s (a few ms of slack), a range from
 * T0 loses the eu profile at T0 and keeps us at T0+10 s: 11. A range wholly
 * before the look-back is empty, not an error, even when it is also too long.
 */
static void test_lookback(void)
{
    qry_t lb = qry;
    lb.front.opts.max_query_lookback_ms = qry_now_ms() - (T0_MS + 5000);
    merge_t m = {.q = &lb};
    LC_ASSERT_EQ(merge_total(&m), 11);

    lb.front.opts.max_query_lookback_ms = HOUR_MS; /* all data is from 2023 */
    m = (merge_t){.q = &lb};
    LC_ASSERT_EQ(merge_total(&m), 0);
    m = (merge_t){.start = T0_MS - 30 * 24 * HOUR_MS, .q = &lb};
    LC_ASSERT_EQ(merge_total(&m), 0);

    Querier__V1__SelectSeriesRequest sr = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    sr.profile_typeid = CPU_ID;
    sr.start = T0_MS;
    sr.end = T0_MS + 60000;
    sr.step = 15;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &sr, &lb);
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(c.out ? ((Querier__V1__SelectSeriesResponse *)c.out)->n_series : 1, 0);
    call_fini(&c);

    Types__V1__LabelValuesRequest lr = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    lr.name = "service_name";
    lr.start = T0_MS;
    lr.end = T0_MS + 60000;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_label_values, &lr, &lb);
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(c.out ? ((Types__V1__LabelValuesResponse *)c.out)->n_names : 1, 0);
    call_fini(&c);

    call_t pc;
    Querier__V1__SelectMergeProfileRequest pr = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    pr.profile_typeid = CPU_ID;
    pr.start = T0_MS;
    pr.end = T0_MS + 60000;
    call_init(&pc, NULL, NULL);
    call_run_reply(&pc, qry_rpc_select_merge_profile, &pr, &lb);
    LC_ASSERT_OK(pc.rc);
    LC_ASSERT_EQ(pc.out ? ((Google__V1__Profile *)pc.out)->n_sample : 1, 0);
    call_fini(&pc);
}

static void test_format_duration(void)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {{0, "0s"},       {250, "250ms"},  {1000, "1s"},        {1500, "1.5s"},
                 {1250, "1.25s"}, {61000, "1m1s"}, {3600000, "1h0m0s"}, {90061001, "25h1m1.001s"}};
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        char got[64];
        qry_format_duration(cases[i].ms, got, sizeof(got));
        LC_ASSERT_STR_EQ(got, cases[i].want);
    }
}

/* ------------------------------------------------- lc_connect_reply_raw */

/*
 * ProfileTypesRequest{start 150, end 127} is 08 96 01 10 7f. Proto: the bytes
 * go out as they are; JSON: decoded and written ({"start":"150","end":"127"},
 * int64 as strings); gzip when accepted; bytes that do not decode: internal.
 */
static void test_reply_raw(void)
{
    static const uint8_t bytes[] = {0x08, 0x96, 0x01, 0x10, 0x7f};
    const ProtobufCMessageDescriptor *d = &querier__v1__profile_types_request__descriptor;
    call_t c;
    call_init(&c, NULL, NULL);
    lc_buf_init(&c.req.resp_body, 1 << 20);
    lc_connect_reply_raw(&c.req, LC_CONNECT_PROTO, d, bytes, sizeof(bytes));
    LC_ASSERT_EQ(c.req.status, 200);
    LC_ASSERT_EQ(c.req.resp_body.len, sizeof(bytes));
    LC_ASSERT_MEM_EQ(c.req.resp_body.data, bytes, sizeof(bytes));
    call_fini(&c);

    const char *json = "{\"start\":\"150\",\"end\":\"127\"}";
    call_init(&c, NULL, NULL);
    lc_buf_init(&c.req.resp_body, 1 << 20);
    lc_connect_reply_raw(&c.req, LC_CONNECT_JSON, d, bytes, sizeof(bytes));
    LC_ASSERT_EQ(c.req.resp_body.len, strlen(json));
    LC_ASSERT_MEM_EQ(c.req.resp_body.data, json, strlen(json));
    call_fini(&c);

    call_init(&c, NULL, NULL);
    c.headers[c.req.n_headers++] = (lc_http_header_t){"accept-encoding", "gzip"};
    lc_buf_init(&c.req.resp_body, 1 << 20);
    lc_connect_reply_raw(&c.req, LC_CONNECT_PROTO, d, bytes, sizeof(bytes));
    lc_buf_t plain;
    lc_buf_init(&plain, 1 << 16);
    LC_ASSERT_OK(lc_gunzip(c.req.resp_body.data, c.req.resp_body.len, 1 << 16, &plain));
    LC_ASSERT_EQ(plain.len, sizeof(bytes));
    LC_ASSERT_MEM_EQ(plain.data, bytes, sizeof(bytes));
    lc_buf_fini(&plain);
    call_fini(&c);

    static const uint8_t broken[] = {0x0a, 0x05, 0x01};
    call_init(&c, NULL, NULL);
    lc_buf_init(&c.req.resp_body, 1 << 20);
    lc_connect_reply_raw(&c.req, LC_CONNECT_JSON, d, broken, sizeof(broken));
    LC_ASSERT_EQ(c.req.status, 500);
    call_fini(&c);
}

LC_TEST_MAIN(test_setup, test_call_site_flamegraph, test_call_site_prefixes, test_call_site_series,
             test_call_site_pprof, test_call_site_cap, test_pgo_keep_locations,
             test_pgo_aggregate_callees, test_profile_ids, test_max_query_length,
             test_max_query_length_everywhere, test_lookback, test_format_duration, test_reply_raw,
             test_teardown)
