/*
 * test_querier_rpc.c — the querier's RPC handlers called directly (no HTTP)
 * against a real store in a temporary dir. Inputs are hand-made so every
 * expected answer is worked out in the comments; testdata only supplies one
 * Go CPU profile whose totals come from MANIFEST.jsonl.
 */
#include "querier_fixture.h"

/* -------------------------------------------------------- listing RPCs */

static void test_profile_types(void)
{
    Querier__V1__ProfileTypesRequest r = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    r.start = T0_MS - 1000;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_profile_types, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__ProfileTypesResponse *resp = (void *)c.out;
    LC_ASSERT_EQ(resp->n_profile_types, 2);
    if (resp->n_profile_types == 2) {
        const Types__V1__ProfileType *pt = resp->profile_types[0];
        LC_ASSERT_STR_EQ(pt->id, CPU_ID);
        LC_ASSERT_STR_EQ(pt->name, "process_cpu");
        LC_ASSERT_STR_EQ(pt->sample_type, "cpu");
        LC_ASSERT_STR_EQ(pt->sample_unit, "nanoseconds");
        LC_ASSERT_STR_EQ(pt->period_type, "cpu");
        LC_ASSERT_STR_EQ(pt->period_unit, "nanoseconds");
        LC_ASSERT_STR_EQ(resp->profile_types[1]->id, SAMPLES_ID);
    }
    call_fini(&c);

    /* start = end = 0 means the last 24 h: the 2023 data is not in it. */
    r.start = r.end = 0;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_profile_types, &r, NULL);
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesResponse *)c.out)->n_profile_types, 0);
    call_fini(&c);
}

static void run_label_names(call_t *c, const char *accept, char **matchers, size_t n, int64_t start,
                            int64_t end)
{
    Types__V1__LabelNamesRequest r = TYPES__V1__LABEL_NAMES_REQUEST__INIT;
    r.matchers = matchers;
    r.n_matchers = n;
    r.start = start;
    r.end = end;
    call_init(c, accept, NULL);
    call_run(c, qry_rpc_label_names, &r, NULL);
}

/* k8s.pod is not a legacy name: listed only with allow-utf8-labelnames. */
static void test_label_names(void)
{
    call_t c;
    run_label_names(&c, NULL, NULL, 0, T0_MS, T0_MS + 60000);
    LC_ASSERT_OK(c.rc);
    static const char *const legacy[] = {"__name__", "__profile_type__", "region", "service_name"};
    const Types__V1__LabelNamesResponse *resp = (void *)c.out;
    check_strings(resp->names, resp->n_names, legacy, 4);
    call_fini(&c);

    run_label_names(&c, "application/proto; allow-utf8-labelnames=true", NULL, 0, T0_MS,
                    T0_MS + 60000);
    static const char *const utf8[] = {"__name__", "__profile_type__", "k8s.pod", "region",
                                       "service_name"};
    resp = (void *)c.out;
    check_strings(resp->names, resp->n_names, utf8, 5);
    call_fini(&c);

    char *go[] = {"{service_name=\"go\"}"};
    run_label_names(&c, NULL, go, 1, T0_MS, T0_MS + 60000);
    static const char *const go_names[] = {"__name__", "__profile_type__", "service_name"};
    resp = (void *)c.out;
    check_strings(resp->names, resp->n_names, go_names, 3);
    call_fini(&c);

    /* start > end and a bad matcher are invalid_argument. */
    run_label_names(&c, NULL, NULL, 0, T0_MS + 1, T0_MS);
    LC_CHECK(c.rc != 0);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    char *bad[] = {"{service_name="};
    run_label_names(&c, NULL, bad, 1, T0_MS, T0_MS + 1);
    LC_CHECK(c.rc != 0);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

static const Types__V1__LabelValuesResponse *
run_label_values(call_t *c, const char *name, char **matchers, size_t n, int64_t start, int64_t end)
{
    Types__V1__LabelValuesRequest r = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    r.name = (char *)name;
    r.matchers = matchers;
    r.n_matchers = n;
    r.start = start;
    r.end = end;
    call_init(c, NULL, NULL);
    call_run(c, qry_rpc_label_values, &r, NULL);
    return (const Types__V1__LabelValuesResponse *)c->out;
}

static void test_label_values(void)
{
    call_t c;
    const Types__V1__LabelValuesResponse *resp;
    static const char *const services[] = {"app", "go"};
    resp = run_label_values(&c, "service_name", NULL, 0, T0_MS, T0_MS + 60000);
    LC_ASSERT_OK(c.rc);
    check_strings(resp->names, resp->n_names, services, 2);
    call_fini(&c);

    /* Matchers are OR-ed: region=eu gives app, service_name=go gives go. */
    char *either[] = {"{region=\"eu\"}", "{service_name=\"go\"}"};
    resp = run_label_values(&c, "service_name", either, 2, T0_MS, T0_MS + 60000);
    check_strings(resp->names, resp->n_names, services, 2);
    call_fini(&c);

    /* Only series with a profile in range: from T0+5 s only the us profile. */
    static const char *const us[] = {"us"};
    resp = run_label_values(&c, "region", NULL, 0, T0_MS + 5000, T0_MS + 60000);
    check_strings(resp->names, resp->n_names, us, 1);
    call_fini(&c);

    run_label_values(&c, "", NULL, 0, T0_MS, T0_MS + 1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* label_names service_name + __profile_type__: eu and us project to one set;
 * go has two profile types. Sorted by __profile_type__ first. */
static void test_series(void)
{
    Querier__V1__SeriesRequest r = QUERIER__V1__SERIES_REQUEST__INIT;
    char *names[] = {"service_name", "__profile_type__"};
    r.label_names = names;
    r.n_label_names = 2;
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_series, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SeriesResponse *resp = (void *)c.out;
    static const char *const want[3][2] = {{CPU_ID, "app"}, {CPU_ID, "go"}, {SAMPLES_ID, "go"}};
    LC_ASSERT_EQ(resp->n_labels_set, 3);
    for (size_t i = 0; i < 3 && i < resp->n_labels_set; i++) {
        LC_ASSERT_EQ(resp->labels_set[i]->n_labels, 2);
        LC_ASSERT_STR_EQ(resp->labels_set[i]->labels[0]->name, "__profile_type__");
        LC_ASSERT_STR_EQ(resp->labels_set[i]->labels[0]->value, want[i][0]);
        LC_ASSERT_STR_EQ(resp->labels_set[i]->labels[1]->value, want[i][1]);
    }
    call_fini(&c);
}

/* ------------------------------------------------------------ merging */

static call_t merge_call;

static const Querier__V1__SelectMergeStacktracesResponse *
run_stacktraces(const char *sel, int64_t max_nodes, int format, char **spans, size_t n_spans)
{
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.label_selector = (char *)sel;
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.max_nodes = max_nodes;
    r.format = format;
    r.span_selector = spans;
    r.n_span_selector = n_spans;
    call_init(&merge_call, NULL, NULL);
    call_run_reply(&merge_call, qry_rpc_select_merge_stacktraces, &r, NULL);
    return (const void *)merge_call.out;
}

/* levels[l] holds width[l] values (4 per node). */
static void check_fg(const Querier__V1__FlameGraph *fg, const char *const *names,
                     const int64_t (*levels)[8], const size_t *width, size_t n_names, size_t n,
                     int64_t total, int64_t max_self)
{
    LC_CHECK(fg != NULL);
    if (!fg)
        return;
    check_strings(fg->names, fg->n_names, names, n_names);
    LC_ASSERT_EQ(fg->n_levels, n);
    for (size_t l = 0; l < n && l < fg->n_levels; l++) {
        LC_ASSERT_EQ(fg->levels[l]->n_values, width[l]);
        for (size_t k = 0; k < width[l] && k < fg->levels[l]->n_values; k++)
            LC_ASSERT_EQ(fg->levels[l]->values[k], levels[l][k]);
    }
    LC_ASSERT_EQ(fg->total, total);
    LC_ASSERT_EQ(fg->max_self, max_self);
}

/*
 * Both app profiles (eu + us) merge. L4 has no lines: it is the frame
 * "app+0x400" (/bin/app mapped at 0x1000 from offset 0, address 0x1400).
 * Stacks: main;outer;inner;leaf 10, main;outer;inner 4, main;app+0x400 6,
 * app+0x400 2. Root total 22 self 0; its children by name: app+0x400 (2,
 * self 2) at x 0, main (20) at x 2; main's: app+0x400 (6, self 6) at x 2,
 * outer (14) at x 8; inner (14, self 4) at 8; leaf (10) at 12. x is given
 * relative to the end of the node before it in its level; names are numbered
 * in the walk's order (main's subtree first, the root's app+0x400 last).
 */
static void test_merge_flamegraph(void)
{
    static const char *const names[] = {"total", "main", "outer", "inner", "leaf", "app+0x400"};
    static const size_t width[] = {4, 8, 8, 4, 4};
    static const int64_t levels[5][8] = {{0, 22, 0, 0},
                                         {0, 2, 2, 5, 0, 20, 0, 1},
                                         {2, 6, 6, 5, 0, 14, 0, 2},
                                         {8, 14, 4, 3},
                                         {12, 10, 10, 4}};
    const Querier__V1__SelectMergeStacktracesResponse *resp =
        run_stacktraces("{service_name=\"app\"}", 0, 0, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    if (resp)
        check_fg(resp->flamegraph, names, levels, width, 6, 5, 22, 10);
    call_fini(&merge_call);
}

/*
 * max_nodes 2 (6 nodes): the heap walk (children popped by name, descending)
 * meets main (20), outer (14); inner (14) is not > 14 -> minVal 14. Below 14
 * and folded into "other" after the kept siblings: the root's app+0x400 (2,
 * at x 20), main's app+0x400 (6, at x 14), leaf (10, at x 4 under inner).
 */
static void test_merge_truncated(void)
{
    static const char *const names[] = {"total", "other", "main", "outer", "inner"};
    static const size_t width[] = {4, 8, 8, 4, 4};
    static const int64_t levels[5][8] = {{0, 22, 0, 0},
                                         {0, 20, 0, 2, 0, 2, 2, 1},
                                         {0, 14, 0, 3, 0, 6, 6, 1},
                                         {0, 14, 4, 4},
                                         {4, 10, 10, 1}};
    const Querier__V1__SelectMergeStacktracesResponse *resp =
        run_stacktraces("{service_name=\"app\"}", 2, 0, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    if (resp)
        check_fg(resp->flamegraph, names, levels, width, 5, 5, 22, 10);
    call_fini(&merge_call);
}

static void test_merge_max_nodes_invalid(void)
{
    run_stacktraces("{}", -1, 0, NULL, 0);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
    run_stacktraces("{}", 1048577, 0, NULL, 0);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
    run_stacktraces("{a=", 0, 0, NULL, 0);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
}

/* Tree bytes, children by name descending: root "" self 0 with main and
 * app+0x400 (self 2); main 0 with outer and app+0x400 (self 6); outer 0;
 * inner 4; leaf 10. */
static void test_merge_tree_format(void)
{
    static const uint8_t want[] = {0,   0,   2,   4,   'm', 'a', 'i', 'n', 0,   2,   5,   'o',
                                   'u', 't', 'e', 'r', 0,   1,   5,   'i', 'n', 'n', 'e', 'r',
                                   4,   1,   4,   'l', 'e', 'a', 'f', 10,  0,   9,   'a', 'p',
                                   'p', '+', '0', 'x', '4', '0', '0', 6,   0,   9,   'a', 'p',
                                   'p', '+', '0', 'x', '4', '0', '0', 2,   0};
    const Querier__V1__SelectMergeStacktracesResponse *resp = run_stacktraces(
        "{service_name=\"app\"}", 0, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    if (resp) {
        LC_CHECK(resp->flamegraph == NULL);
        LC_ASSERT_EQ(resp->tree.len, sizeof(want));
        if (resp->tree.len == sizeof(want))
            LC_ASSERT_MEM_EQ(resp->tree.data, want, sizeof(want));
    }
    call_fini(&merge_call);
}

static int64_t profile_total(const Google__V1__Profile *p)
{
    int64_t total = 0;
    for (size_t i = 0; p && i < p->n_sample; i++)
        total += p->sample[i]->value[0];
    return total;
}

static void test_merge_pprof_format(void)
{
    const Querier__V1__SelectMergeStacktracesResponse *resp = run_stacktraces(
        "{service_name=\"app\"}", 0, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    LC_CHECK(resp && resp->pprof && resp->pprof->profile);
    if (resp && resp->pprof)
        LC_ASSERT_EQ(profile_total(resp->pprof->profile), 22);
    call_fini(&merge_call);
}

/* Span a marks only the leaf sample (5 per profile): root total 10. */
static void test_merge_span_selector(void)
{
    char *spans[] = {"000000000000000a"};
    const Querier__V1__SelectMergeStacktracesResponse *resp =
        run_stacktraces("{service_name=\"app\"}", 0, 0, spans, 1);
    LC_ASSERT_OK(merge_call.rc);
    if (resp && resp->flamegraph)
        LC_ASSERT_EQ(resp->flamegraph->total, 10);
    call_fini(&merge_call);
    char *bad[] = {"xyz"};
    run_stacktraces("{}", 0, 0, bad, 1);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
}

/* gopprof-sample.cpu: cpu/nanoseconds total 1760000000 (MANIFEST.jsonl). */
static void test_merge_profile(void)
{
    Querier__V1__SelectMergeProfileRequest r = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.label_selector = "{service_name=\"go\"}";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run_reply(&c, qry_rpc_select_merge_profile, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Google__V1__Profile *p = (const void *)c.out;
    LC_CHECK(p != NULL);
    if (p) {
        LC_ASSERT_EQ(profile_total(p), 1760000000LL);
        LC_ASSERT_EQ(p->n_sample_type, 1);
        LC_ASSERT_STR_EQ(p->string_table[p->sample_type[0]->type], "cpu");
        LC_ASSERT_STR_EQ(p->string_table[p->sample_type[0]->unit], "nanoseconds");
        LC_CHECK(p->period_type != NULL);
    }
    call_fini(&c);

    r.profile_typeid = "not-a-type";
    call_init(&c, NULL, NULL);
    call_run_reply(&c, qry_rpc_select_merge_profile, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* ------------------------------------------------------------- series */

/* group_by region, step 15 s from T0: eu at T0 (t <= start) -> T0; us at
 * T0+10 s -> T0+15 s; each 11. */
static void test_select_series(void)
{
    Querier__V1__SelectSeriesRequest r = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    char *gb[] = {"region"};
    r.profile_typeid = CPU_ID;
    r.label_selector = "{service_name=\"app\"}";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.step = 15;
    r.group_by = gb;
    r.n_group_by = 1;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectSeriesResponse *resp = (const void *)c.out;
    LC_ASSERT_EQ(resp->n_series, 2);
    if (resp->n_series == 2) {
        LC_ASSERT_STR_EQ(resp->series[0]->labels[0]->value, "eu");
        LC_ASSERT_EQ(resp->series[0]->points[0]->timestamp, T0_MS);
        LC_CHECK(resp->series[0]->points[0]->value == 11.0);
        LC_ASSERT_STR_EQ(resp->series[1]->labels[0]->value, "us");
        LC_ASSERT_EQ(resp->series[1]->points[0]->timestamp, T0_MS + 15000);
    }
    call_fini(&c);

    r.step = 0.0001; /* 0.1 ms */
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* ------------------------------------------------------------ the rest */

static void test_profile_stats(void)
{
    Types__V1__GetProfileStatsRequest r = TYPES__V1__GET_PROFILE_STATS_REQUEST__INIT;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_get_profile_stats, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Types__V1__GetProfileStatsResponse *resp = (const void *)c.out;
    LC_CHECK(resp->data_ingested);
    LC_ASSERT_EQ(resp->oldest_profile_time, T0_MS);
    LC_ASSERT_EQ(resp->newest_profile_time, T0_MS + 20000);
    call_fini(&c);
}

/* With multitenancy, tenant other sees only its own service. */
static void test_tenancy(void)
{
    qry_t mt = qry;
    mt.front.opts.multitenancy = true;
    Types__V1__LabelValuesRequest r = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    r.name = "service_name";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, "other");
    call_run(&c, qry_rpc_label_values, &r, &mt);
    LC_ASSERT_OK(c.rc);
    static const char *const secret[] = {"secret"};
    const Types__V1__LabelValuesResponse *resp = (const void *)c.out;
    check_strings(resp->names, resp->n_names, secret, 1);
    call_fini(&c);

    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_label_values, &r, &mt);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNAUTHENTICATED);
    call_fini(&c);
}

/*
 * Diff: left = app/eu (11: main;outer;inner;leaf 5, main;outer;inner 2,
 * main;app+0x400 3, app+0x400 1); right = app/us restricted to span a (leaf
 * path only, 5). Per node: left x, total, self, right x, total, self, name;
 * each x relative to the end of the node before it on that side. app+0x400
 * has nothing on the right.
 */
static void test_diff(void)
{
    Querier__V1__SelectMergeStacktracesRequest left =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    Querier__V1__SelectMergeStacktracesRequest right =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    char *spans[] = {"000000000000000a"};
    left.profile_typeid = right.profile_typeid = CPU_ID;
    left.label_selector = "{region=\"eu\"}";
    right.label_selector = "{region=\"us\"}";
    right.span_selector = spans;
    right.n_span_selector = 1;
    left.start = right.start = T0_MS;
    left.end = right.end = T0_MS + 60000;
    Querier__V1__DiffRequest r = QUERIER__V1__DIFF_REQUEST__INIT;
    r.left = &left;
    r.right = &right;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_diff, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__FlameGraphDiff *fg =
        c.out ? ((Querier__V1__DiffResponse *)c.out)->flamegraph : NULL;
    LC_CHECK(fg != NULL);
    static const size_t width[] = {7, 14, 14, 7, 7};
    static const int64_t want[5][14] = {{0, 11, 0, 0, 5, 0, 0},
                                        {0, 1, 1, 0, 0, 0, 5, 0, 10, 0, 0, 5, 0, 1},
                                        {1, 3, 3, 0, 0, 0, 5, 0, 7, 0, 0, 5, 0, 2},
                                        {4, 7, 2, 0, 5, 0, 3},
                                        {6, 5, 5, 0, 5, 5, 4}};
    if (fg) {
        LC_ASSERT_EQ(fg->n_levels, 5);
        for (size_t l = 0; l < 5 && l < fg->n_levels; l++) {
            LC_ASSERT_EQ(fg->levels[l]->n_values, width[l]);
            for (size_t k = 0; k < width[l] && k < fg->levels[l]->n_values; k++)
                LC_ASSERT_EQ(fg->levels[l]->values[k], want[l][k]);
        }
        LC_ASSERT_EQ(fg->total, 16);
        LC_ASSERT_EQ(fg->leftticks, 11);
        LC_ASSERT_EQ(fg->rightticks, 5);
        LC_ASSERT_EQ(fg->max_self, 5);
    }
    call_fini(&c);

    r.right = NULL;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_diff, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* One async call: FORCE, or a poll of id; the answer in c. */
static void run_async(call_t *c, const char *id)
{
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    Querier__V1__AsyncQueryRequest a = QUERIER__V1__ASYNC_QUERY_REQUEST__INIT;
    a.type = id ? QUERIER__V1__ASYNC_QUERY_TYPE__ASYNC_QUERY_TYPE_DISABLED
                : QUERIER__V1__ASYNC_QUERY_TYPE__ASYNC_QUERY_TYPE_FORCE;
    a.request_id = (char *)(id ? id : "");
    r.profile_typeid = CPU_ID;
    r.label_selector = "{service_name=\"app\"}";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.async = &a;
    call_init(c, NULL, NULL);
    call_run_reply(c, qry_rpc_select_merge_stacktraces, &r, NULL);
}

/* Each submit is answered (the merge of test_merge_flamegraph: 22) and
 * kept; a poll gets the kept answer; past QRY_ASYNC_PER_TENANT kept answers
 * a submit is refused; an unknown id is not_found. */
static void test_async(void)
{
    char first[64] = "";
    for (unsigned i = 0; i <= QRY_ASYNC_PER_TENANT; i++) {
        call_t c;
        run_async(&c, NULL);
        if (i == QRY_ASYNC_PER_TENANT) {
            LC_ASSERT_EQ(c.st.code, LC_CODE_RESOURCE_EXHAUSTED);
        } else {
            LC_ASSERT_OK(c.rc);
            const Querier__V1__SelectMergeStacktracesResponse *resp = (const void *)c.out;
            LC_CHECK(resp && resp->async && resp->flamegraph && resp->flamegraph->total == 22);
            if (resp && resp->async) {
                LC_ASSERT_EQ(resp->async->status,
                             QUERIER__V1__ASYNC_QUERY_STATUS__ASYNC_QUERY_STATUS_SUCCESS);
                if (i == 0)
                    snprintf(first, sizeof(first), "%s", resp->async->request_id);
            }
        }
        call_fini(&c);
    }
    call_t c;
    run_async(&c, first);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectMergeStacktracesResponse *resp = (const void *)c.out;
    LC_CHECK(resp && resp->async && !strcmp(resp->async->request_id, first) && resp->flamegraph &&
             resp->flamegraph->total == 22);
    call_fini(&c);
    run_async(&c, "00000000-0000-4000-8000-000000000000");
    LC_ASSERT_EQ(c.st.code, LC_CODE_NOT_FOUND);
    call_fini(&c);
}

static void test_unimplemented(void)
{
    Querier__V1__SelectHeatmapRequest r = QUERIER__V1__SELECT_HEATMAP_REQUEST__INIT;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_unimplemented, &r, "SelectHeatmap");
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNIMPLEMENTED);
    LC_CHECK(strstr(c.st.msg, "SelectHeatmap") != NULL);
    call_fini(&c);
}

LC_TEST_MAIN(test_setup, test_profile_types, test_label_names, test_label_values, test_series,
             test_merge_flamegraph, test_merge_truncated, test_merge_max_nodes_invalid,
             test_merge_tree_format, test_merge_pprof_format, test_merge_span_selector,
             test_merge_profile, test_select_series, test_profile_stats, test_tenancy, test_diff,
             test_async, test_unimplemented, test_teardown)
